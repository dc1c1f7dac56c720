package main

import (
	"fmt"
	"math"
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
// nothing and ended before the job was handed off is no overlap; the
// rounds of the batches with a win and the daemon's share per start;
// logs without debug lines are an error.
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
		rounds     traceStep // n, p50, p99 only
		share      float64   // the daemon's part / tick-to-start, median
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
			rounds:     traceStep{n: 1, p50: ms(1), p99: ms(1)},
			share:      2.0 / 12,
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
			want:    []time.Duration{ms(10), ms(70), ms(71), ms(80), ms(75)},
			wantN:   []int{1, 1, 1, 1, 1},
			daemon:  ms(71),
			proc:    ms(4),
			handoff: ms(9),
			// d1's batch that won nothing ([1, 3] ms) ended long before
			// the job was handed off at 71 ms.
			overlapped: 0,
			batches: []tickBatchRow{{order: 1, p50: ms(3), p99: ms(3), jobs: 8, won: 0, ticks: 1},
				{order: 2, p50: ms(20), p99: ms(20), jobs: 6, won: 0, ticks: 1}, {order: 3, p50: ms(70), p99: ms(70), jobs: 2, won: 1, ticks: 1}},
			losers: traceStep{n: 2, p50: ms(3), p99: ms(20)},
			// d0's attempts pair up in order: [10, 20] won nothing, [60,
			// 70] won.
			rounds: traceStep{n: 1, p50: ms(10), p99: ms(10)},
			share:  71.0 / 75,
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
			if r := tr.rounds; r.n != tc.rounds.n || r.p50 != tc.rounds.p50 || r.p99 != tc.rounds.p99 {
				t.Errorf("rounds: n %d p50 %v p99 %v, want %d, %v, %v", r.n, r.p50, r.p99, tc.rounds.n, tc.rounds.p50, tc.rounds.p99)
			}
			if math.Abs(tr.daemonShare-tc.share) > 1e-9 {
				t.Errorf("daemon share = %v, want %v", tr.daemonShare, tc.share)
			}
		})
	}
}

