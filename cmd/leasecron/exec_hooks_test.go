package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"sync"
	"testing"

	"github.com/leasecron/leasecron/scheduler"
)

// TestExecFiresHooks: `leasecron exec --name NAME` fires the hooks the
// config defines for NAME, as the daemon does: on_start and on_failure
// for a slot whose command failed, posted to a webhook on loopback before
// exec exits; running the completed slot again fires nothing more.
func TestExecFiresHooks(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var got []scheduler.HookEvent
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var ev scheduler.HookEvent
		body, _ := io.ReadAll(r.Body)
		if json.Unmarshal(body, &ev) == nil {
			mu.Lock()
			got = append(got, ev)
			mu.Unlock()
		}
	}))
	defer srv.Close()
	path := writeConfig(t, execBackends["redis"](t)+`lease:
  ttl: 10s
  renew: 2s
jobs:
  - name: nightly
    schedule: "@yearly"
    shell: "true"
    on_start: {url: "`+srv.URL+`/start"}
    on_failure: {url: "`+srv.URL+`/failure"}
`)
	waitVoting(t, path)
	run := func(args ...string) (int, string) {
		cmd := execProc(path, args...)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		err := cmd.Run()
		var ee *exec.ExitError
		if err != nil && !errors.As(err, &ee) {
			t.Fatal(err)
		}
		return cmd.ProcessState.ExitCode(), out.String()
	}
	slot := awaitExecSlot()
	args := append(append([]string{"--name", "nightly"}, execSlotArgs...), "--", "sh", "-c", "echo broken; exit 4")
	if code, out := run(args...); code != 4 {
		t.Fatalf("exec: exit %d, want the command's 4: %s", code, out)
	}
	if code, out := run(args...); code != 0 || skippedLate(out) {
		t.Errorf("exec of the completed slot: exit %d, want 0 (skipped as completed, not late): %s", code, out)
	}
	mu.Lock()
	defer mu.Unlock()
	events := map[string]scheduler.HookEvent{}
	for _, ev := range got {
		if _, dup := events[ev.Event]; dup {
			t.Errorf("%s fired twice", ev.Event)
		}
		events[ev.Event] = ev
	}
	f, ok := events[scheduler.EventFailure]
	if _, started := events[scheduler.EventStart]; !started || !ok || len(got) != 2 {
		t.Fatalf("events %+v; want on_start and on_failure once each", got)
	}
	if f.Job != "nightly" || f.Result != "failed" || f.Exit != 4 || !f.Tick.Equal(slot) || f.OutputTail != "broken\n" {
		t.Errorf("on_failure event %+v; want nightly failed with exit 4 at slot %s, its output's tail", f, slot)
	}
}
