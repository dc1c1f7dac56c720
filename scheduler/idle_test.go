package scheduler

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/leasecron/leasecron/internal/testkit/redistest"
	"github.com/leasecron/leasecron/lease"
	"github.com/leasecron/leasecron/lease/redlock"
)

// TestIdleHeartbeatOneCall: an idle host (200 jobs, none due) costs each
// node one script call per heartbeat, its heartbeat's write, the reads
// of the hosts and the pause flags, and the health of the node in one
// (lease.Beat): counted on the nodes as script calls from clients per
// heartbeat written (the HSET of the heartbeat inside the script), so
// the count does not depend on how fast the machine is.
func TestIdleHeartbeatOneCall(t *testing.T) {
	if got := idleCallsPerBeat(t, false); got > 1.2 {
		t.Errorf("%.2f script calls per node and heartbeat, want 1", got)
	}
}

// TestIdleHeartbeatNegativeControl: the same host on a backend without
// the Beat (the write, two reads and a health ping, as before) costs each
// node three calls or more per heartbeat, so the check above can fail.
func TestIdleHeartbeatNegativeControl(t *testing.T) {
	if got := idleCallsPerBeat(t, true); got < 2.5 {
		t.Errorf("%.2f script calls per node and heartbeat without Beat, want 3 or more", got)
	}
}

// withoutBeat is a backend without its Beat: lease.DoBeat falls back to
// Put, List and Health.
type withoutBeat struct{ lease.Backend }

// idleCallsPerBeat runs one dry-run scheduler with 200 jobs due in a
// year and a heartbeat of 100 ms on 3 nodes and returns the script calls
// (EVALSHA, from clients) per heartbeat written over 30 heartbeats, after
// the first ones.
func idleCallsPerBeat(t *testing.T, noBeat bool) float64 {
	cluster := redistest.Start(t, 3)
	var jobs []*Job
	for i := range 200 {
		jobs = append(jobs, &Job{Name: fmt.Sprintf("idle%03d", i), Schedule: "0 0 1 1 *", Shell: "true", Candidates: 3})
	}
	cfg := tickConfig(t, cluster.URLs(), jobs...)
	cfg.Heartbeat = 100 * time.Millisecond
	be, err := redlock.Open(context.Background(), redlock.Config{Nodes: redisOf(cfg).Nodes, Prefix: redisOf(cfg).Prefix, Options: []redlock.Option{redlock.WithTimeout(200 * time.Millisecond), redlock.WithRestartGuard(cfg.Lease.TTL)}})
	if err != nil {
		t.Fatal(err)
	}
	var b lease.Backend = be
	if noBeat {
		b = withoutBeat{be}
	}
	s, err := New(cfg, Options{Self: "/nonexistent/leasecron-supervisor", Backend: b, DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = s.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done; _ = s.Close() })
	for deadline := time.Now().Add(30 * time.Second); len(s.liveHosts(cfg)) != 1; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the host does not see its own heartbeat after 30s")
		}
	}
	counts := func() (calls, beats int64) {
		for _, n := range cluster.Nodes {
			s, err := n.Client().Info(context.Background(), "commandstats").Result()
			if err != nil {
				t.Fatal(err)
			}
			calls += commandCalls(s, "evalsha")
			beats += commandCalls(s, "hset")
		}
		return calls, beats
	}
	// A heartbeat writes one field per node; a write of many fields at
	// once (the 200 jobs' lease hashes, which a start on a loaded machine
	// can leave until after the host saw its heartbeat) is not one, and
	// the count starts again after it.
	nodes := int64(len(cluster.Nodes))
	c0, b0 := counts()
	last := b0
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		c, b := counts()
		if b-last > 10*nodes {
			t.Logf("%d hash writes at once, not heartbeats: counting from here", b-last)
			c0, b0 = c, b
		}
		last = b
		if b-b0 >= 30*nodes {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("fewer than 30 heartbeats in 60 s")
		}
	}
	c1, b1 := counts()
	got := float64(c1-c0) / float64(b1-b0)
	t.Logf("%d script calls for %d heartbeats written on %d nodes: %.2f per node and heartbeat", c1-c0, b1-b0, len(cluster.Nodes), got)
	return got
}

// commandCalls is the calls of command in an INFO commandstats answer.
func commandCalls(info, command string) int64 {
	for _, line := range strings.Split(info, "\n") {
		rest, ok := strings.CutPrefix(strings.TrimSpace(line), "cmdstat_"+command+":calls=")
		if !ok {
			continue
		}
		n, _ := strconv.ParseInt(strings.Split(rest, ",")[0], 10, 64)
		return n
	}
	return 0
}