// TestParseTraceOverlap: a start counts as overlapped only when another
// daemon's batch that won nothing was in its round ("trying the tick" ->
// "tick decided", paired in order per daemon and tick) at some point
// while the job was being started ("starting the job" -> its first
// instruction): a round inside, a round straddling the start, but not a
// round that ended before the hand-off or began after the first
// instruction, not the job's own daemon's round, not a round with a win.
func TestParseTraceOverlap(t *testing.T) {
	ms := func(f float64) time.Duration { return time.Duration(f * float64(time.Millisecond)) }
	tk := tickAttr(traceTick)
	logs := map[string][]string{
		"d0": {
			logLine(1, msgTrying, tk+`,"jobs":1`),
			logLine(2, msgDecided, tk+`,"jobs":1,"won":1`), // a win: never an overlap
			logLine(10, msgStarting, `,"job":"tick-0"`+tk),
		},
		"d1": { // the other candidate: its rounds won nothing
			logLine(5, msgTrying, tk+`,"jobs":3`),
			logLine(12, msgDecided, tk+`,"jobs":3,"won":0`), // ends inside tick-0's [10, 20]
			logLine(29, msgTrying, tk+`,"jobs":2`),
			logLine(45, msgDecided, tk+`,"jobs":2,"won":0`), // straddles tick-1's [30, 40]
			logLine(61, msgTrying, tk+`,"jobs":1`),
			logLine(62, msgDecided, tk+`,"jobs":1,"won":0`), // after tick-2's first instruction at 60
		},
		"d2": {
			logLine(25, msgTrying, tk+`,"jobs":2`),
			logLine(28, msgDecided, tk+`,"jobs":2,"won":2`),
			logLine(30, msgStarting, `,"job":"tick-1"`+tk),
			logLine(46, msgTrying, tk+`,"jobs":4`),
			logLine(52, msgDecided, tk+`,"jobs":4,"won":0`), // the job's own daemon
			logLine(50, msgStarting, `,"job":"tick-2"`+tk),
		},
	}
	starts := []string{
		fmt.Sprintf("tick-0 %d d0 %d", traceTick, traceTick*1e9+int64(ms(20))),
		fmt.Sprintf("tick-1 %d d2 %d", traceTick, traceTick*1e9+int64(ms(40))),
		fmt.Sprintf("tick-2 %d d2 %d", traceTick, traceTick*1e9+int64(ms(60))),
	}
	dir := t.TempDir()
	paths := map[string]string{}
	for host, lines := range logs {
		p := filepath.Join(dir, host+".log")
		if err := os.WriteFile(p, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		paths[host] = p
	}
	sp := filepath.Join(dir, "starts.txt")
	if err := os.WriteFile(sp, []byte(strings.Join(starts, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tr, err := parseTrace(paths, sp, traceTick-5, traceTick+5)
	if err != nil {
		t.Fatal(err)
	}
	if tr.overlapped != 2 || tr.daemonPart.n != 3 {
		t.Errorf("overlapped %d of %d starts, want 2 of 3 (tick-0 and tick-1)", tr.overlapped, tr.daemonPart.n)
	}
	// The rounds with a win: d0's [1, 2] and d2's [25, 28].
	if r := tr.rounds; r.n != 2 || r.p50 != ms(1) || r.p99 != ms(3) {
		t.Errorf("rounds: n %d p50 %v p99 %v, want 2, 1ms, 3ms", r.n, r.p50, r.p99)
	}
	// Shares 10/20, 30/40, 50/60.
	if math.Abs(tr.daemonShare-0.75) > 1e-9 {
		t.Errorf("daemon share = %v, want 0.75", tr.daemonShare)
	}
}

// TestPairRounds: the k-th attempt goes with the k-th batch decided, in
// time order whatever the order of the lines; attempts that do not pair up
// (one later than the decision it would pair with) leave every batch
// without an attempt time, which overlaps then treats as the instant of
// the decision.
func TestPairRounds(t *testing.T) {
	at := func(ms int) time.Time { return time.Unix(traceTick, 0).Add(time.Duration(ms) * time.Millisecond) }
	bs := []batch{{at: at(70), won: 1}, {at: at(20)}}
	pairRounds(bs, []time.Time{at(60), at(10)})
	if !bs[0].at.Equal(at(20)) || !bs[0].tried.Equal(at(10)) || !bs[1].tried.Equal(at(60)) {
		t.Errorf("paired %v", bs)
	}
	if !bs[1].overlaps(at(55), at(65)) || bs[1].overlaps(at(71), at(80)) || bs[1].overlaps(at(40), at(59)) {
		t.Errorf("overlaps of [60, 70] ms wrong")
	}
	bs = []batch{{at: at(20)}, {at: at(30)}}
	pairRounds(bs, []time.Time{at(10), at(25), at(40)}) // an attempt left over (the log cut the 3rd batch's decision)
	if !bs[0].tried.Equal(at(10)) || !bs[1].tried.Equal(at(25)) {
		t.Errorf("paired %v", bs)
	}
	bs = []batch{{at: at(20)}, {at: at(30)}}
	pairRounds(bs, []time.Time{at(25), at(28)}) // the attempt for the 20 ms batch is missing
	for _, bt := range bs {
		if !bt.tried.IsZero() {
			t.Errorf("unpaired lines gave %v an attempt time", bt)
		}
	}
	if !bs[0].overlaps(at(20), at(25)) || bs[0].overlaps(at(21), at(25)) {
		t.Errorf("a batch without an attempt time is not the instant of its decision")
	}
}

// TestStartSpread: the starts per host in the order of the host names,
// 0 for daemons that started none, the shares rounded.
func TestStartSpread(t *testing.T) {
	for _, tc := range []struct {
		per  map[string]int
		want string
	}{
		{map[string]int{"d1": 80, "d0": 78, "d2": 74}, "78/80/74 over the 3 daemons (34/34/32 %)"},
		{map[string]int{"d0": 232}, "232/0/0 over the 3 daemons (100/0/0 %)"},
		{nil, "none over the 3 daemons"},
	} {
		if got := startSpread(tc.per, 3); got != tc.want {
			t.Errorf("startSpread(%v) = %q, want %q", tc.per, got, tc.want)
		}
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
			steps:       []traceStep{{name: "first", p50: ms, p99: 2 * ms, n: 10}, {name: "job's first instruction", p50: 15 * ms, p99: 40 * ms, n: 10}},
			daemonPart:  traceStep{p50: 2 * ms, p99: 4 * ms, n: 10},
			procPart:    traceStep{p50: 13 * ms, p99: 30 * ms, n: 10},
			handoff:     traceStep{p50: 6 * ms, p99: 20 * ms, n: 10},
			overlapped:  5,
			daemonShare: 0.25,
			losers:      traceStep{n: 20, p50: 50 * ms, p99: 52 * ms},
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
		"log at debug level in JSON for the trace, so this run's tick-to-start p50 and p99 are measured with it",
		"The daemon's part is a median 25 % of its start's tick-to-start time; its p99 is 4.00 ms, the tick-to-start p99 40.0 ms (",
		`"job started" is logged p50 6.00 ms, p99 20.0 ms after "starting the job" (once the supervisor reports`,
		"At a typical tick 2 batches win jobs",
		"the last decided p50 3.00 ms after the tick.",
		"(20 batches that won nothing: their jobs were taken) were decided p50 50.0 ms, p99 52.0 ms after it; in 5 of 10 starts such a batch of another daemon was in its round",
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
