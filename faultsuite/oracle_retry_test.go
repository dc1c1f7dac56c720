package faultsuite

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// attemptRun is one synthetic run of tick 100 of job j for the attempt
// rules: its attempt, and how it ended (exit status, or stopped).
type attemptRun struct {
	host    string
	attempt int
	start   int // ms after base; every run lasts 200ms
	exit    int
	stopped bool // killed or terminated before its end
}

func writeAttempts(t *testing.T, base time.Time, runs []attemptRun) string {
	t.Helper()
	var b strings.Builder
	for i, r := range runs {
		line := func(ev string, ms, exit int) {
			e := Event{Ev: ev, Job: "j", Tick: 100, Host: r.host, Token: int64(i + 1), PID: 10 + i,
				T: base.Add(time.Duration(ms) * time.Millisecond).UnixNano(), Attempt: r.attempt, Exit: exit}
			j, _ := json.Marshal(e)
			b.Write(j)
			b.WriteByte('\n')
		}
		line("start", r.start, 0)
		if r.stopped {
			line("term", r.start+200, 0)
		} else {
			line("end", r.start+200, r.exit)
		}
	}
	p := filepath.Join(t.TempDir(), "runs.jsonl")
	if err := os.WriteFile(p, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestOracleAttempts checks the retry rules of SafetyRetries on
// synthetic histories of one tick of a job with retries: 2.
func TestOracleAttempts(t *testing.T) {
	base := time.Unix(1700000000, 0)
	for _, tc := range []struct {
		name    string
		retries int
		runs    []attemptRun
		want    string
	}{
		{"retry on another host succeeds", 2, []attemptRun{
			{"a", 1, 0, 3, false}, {"b", 2, 1000, 0, false},
		}, ""},
		{"all attempts fail", 2, []attemptRun{
			{"a", 1, 0, 3, false}, {"b", 2, 1000, 3, false}, {"c", 3, 2000, 3, false},
		}, ""},
		{"takeover repeats the attempt", 2, []attemptRun{
			{"a", 1, 0, 3, false}, {"b", 2, 1000, 0, true}, {"c", 2, 2000, 0, false},
		}, ""},
		{"retry after a timeout", 2, []attemptRun{
			{"a", 1, 0, 0, true}, {"b", 2, 1000, 0, false},
		}, ""},
		{"a fourth attempt", 2, []attemptRun{
			{"a", 1, 0, 3, false}, {"b", 2, 1000, 3, false}, {"c", 3, 2000, 3, false}, {"a", 4, 3000, 0, false},
		}, "rerun"},
		{"retry without retries", 0, []attemptRun{
			{"a", 1, 0, 3, false}, {"b", 2, 1000, 0, false},
		}, "rerun"},
		{"run after success", 2, []attemptRun{
			{"a", 1, 0, 0, false}, {"b", 2, 1000, 0, false},
		}, "rerun"},
		{"attempt not logged (killed at its start)", 2, []attemptRun{
			{"a", 1, 0, 3, false}, {"b", 3, 1000, 0, false},
		}, ""},
		{"attempt went back", 2, []attemptRun{
			{"a", 2, 0, 0, true}, {"b", 1, 1000, 0, false},
		}, "attempt"},
		{"attempt repeated after a failure", 2, []attemptRun{
			{"a", 1, 0, 3, false}, {"b", 1, 1000, 0, false},
		}, "attempt"},
		{"first run beyond retries", 1, []attemptRun{
			{"a", 3, 0, 0, false},
		}, "attempt"},
		{"overlapping attempts", 2, []attemptRun{
			{"a", 1, 0, 3, false}, {"b", 2, 100, 0, false},
		}, "overlap"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, err := ReadHistory(writeAttempts(t, base, tc.runs))
			if err != nil {
				t.Fatal(err)
			}
			vs := h.SafetyRetries(func(string) int { return tc.retries })
			if got := rules(vs); got != tc.want {
				t.Errorf("violations %q, want %q:\n%s", got, tc.want, FormatViolations(vs))
			}
		})
	}
}

// TestOracleAttemptsResultLost: a failed attempt whose outcome never
// reached the store (SafetyRetriesLost's lost) may be followed by the
// same attempt, from the host that took the tick over; the control
// without it, or with it for another run, is the attempt violation.
func TestOracleAttemptsResultLost(t *testing.T) {
	base := time.Unix(1700000000, 0)
	h, err := ReadHistory(writeAttempts(t, base, []attemptRun{
		{"a", 1, 0, 3, false}, {"b", 1, 1000, 3, false}, {"c", 2, 2000, 0, false},
	}))
	if err != nil {
		t.Fatal(err)
	}
	retries := func(string) int { return 2 }
	for _, tc := range []struct {
		name     string
		lostHost string
		want     string
	}{
		{"first attempt's outcome lost", "a", ""},
		{"control: nothing lost", "", "attempt"},
		{"control: a later run's outcome lost", "b", "attempt"},
	} {
		lost := func(r Run) bool { return r.Host == tc.lostHost }
		if got := rules(h.SafetyRetriesLost(retries, lost)); got != tc.want {
			t.Errorf("%s: violations %q, want %q", tc.name, got, tc.want)
		}
	}
}
