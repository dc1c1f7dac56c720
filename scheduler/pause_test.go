package scheduler

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/leasecron/leasecron/internal/testkit/redistest"
	"github.com/leasecron/leasecron/lease/redlock"
)

// TestSetPauseOrderIgnoresClocks: the newest pause or resume command wins
// even when it comes from a host whose clock is behind the previous one's
// (an hour here), for a job's own flag and for --all; a job name that the
// backend does not take as a name (too long) is paused through a digest.
func TestSetPauseOrderIgnoresClocks(t *testing.T) {
	t.Parallel()
	cluster := redistest.Start(t, 1)
	long := strings.Repeat("j", 230)
	cfg := tickConfig(t, cluster.URLs(), &Job{Name: "a", Schedule: "@hourly", Shell: "true"}, &Job{Name: long, Schedule: "@hourly", Shell: "true"})
	be, err := redlock.Open(context.Background(), redlock.Config{Nodes: redisOf(cfg).Nodes, Prefix: redisOf(cfg).Prefix, Options: []redlock.Option{redlock.WithTimeout(time.Second)}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = be.Close() })
	ctx := context.Background()
	// Reads count a node only once its data is older than the restart
	// guard: a fresh redis-server's after a second or so.
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if _, err := ReadPauses(ctx, be); err == nil {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("pause flags unreadable after 15s: %v", err)
		}
	}
	ahead, now := time.Now().Add(time.Hour), time.Now()
	state := func() pauses {
		t.Helper()
		p, err := ReadPauses(ctx, be)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	step := func(what string, jobs []string, paused bool, at time.Time, want map[string]bool) {
		t.Helper()
		if err := SetPause(ctx, be, cfg, jobs, PauseInfo{Paused: paused, By: "test", At: at}); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		p := state()
		for job, w := range want {
			if _, got := p.paused(job); got != w {
				t.Errorf("after %s: %s paused = %v, want %v", what, job, got, w)
			}
		}
	}
	step("pause a from a clock an hour ahead", []string{"a"}, true, ahead, map[string]bool{"a": true})
	step("resume a from a correct clock", []string{"a"}, false, now, map[string]bool{"a": false})
	step("pause a again", []string{"a"}, true, now, map[string]bool{"a": true})
	step("resume --all from a clock behind", nil, false, now.Add(-time.Hour), map[string]bool{"a": false})
	step("pause --all", nil, true, now.Add(-2*time.Hour), map[string]bool{"a": true, long: true})
	step("resume the long job", []string{long}, false, now.Add(-3*time.Hour), map[string]bool{"a": true, long: false})
	if err := SetPause(ctx, be, cfg, []string{"nope"}, PauseInfo{Paused: true}); err == nil || !strings.Contains(err.Error(), `"nope"`) {
		t.Errorf("pause of an unknown job: %v", err)
	}
}
