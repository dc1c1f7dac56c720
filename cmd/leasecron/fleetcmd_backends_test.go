package main

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/leasecron/leasecron/internal/testkit/mysqltest"
	"github.com/leasecron/leasecron/internal/testkit/pgtest"
	"github.com/leasecron/leasecron/scheduler"
)

// fleetCommands runs pause, status, resume and history against the
// backend of the config at path, whose job has just run once by trigger:
// status shows the pause with who and why and then its end, and history
// shows both manual runs newest first.
func fleetCommands(t *testing.T, path, job string) {
	t.Helper()
	triggerFresh(t, func() (int, string, string) { return cli(t, "trigger", job, "-c", path) })
	code, out, errOut := cli(t, "history", "-c", path, job, "--json")
	var recs []scheduler.RunRecord
	if code != 0 || json.Unmarshal([]byte(out), &recs) != nil {
		t.Fatalf("history --json: exit %d, stdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	if len(recs) != 2 || !recs[0].Start.After(recs[1].Start) {
		t.Errorf("history: %+v; want the 2 triggered runs, newest first", recs)
	}
	for _, r := range recs {
		if r.Job != job || r.Result != "ok" || r.Attempt != 1 || !r.Tick.IsZero() || r.Fence <= 0 {
			t.Errorf("history record %+v: want a manual ok run, attempt 1, with a fencing token", r)
		}
	}

	if code, out, errOut := cli(t, "pause", "-c", path, job, "--reason", "backend test"); code != 0 || out != "paused "+job+" (reason: backend test)\n" {
		t.Fatalf("pause: exit %d, stdout %q, stderr:\n%s", code, out, errOut)
	}
	if p := pausedOf(t, readStatus(t, path, "--timeout", "20s"), job); p == nil || p.By != whoAmI() || p.Reason != "backend test" {
		t.Errorf("status after pause: %+v; want paused by %s for \"backend test\"", p, whoAmI())
	}
	if code, _, errOut := cli(t, "resume", "-c", path, job); code != 0 {
		t.Fatalf("resume: exit %d: %s", code, errOut)
	}
	if p := pausedOf(t, readStatus(t, path, "--timeout", "20s"), job); p != nil {
		t.Errorf("status after resume: still paused: %+v", *p)
	}
}

// TestPostgresFleetCommands: pause, resume, status and history on a real
// PostgreSQL server, after a triggered run.
func TestPostgresFleetCommands(t *testing.T) {
	t.Parallel()
	srv := pgtest.Start(t)
	config, _ := fenceJob(t, fmt.Sprintf("postgres:\n  url: %q\n  timeout: 500ms\n", srv.URL()))
	path := writeConfig(t, config)
	triggerFresh(t, func() (int, string, string) { return cli(t, "trigger", "fenced", "-c", path) })
	fleetCommands(t, path, "fenced")
}

// TestMySQLFleetCommands: pause, resume, status and history on a real
// MariaDB server, after a triggered run.
func TestMySQLFleetCommands(t *testing.T) {
	t.Parallel()
	srv := mysqltest.Start(t)
	config, _ := fenceJob(t, fmt.Sprintf("mysql:\n  dsn: %q\n  timeout: 500ms\n", srv.DSN()))
	path := writeConfig(t, config)
	triggerFresh(t, func() (int, string, string) { return cli(t, "trigger", "fenced", "-c", path) })
	fleetCommands(t, path, "fenced")
}
