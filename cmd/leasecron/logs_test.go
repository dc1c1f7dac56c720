package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/leasecron/leasecron/internal/testkit/redistest"
	"github.com/leasecron/leasecron/lease"
	"github.com/leasecron/leasecron/scheduler"
)

// TestExecStoresOutput: on every backend, `leasecron exec` passes the
// command's output to its own stdout and stderr as the command wrote it
// (unredacted, each stream in order) and stores it, redacted, with the
// run's record: `logs` on any host shows it with each line's stream.
func TestExecStoresOutput(t *testing.T) {
	t.Parallel()
	for name, section := range everyBackend() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			path := writeConfig(t, section(t)+`lease:
  ttl: 10s
  renew: 2s
jobs:
  - name: noisy
    schedule: "@yearly"
    env: {DB_PASSWORD: hunter2}
    secret_env: [DB_PASSWORD]
    shell: "true"
  - name: plain
    schedule: "@yearly"
    env: {DB_PASSWORD: hunter2}
    shell: "true"
`)
			waitVoting(t, path)
			cmd := execProc(path, "--name", "noisy", "--", "sh", "-c", `echo out1; echo err1 >&2; echo out2; echo "pw $DB_PASSWORD"; echo err2 >&2`)
			var out, errOut bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &errOut
			if err := cmd.Run(); err != nil {
				var ee *exec.ExitError
				if !errors.As(err, &ee) {
					t.Fatal(err)
				}
				t.Fatalf("exec: %v\n%s", err, errOut.String())
			}
			if out.String() != "out1\nout2\npw hunter2\n" || !strings.Contains(errOut.String(), "err1\nerr2\n") {
				t.Errorf("exec's own output: stdout %q, stderr %q; want the command's, as written", out.String(), errOut.String())
			}
			code, js, stderr := cli(t, "logs", "-c", path, "noisy", "--json")
			var recs []scheduler.RunRecord
			if code != 0 || json.Unmarshal([]byte(js), &recs) != nil || len(recs) != 1 || recs[0].Output == nil {
				t.Fatalf("logs --json: exit %d\n%s\n%s", code, js, stderr)
			}
			var outLines, errLines []string
			for _, l := range recs[0].Output.Lines {
				if l.Stream == "out" {
					outLines = append(outLines, l.Text)
				} else {
					errLines = append(errLines, l.Text)
				}
			}
			if strings.Join(outLines, ",") != "out1,out2,pw [REDACTED]" || strings.Join(errLines, ",") != "err1,err2" {
				t.Errorf("stored output: out %q, err %q; want each stream in order, redacted", outLines, errLines)
			}
			if code, text, _ := cli(t, "logs", "-c", path, "noisy"); code != 0 || !strings.Contains(text, " err err1\n") || !strings.Contains(text, "== ok (exit 0)") {
				t.Errorf("logs: exit %d\n%s", code, text)
			}
			// Negative control: the same secret in a job without secret_env
			// is stored as printed, and this check sees it.
			if err := execProc(path, "--name", "plain", "--", "sh", "-c", `echo "pw $DB_PASSWORD"`).Run(); err != nil {
				t.Fatalf("exec plain: %v", err)
			}
			if code, text, _ := cli(t, "logs", "-c", path, "plain"); code != 0 || !strings.Contains(text, " out pw hunter2\n") {
				t.Errorf("negative control: without secret_env the stored output lacks the secret: exit %d\n%s", code, text)
			}
		})
	}
}

// TestLogsBadInput: usage errors exit 2 naming the problem; a tick with no
// record exits 1; check names the file and line of a bad redact pattern.
func TestLogsBadInput(t *testing.T) {
	t.Parallel()
	path := writeConfig(t, goodConfig)
	for _, args := range [][]string{
		{"logs", "-c", path},
		{"logs", "-c", path, "a", "b"},
		{"logs", "-c", path, "a", "--last", "0"},
		{"logs", "-c", path, "a", "--last", "2", "--tick", "1700000000"},
		{"logs", "-c", path, "-f", "a", "--json"},
		{"logs", "-c", path, "a", "--tick", "yesterday"},
		{"logs", "-c", path, "a/b"},
	} {
		if code, _, errOut := cli(t, args...); code != exitUsage || !strings.Contains(errOut, "leasecron logs:") {
			t.Errorf("%q: exit %d, stderr %q; want 2", args, code, errOut)
		}
	}
	bad := writeConfig(t, goodConfig+`defaults:
  redact:
    - 'ok'
    - 'unclosed(['
`)
	code, out, errOut := cli(t, "check", "-c", bad)
	if code != exitUsage || !strings.Contains(out+errOut, bad+":18:") || !strings.Contains(out+errOut, "bad redact pattern") {
		t.Errorf("check of a bad redact pattern: exit %d\n%s%s\nwant it named with %s:18", code, out, errOut, bad)
	}
}

// TestLogsFollowVanishedHost: `logs -f` follows a tail whose host stops
// publishing (it died: the entry expires) and leaves no record: it prints
// the lines it saw and exits 1 saying so, instead of waiting forever.
func TestLogsFollowVanishedHost(t *testing.T) {
	t.Parallel()
	cl := redistest.Start(t, 1)
	path := writeConfig(t, fleetConfig(cl.URLs(), "  - {name: ghost, schedule: \"@yearly\", shell: \"true\"}\n"))
	waitVoting(t, path)
	cfg, err := loadConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	be, err := openBackend(ctx, cfg, backendOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer be.Close()
	lt := scheduler.LiveTail{Host: "host-gone", Attempt: 1, Fence: 7, Start: time.Now().UTC().Truncate(time.Millisecond),
		Output: scheduler.Output{First: 1, Bytes: 12, Lines: []scheduler.OutputLine{{At: time.Now(), Stream: "out", Text: "last words"}}}}
	data, _ := json.Marshal(lt)
	if err := be.Put(ctx, scheduler.SpaceOutput, lease.Entry{Name: "ghost", Version: 1, Data: data, TTL: 2 * time.Second}); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := cli(t, "logs", "-c", path, "-f", "ghost")
	if code != exitFailure || !strings.Contains(out, "== host-gone · tick manual · attempt 1 · fence 7") ||
		!strings.Contains(out, " out last words\n") || !strings.Contains(errOut, "stopped publishing") {
		t.Errorf("logs -f of a vanished host: exit %d, stdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
}
