package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// traceTick is the tick of the trace tests: 2026-11-24T03:00:00Z.
const traceTick = int64(1795489200)

// logLine is one JSON log line of a daemon, at ms milliseconds (fractional)
// after traceTick; extra are the attributes after msg.
func logLine(ms float64, msg, extra string) string {
	t := time.Unix(traceTick, 0).Add(time.Duration(ms * float64(time.Millisecond))).UTC()
	return fmt.Sprintf(`{"time":%q,"level":"DEBUG","msg":%q%s}`, t.Format(time.RFC3339Nano), msg, extra)
}

// tickAttr is the "tick" attribute as the scheduler logs it.
func tickAttr(tick int64) string {
	return fmt.Sprintf(`,"tick":%q`, time.Unix(tick, 0).UTC().Format(time.RFC3339))
}

// TestParseTrace: the offsets after the tick of each step, taken on the
// daemon that ran the job (the tickstamp file says which), the earliest
// line of each kind, batches without a win left out of "decided", lines
// of other ticks, manual runs and non-JSON lines ignored; the batches of
// all daemons in the order decided; another daemon's batch that won
// nothing decided before the job's first instruction counts as an
// overlap; logs without debug lines are an error.
func TestParseTrace(t *testing.T) {
	ms := func(f float64) time.Duration { return time.Duration(f * float64(time.Millisecond)) }
	tk := tickAttr(traceTick)
	cases := []struct {
		name       string
		logs       map[string][]string
		starts     []string // tickstamp lines
		want       []time.Duration
		wantN      []int
		daemon     time.Duration // tick -> starting the job
		proc       time.Duration // starting the job -> first instruction
		handoff    time.Duration // starting the job -> job started
		overlapped int
		batches    []tickBatchRow
		losers     traceStep // n, p50, p99 only
		err        string
	}{
		{
			name: "one start",
			logs: map[string][]string{
				"d0": {
					"leasecron starting (text, not JSON)",
					logLine(0.5, msgTrying, tk+`,"jobs":8`),
					logLine(1.5, msgDecided, tk+`,"jobs":8,"won":8`),
					logLine(2, msgStarting, `,"job":"tick-0"`+tk+`,"fence":3`),
					logLine(2.5, msgStarting, `,"job":"tick-1"`+tk+`,"fence":3`),
					logLine(9, msgStarted, `,"job":"tick-0"`+tk+`,"fence":3,"pid":42`),
					logLine(900, msgTrying, tickAttr(traceTick+10)+`,"jobs":8`),
					logLine(1, msgStarting, `,"job":"tick-0","tick":"manual"`),
				},
				"d1": {
					logLine(51, msgTrying, tk+`,"jobs":3`),
					logLine(52, msgDecided, tk+`,"jobs":3,"won":0`),
				},
			},
			starts:     []string{fmt.Sprintf("tick-0 %d d0 %d", traceTick, traceTick*1e9+int64(ms(12)))},
			want:       []time.Duration{ms(0.5), ms(1.5), ms(2), ms(9), ms(12)},
			wantN:      []int{1, 1, 1, 1, 1},
			daemon:     ms(2),
			proc:       ms(10),
			handoff:    ms(7),
			overlapped: 0, // d1's batch that won nothing was decided after the job's first instruction
			batches:    []tickBatchRow{{order: 1, p50: ms(1.5), p99: ms(1.5), jobs: 8, won: 8, ticks: 1}, {order: 2, p50: ms(52), p99: ms(52), jobs: 3, won: 0, ticks: 1}},
			losers:     traceStep{n: 1, p50: ms(52), p99: ms(52)},
		},
		{
			name: "earliest lines, a win in a later batch, an overlap, a duplicate start",
			logs: map[string][]string{
				"d0": {
					logLine(60, msgTrying, tk+`,"jobs":2`),
					logLine(20, msgDecided, tk+`,"jobs":6,"won":0`),
					logLine(10, msgTrying, tk+`,"jobs":6`),
					logLine(70, msgDecided, tk+`,"jobs":2,"won":1`),
					logLine(71, msgStarting, `,"job":"tick-2"`+tk),
					logLine(80, msgStarted, `,"job":"tick-2"`+tk),
				},
				"d1": {
					logLine(1, msgTrying, fmt.Sprintf(`,"tick":%d,"jobs":8`, traceTick)),
					logLine(3, msgDecided, fmt.Sprintf(`,"tick":%d,"jobs":8,"won":0`, traceTick)),
				},
			},
			starts: []string{
				fmt.Sprintf("tick-2 %d d0 %d", traceTick, traceTick*1e9+int64(ms(75))),
				fmt.Sprintf("tick-2 %d d1 %d", traceTick, traceTick*1e9+int64(ms(5))),
				"not a start line",
			},
			want:       []time.Duration{ms(10), ms(70), ms(71), ms(80), ms(75)},
			wantN:      []int{1, 1, 1, 1, 1},
			daemon:     ms(71),
			proc:       ms(4),
			handoff:    ms(9),
			overlapped: 1, // d1's batch that won nothing, at 3 ms
			batches: []tickBatchRow{{order: 1, p50: ms(3), p99: ms(3), jobs: 8, won: 0, ticks: 1},
				{order: 2, p50: ms(20), p99: ms(20), jobs: 6, won: 0, ticks: 1}, {order: 3, p50: ms(70), p99: ms(70), jobs: 2, won: 1, ticks: 1}},
			losers: traceStep{n: 2, p50: ms(3), p99: ms(20)},
		},
		{
			name: "a start without daemon lines of its own",
			logs: map[string][]string{
				"d0": {logLine(1, msgTrying, tk+`,"jobs":8`)},
				"d1": {},
			},
			starts: []string{fmt.Sprintf("tick-0 %d d1 %d", traceTick, traceTick*1e9+int64(ms(30)))},
			want:   []time.Duration{0, 0, 0, 0, ms(30)},
			wantN:  []int{0, 0, 0, 0, 1},
			// d1's log has no line: the steps have no data but the start
			// itself; no batch was decided.
			batches: []tickBatchRow{},
		},
		{
			name:   "info logs only",
			logs:   map[string][]string{"d0": {strings.Replace(logLine(9, msgStarted, `,"job":"tick-0"`+tk), "DEBUG", "INFO", 1)}},
			starts: []string{fmt.Sprintf("tick-0 %d d0 %d", traceTick, traceTick*1e9+int64(ms(12)))},
			err:    "--log-level debug",
		},
		{
			name:   "no start in the window",
			logs:   map[string][]string{"d0": {logLine(1, msgTrying, tk+`,"jobs":8`)}},
			starts: []string{fmt.Sprintf("tick-0 %d d0 %d", traceTick+100, (traceTick+100)*1e9)},
			err:    "no job started",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			logs := map[string]string{}
			for host, lines := range tc.logs {
				p := filepath.Join(dir, host+".log")
				if err := os.WriteFile(p, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
					t.Fatal(err)
				}
				logs[host] = p
			}
			starts := filepath.Join(dir, "starts.txt")
			if err := os.WriteFile(starts, []byte(strings.Join(tc.starts, "\n")+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			tr, err := parseTrace(logs, starts, traceTick-5, traceTick+5)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want one containing %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(tr.steps) != len(tc.want) {
				t.Fatalf("%d steps, want %d", len(tr.steps), len(tc.want))
			}
			for i, s := range tr.steps {
				if s.p50 != tc.want[i] || s.p99 != tc.want[i] || s.n != tc.wantN[i] {
					t.Errorf("step %q: p50 %v p99 %v n %d, want %v, %v, %d", s.name, s.p50, s.p99, s.n, tc.want[i], tc.want[i], tc.wantN[i])
				}
			}
			if tr.daemonPart.p50 != tc.daemon || tr.procPart.p50 != tc.proc || tr.handoff.p50 != tc.handoff {
				t.Errorf("daemon part %v, process part %v, hand-off %v; want %v, %v, %v",
					tr.daemonPart.p50, tr.procPart.p50, tr.handoff.p50, tc.daemon, tc.proc, tc.handoff)
			}
			if tr.overlapped != tc.overlapped {
				t.Errorf("overlapped = %d, want %d", tr.overlapped, tc.overlapped)
			}
			if fmt.Sprint(tr.batches) != fmt.Sprint(tc.batches) {
				t.Errorf("batches = %v, want %v", tr.batches, tc.batches)
			}
			if l := tr.losers; l.n != tc.losers.n || l.p50 != tc.losers.p50 || l.p99 != tc.losers.p99 {
				t.Errorf("losers: n %d p50 %v p99 %v, want %d, %v, %v", l.n, l.p50, l.p99, tc.losers.n, tc.losers.p50, tc.losers.p99)
			}
		})
	}
}

// TestWriteTickTrace: the table and the computed sentences from the
// numbers, and one line saying why when there is no trace.
func TestWriteTickTrace(t *testing.T) {
	ms := time.Millisecond
	b := &bench{}
	b.daemon = daemonResults{daemons: 3, jobs: 8, p99: 40 * ms,
		floors: []floorRow{{procs: daemonJobs, p50: 10 * ms, p99: 20 * ms}},
		trace: tickTrace{
			steps:      []traceStep{{name: "first", p50: ms, p99: 2 * ms, n: 10}, {name: "job's first instruction", p50: 15 * ms, p99: 40 * ms, n: 10}},
			daemonPart: traceStep{p50: 2 * ms, p99: 4 * ms, n: 10},
			procPart:   traceStep{p50: 13 * ms, p99: 30 * ms, n: 10},
			handoff:    traceStep{p50: 6 * ms, p99: 20 * ms, n: 10},
			overlapped: 5,
			losers:     traceStep{n: 20, p50: 50 * ms, p99: 52 * ms},
			batches: []tickBatchRow{{order: 1, p50: ms, p99: 2 * ms, jobs: 3, won: 3, ticks: 10},
				{order: 2, p50: 3 * ms, p99: 5 * ms, jobs: 5, won: 5, ticks: 10}, {order: 3, p50: 50 * ms, p99: 52 * ms, jobs: 3, won: 0, ticks: 10}},
		}}
	var sb strings.Builder
	b.writeTickTrace(&sb)
	out := sb.String()
	for _, want := range []string{
		"| first | 1.00 ms | 2.00 ms | 10 |",
		"p50 2.00 ms, p99 4.00 ms",
		"p50 13.0 ms, p99 30.0 ms",
		"p50 10.0 ms, p99 20.0 ms (process part / floor at p99: 1.50×)",
		"is 10 % of the tick-to-start p99 (40.0 ms)",
		", of which p50 6.00 ms, p99 20.0 ms pass until the supervisor reports",
		"At a typical tick 2 batches win jobs",
		"the last decided p50 3.00 ms after the tick.",
		"(20 batches that won nothing: their jobs were taken) were decided p50 50.0 ms, p99 52.0 ms after it; in 5 of 10 starts such a batch",
		"| 1st | 1.00 ms | 2.00 ms | 3 | 3 | 10 |",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	b.daemon.trace = tickTrace{note: "no debug lines"}
	sb.Reset()
	b.writeTickTrace(&sb)
	if got := sb.String(); got != "*Where the tick-to-start time goes* was not measured: no debug lines.\n\n" {
		t.Errorf("without a trace: %q", got)
	}
}
