package scheduler

import (
	"github.com/leasecron/leasecron/config"

	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/leasecron/leasecron/internal/testkit/redistest"
	"github.com/leasecron/leasecron/lease/redlock"
)

// TestDryRunStartsNoProcess runs a scheduler with DryRun on a real
// redis-server until it has won two ticks, with Self a script that notes
// every start in a file: a dry run starts no process at all (no job and no
// spare supervisor; benchmarks run a hundred dry-run schedulers in one
// process). Negative control: the same scheduler without DryRun starts
// its spare supervisors (the script) at once.
func TestDryRunStartsNoProcess(t *testing.T) {
	t.Parallel()
	rc := redistest.Start(t, 1)
	for _, dry := range []bool{true, false} {
		dir := t.TempDir()
		marker := filepath.Join(dir, "started")
		self := filepath.Join(dir, "self.sh")
		script := "#!/bin/sh\necho \"$$ $*\" >> '" + marker + "'\nexit 0\n"
		if err := os.WriteFile(self, []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
		j := config.DefaultJob()
		j.Name, j.Schedule, j.Shell = "dry", "@every 1s", "true"
		cfg := tickConfig(t, rc.URLs(), &j)
		be, err := redlock.Open(context.Background(), redlock.Config{Nodes: rc.URLs(), Prefix: "dry" + map[bool]string{true: "1", false: "0"}[dry]})
		if err != nil {
			t.Fatal(err)
		}
		reg := prometheus.NewRegistry()
		m := NewMetrics(reg)
		dryRuns := func() float64 { return gather(t, reg)["leasecron_runs_total"]["job=dry,result=dry_run"] }
		s, err := New(cfg, Options{DryRun: dry, Self: self, Backend: be, Metrics: m})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- s.Run(ctx) }()
		// Dry run: until two ticks were won and recorded. Control: until
		// the spares show up (the job itself fails to start under the
		// fake supervisor, which does not matter here).
		deadline := time.Now().Add(30 * time.Second)
		for time.Now().Before(deadline) {
			if dry && dryRuns() >= 2 {
				break
			}
			if _, err := os.Stat(marker); !dry && err == nil {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		cancel()
		if err := <-done; err != nil {
			t.Errorf("dry=%v: Run: %v", dry, err)
		}
		_ = s.Close()
		b, err := os.ReadFile(marker)
		switch {
		case dry && dryRuns() < 2:
			t.Errorf("dry run: fewer than 2 ticks recorded as dry_run within 30s")
		case dry && err == nil:
			t.Errorf("dry run started processes of Self:\n%s", b)
		case !dry && err != nil:
			t.Errorf("negative control: without DryRun no process of Self was started (%v); the test cannot see spares", err)
		}
	}
}
