package main

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/leasecron/leasecron/internal/testkit/pgtest"
	"github.com/leasecron/leasecron/lease"
	pgbackend "github.com/leasecron/leasecron/lease/postgres"
)

// TestTriggerFailsAtOnceWhenHeld (postgres): trigger makes one attempt and
// fails at once, naming the holder, when the job's lease is held
// elsewhere — a backend's Acquire, which retries until its context ends,
// would keep it waiting for as long as the holder runs.
func TestTriggerFailsAtOnceWhenHeld(t *testing.T) {
	t.Parallel()
	srv := pgtest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	be, err := pgbackend.Open(ctx, pgbackend.Config{URL: srv.URL()})
	if err != nil {
		t.Fatal(err)
	}
	defer be.Close()
	l, err := be.Acquire(ctx, lease.Request{Key: "marker", TTL: time.Minute, Owner: "tick=manual host=elsewhere"})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release(context.Background())
	path := writeConfig(t, fmt.Sprintf(`postgres:
  url: %q
  timeout: 500ms
lease:
  ttl: 10s
defaults:
  kill_grace: 500ms
jobs:
  - name: marker
    schedule: "@hourly"
    command: ["/bin/true"]
`, srv.URL()))
	start := time.Now()
	code, out, errOut := cli(t, "trigger", "marker", "-c", path)
	took := time.Since(start)
	if code != exitFailure || out != "" {
		t.Errorf("trigger of a held job: exit %d, stdout %q; want %d and no run record", code, out, exitFailure)
	}
	if !strings.Contains(errOut, "held") || !strings.Contains(errOut, "host=elsewhere") {
		t.Errorf("trigger does not name the holder:\n%s", errOut)
	}
	if took > 10*time.Second {
		t.Errorf("trigger took %s to refuse: it kept retrying", took)
	}
	if strings.Contains(errOut, srv.Password()) {
		t.Errorf("the password is shown:\n%s", errOut)
	}
}
