package faultsuite

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// logRun appends the lines of one synthetic run: start at start (ms after
// base), heartbeats until last, and an end line when ended.
type synth struct {
	job          string
	tick         int64
	host         string
	token        int64
	pid          int
	start, last  int // ms after base
	ended, termd bool
}

func writeLog(t *testing.T, base time.Time, runs []synth, torn bool) string {
	t.Helper()
	var b strings.Builder
	line := func(s synth, ev string, ms int) {
		e := Event{Ev: ev, Job: s.job, Tick: s.tick, Host: s.host, Token: s.token, PID: s.pid,
			T: base.Add(time.Duration(ms) * time.Millisecond).UnixNano()}
		j, _ := json.Marshal(e)
		b.Write(j)
		b.WriteByte('\n')
	}
	for _, s := range runs {
		line(s, "start", s.start)
		for ms := s.start + 20; ms < s.last; ms += 20 {
			line(s, "hb", ms)
		}
		switch {
		case s.ended:
			line(s, "end", s.last)
		case s.termd:
			line(s, "term", s.last)
		default:
			line(s, "hb", s.last)
		}
	}
	if torn {
		b.WriteString(`{"ev":"hb","job":"x","ti`)
	}
	p := filepath.Join(t.TempDir(), "runs.jsonl")
	if err := os.WriteFile(p, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func rules(vs []Violation) string {
	var r []string
	for _, v := range vs {
		r = append(r, v.Rule)
	}
	return strings.Join(r, ",")
}

func TestOracleSafety(t *testing.T) {
	base := time.Unix(1700000000, 0)
	for _, tc := range []struct {
		name string
		runs []synth
		want string // rules violated, in order
	}{
		{"clean", []synth{
			{"j", 100, "a", 1, 10, 0, 500, true, false},
			{"j", 102, "b", 2, 11, 2000, 2500, true, false},
		}, ""},
		{"takeover after kill", []synth{
			{"j", 100, "a", 1, 10, 0, 300, false, false},
			{"j", 100, "b", 2, 11, 2300, 2800, true, false},
		}, ""},
		{"overlap", []synth{
			{"j", 100, "a", 1, 10, 0, 3000, false, false},
			{"j", 100, "b", 2, 11, 2300, 2800, true, false},
		}, "overlap"},
		{"overlap within one heartbeat of a killed run", []synth{
			{"j", 100, "a", 1, 10, 0, 300, false, true},
			{"j", 100, "b", 2, 11, 310, 800, true, false},
		}, "overlap"},
		{"rerun after completion", []synth{
			{"j", 100, "a", 1, 10, 0, 300, true, false},
			{"j", 100, "b", 2, 11, 1000, 1300, true, false},
		}, "rerun"},
		{"token went back", []synth{
			{"j", 100, "a", 5, 10, 0, 300, true, false},
			{"j", 102, "b", 5, 11, 2000, 2300, true, false},
		}, "token"},
		{"other jobs may overlap", []synth{
			{"j", 100, "a", 1, 10, 0, 1000, true, false},
			{"k", 100, "b", 1, 11, 0, 1000, true, false},
		}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, err := ReadHistory(writeLog(t, base, tc.runs, true))
			if err != nil {
				t.Fatal(err)
			}
			if len(h.Runs) != len(tc.runs) {
				t.Fatalf("parsed %d runs, want %d:\n%s", len(h.Runs), len(tc.runs), h)
			}
			vs := h.Safety()
			if got := rules(vs); got != tc.want {
				t.Errorf("violations %q, want %q:\n%s", got, tc.want, FormatViolations(vs))
			}
		})
	}
}

func TestOracleLiveness(t *testing.T) {
	base := time.Unix(1700000000, 0) // a multiple of 2s
	runs := []synth{
		{"j", 1700000000, "a", 1, 10, 0, 300, true, false},
		// 1700000002 missing
		{"j", 1700000004, "a", 2, 11, 4000, 4100, false, false},
		{"j", 1700000004, "b", 3, 12, 6000, 6300, true, false},
		{"j", 1700000006, "b", 4, 13, 6400, 6500, true, false},
	}
	h, err := ReadHistory(writeLog(t, base, runs, false))
	if err != nil {
		t.Fatal(err)
	}
	from, to := base.Add(-time.Second), base.Add(6500*time.Millisecond)
	if got := rules(h.Liveness("j", 2*time.Second, from, to, false)); got != "missing" {
		t.Errorf("at least once: %q, want missing", got)
	}
	if got := rules(h.Liveness("j", 2*time.Second, from, to, true)); got != "missing,once" {
		t.Errorf("exactly once: %q, want missing,once", got)
	}
	if n := len(Ticks(2*time.Second, from, to)); n != 4 {
		t.Errorf("Ticks: %d, want 4", n)
	}
	if h, err := ReadHistory(filepath.Join(t.TempDir(), "none")); err != nil || len(h.Runs) != 0 {
		t.Errorf("missing log: %v, %v", h, err)
	}
}

// TestHistoryLogReadsAsItGrows: a log read while it is written, split at
// every byte and with a killed writer's torn line in it, gives after each
// chunk what a whole read of its complete lines gives, and at the end what
// a whole read of the file gives.
func TestHistoryLogReadsAsItGrows(t *testing.T) {
	base := time.Unix(1_700_000_000, 0)
	full, err := os.ReadFile(writeLog(t, base, []synth{
		{job: "a", tick: 10, host: "h0", token: 1, pid: 100, start: 0, last: 50, ended: true},
		{job: "a", tick: 12, host: "h1", token: 2, pid: 101, start: 40, last: 70},
	}, false))
	if err != nil {
		t.Fatal(err)
	}
	torn := `{"ev":"hb","job":"a","tick":12,"ho`
	full = append(append(full, torn...), `{"ev":"end","job":"b","tick":14,"host":"h2","token":3,"pid":102,"t":1700000004000000000}`+"\n"...)
	for cut := 1; cut < len(full); cut++ {
		path := filepath.Join(t.TempDir(), "runs.jsonl")
		l := &HistoryLog{Path: path}
		for _, chunk := range [][]byte{full[:cut], full[cut:]} {
			f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := f.Write(chunk); err != nil {
				t.Fatal(err)
			}
			f.Close()
			b, _ := os.ReadFile(path)
			complete := filepath.Join(t.TempDir(), "complete.jsonl")
			if err := os.WriteFile(complete, b[:bytes.LastIndexByte(b, '\n')+1], 0o644); err != nil {
				t.Fatal(err)
			}
			got, err := l.Read()
			if err != nil {
				t.Fatal(err)
			}
			want, err := ReadHistory(complete)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("cut at %d: read as it grows:\n%s\nwhole read:\n%s", cut, got, want)
			}
		}
	}
}
