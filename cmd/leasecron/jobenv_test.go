package main

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/leasecron/leasecron/internal/testkit/redistest"
)

// TestRunJobEnvAndRenewMetrics runs a real job on one real redis-server:
// the job sees its LEASECRON_* variables but none of the daemon's systemd
// variables (NOTIFY_SOCKET would let a job speak for the service) nor a
// stale LEASECRON_* value inherited from the daemon's environment, and the
// renewals of its lease show up in leasecron_lease_renew_total.
func TestRunJobEnvAndRenewMetrics(t *testing.T) {
	nodes := redistest.Start(t, 1)
	out := t.TempDir()
	t.Setenv("NOTIFY_SOCKET", "/run/systemd/notify-test")
	t.Setenv("WATCHDOG_USEC", "1000000")
	t.Setenv("LEASECRON_JOB", "stale")
	t.Setenv("LEASECRON_KEEP_ME_NOT", "x")
	cfg := fmt.Sprintf(`redis:
  nodes: [%q]
lease:
  ttl: 3s
  renew: 500ms
jobs:
  - name: envjob
    schedule: "@every 1s"
    kill_grace: 500ms
    env: {FROM_CONFIG: "yes"}
    shell: 'env > %s/env.$LEASECRON_TICK_UNIX.tmp && mv %s/env.$LEASECRON_TICK_UNIX.tmp %s/env.$LEASECRON_TICK_UNIX; sleep 2'
`, nodes.URLs()[0], out, out, out)
	d := startDaemon(t, "-c", writeConfig(t, cfg), "--id", "env-host", "--metrics", "127.0.0.1:0")
	d.notes.await(t, "READY=1")
	addr := d.metricsAddr(t)

	// The node is new, so it votes only after one TTL (restart guard).
	var envFile string
	for end := time.Now().Add(20 * time.Second); envFile == "" && time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		m, _ := filepath.Glob(filepath.Join(out, "env.[0-9]*[0-9]"))
		if len(m) > 0 {
			envFile = m[0]
		}
	}
	if envFile == "" {
		t.Fatalf("the job did not run within 20s; log:\n%s", d.stderr)
	}
	b, err := os.ReadFile(envFile)
	if err != nil {
		t.Fatal(err)
	}
	env := map[string][]string{}
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, "="); ok {
			env[k] = append(env[k], v)
		}
	}
	for _, k := range []string{"NOTIFY_SOCKET", "WATCHDOG_USEC", "LEASECRON_KEEP_ME_NOT"} {
		if _, ok := env[k]; ok {
			t.Errorf("the job inherited the daemon's %s", k)
		}
	}
	want := map[string]string{"LEASECRON_JOB": "envjob", "LEASECRON_HOST": "env-host", "FROM_CONFIG": "yes"}
	for k, v := range want {
		if got := env[k]; len(got) != 1 || got[0] != v {
			t.Errorf("job env %s = %q, want exactly %q", k, got, v)
		}
	}
	for _, k := range []string{"LEASECRON_TICK", "LEASECRON_TICK_UNIX", "LEASECRON_FENCING_TOKEN", "PATH"} {
		if len(env[k]) != 1 || env[k][0] == "" {
			t.Errorf("job env %s = %q, want one value", k, env[k])
		}
	}

	// The job runs 2s with renewals every 500ms.
	const renewed = `leasecron_lease_renew_total{job="envjob",result="ok"}`
	var body string
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(200 * time.Millisecond) {
		var code int
		code, body = get(t, "http://"+addr+"/metrics")
		if code == http.StatusOK && strings.Contains(body, renewed) {
			break
		}
	}
	if !strings.Contains(body, renewed) {
		t.Errorf("/metrics has no %s after the job ran; renew lines:\n%s", renewed, grepLines(body, "renew"))
	}
	if code := d.stop(t); code != 0 {
		t.Errorf("exit %d; log:\n%s", code, d.stderr)
	}
}

// grepLines returns the lines of s that contain sub.
func grepLines(s, sub string) string {
	var keep []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			keep = append(keep, l)
		}
	}
	return strings.Join(keep, "\n")
}
