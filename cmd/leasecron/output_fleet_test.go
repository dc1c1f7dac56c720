package main

import (
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leasecron/leasecron/scheduler"
)

// outputConfig is section with two jobs that run on host-a only: printer
// prints to both streams, a secret from its env and a token its redact
// pattern matches; stepper prints a step every 400ms.
func outputConfig(section string) string {
	return section + `lease:
  ttl: 10s
  renew: 2s
heartbeat: 1s
shutdown_grace: 5s
defaults:
  kill_grace: 1s
  run_on: {hosts: [host-a]}
  redact: ['token=\S+']
jobs:
  - name: printer
    schedule: "@every 2s"
    env: {DB_PASSWORD: hunter2}
    secret_env: [DB_PASSWORD]
    shell: 'echo "hello from $LEASECRON_HOST"; echo "to stderr" >&2; echo "pw hunter2 token=abc123 end"'
  - name: stepper
    schedule: "@every 3s"
    shell: 'for i in 1 2 3 4 5; do echo "step $i"; sleep 0.4; done'
`
}

// TestOutputFromAnyHost: on every backend, two daemons (host-a, host-b)
// share a config whose jobs run on host-a only; `logs` (as any other host
// would: through the backend alone) prints printer's output as host-a's
// run printed it, both streams with their names, the secret env value
// and the redact match replaced, and `logs -f` follows stepper's running
// attempt on host-a, each step once, in order, to its result.
func TestOutputFromAnyHost(t *testing.T) {
	t.Parallel()
	for name, section := range everyBackend() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			path := writeConfig(t, outputConfig(section(t)))
			a := startDaemon(t, "-c", path, "--id", "host-a")
			b := startDaemon(t, "-c", path, "--id", "host-b")
			a.notes.await(t, "READY=1")
			b.notes.await(t, "READY=1")
			recs := waitLogs(t, path, "printer", a)
			r := recs[len(recs)-1]
			if r.Host != "host-a" || r.Result != "ok" || r.Output == nil {
				t.Fatalf("printer's run: %+v; want an ok run on host-a with its output", r)
			}
			var lines []string
			for _, l := range r.Output.Lines {
				lines = append(lines, l.Stream+" "+l.Text)
			}
			got := strings.Join(lines, "\n")
			for _, want := range []string{"out hello from host-a", "err to stderr", "out pw [REDACTED] [REDACTED] end"} {
				if !strings.Contains(got, want) {
					t.Errorf("printer's output lacks %q:\n%s", want, got)
				}
			}
			if strings.Contains(got, "hunter2") || strings.Contains(got, "abc123") {
				t.Errorf("a secret was stored:\n%s", got)
			}
			code, out, errOut := cli(t, "logs", "-c", path, "printer")
			if code != 0 || !strings.Contains(out, " out hello from host-a\n") || !strings.Contains(out, "== host-a · tick ") || !strings.Contains(out, "== ok (exit 0)") {
				t.Errorf("logs: exit %d, stdout:\n%s\nstderr:\n%s", code, out, errOut)
			}
			if strings.Contains(a.stderr.String()+b.stderr.String(), "hunter2") {
				t.Errorf("a secret reached a daemon's log")
			}
			followSteps(t, path, a)
		})
	}
}

// waitLogs polls `logs --json` until job has a recorded run.
func waitLogs(t *testing.T, path, job string, d *testDaemon) []scheduler.RunRecord {
	t.Helper()
	var last string
	for end := time.Now().Add(90 * time.Second); time.Now().Before(end); time.Sleep(300 * time.Millisecond) {
		code, out, errOut := cli(t, "logs", "-c", path, job, "--json")
		if code != 0 {
			last = errOut
			continue
		}
		var recs []scheduler.RunRecord
		if err := json.Unmarshal([]byte(out), &recs); err != nil {
			t.Fatalf("logs --json: %v\n%s", err, out)
		}
		// Ticks the fresh servers could not vote on yet are on record as
		// missed: wait for a run.
		if recs = runsOnly(recs); len(recs) > 0 {
			return recs
		}
		last = out
	}
	t.Fatalf("no run of %s recorded within 90s: %s\ndaemon log:\n%s", job, last, d.stderr)
	return nil
}

// followSteps runs `logs -f stepper` and checks it printed one attempt's
// steps 1 to 5, each once and in order, between its header and result.
func followSteps(t *testing.T, path string, d *testDaemon) {
	t.Helper()
	var wg sync.WaitGroup
	var code int
	var out, errOut string
	wg.Add(1)
	go func() {
		defer wg.Done()
		code, out, errOut = cli(t, "logs", "-c", path, "-f", "stepper", "--timeout", "20s")
	}()
	wg.Wait()
	if code != 0 {
		t.Fatalf("logs -f: exit %d, stdout:\n%s\nstderr:\n%s\ndaemon log:\n%s", code, out, errOut, d.stderr)
	}
	var steps []string
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if _, text, ok := strings.Cut(l, " out "); ok {
			steps = append(steps, text)
		}
	}
	if got := strings.Join(steps, ","); got != "step 1,step 2,step 3,step 4,step 5" {
		t.Errorf("logs -f printed steps %q; want step 1 to 5 once each, in order:\n%s", got, out)
	}
	if !strings.HasPrefix(out, "== host-a · tick ") || !strings.Contains(out, "== ok (exit 0)") {
		t.Errorf("logs -f: no header or result:\n%s", out)
	}
}
