package scheduler

import (
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"
)

// TestHookDrainBoundsGuardedDelivery: stopHooks waits at most hookDrain
// for queued hooks and then drops them, a tick's hook delivered under its
// guard included (its context ends with the workers' too). Here a webhook
// that never answers, timeout 60s: stop() returns about hookDrain later.
func TestHookDrainBoundsGuardedDelivery(t *testing.T) {
	t.Parallel()
	if !hookDrainBounded(t, false) {
		t.Errorf("stopHooks did not return %s after hookDrain (%s): the guarded hook ignores the drain", 20*time.Second, hookDrain)
	}
}

// TestHookDrainNegativeControl is TestHookDrainBoundsGuardedDelivery with
// the delivery on the guard's context alone: stop waits for the hook's
// timeout, past the drain.
func TestHookDrainNegativeControl(t *testing.T) {
	t.Parallel()
	if hookDrainBounded(t, true) {
		t.Errorf("with the delivery apart from the workers' context stop still returned within the drain: the test cannot see it")
	}
}

// hookDrainBounded fires a tick's hook to a webhook that never answers
// (timeout 60s) and reports whether stopping the hooks returns within
// hookDrain and 20s.
func hookDrainBounded(t *testing.T, ignoreDrain bool) bool {
	got := make(chan struct{}, 1)
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case got <- struct{}{}:
		default:
		}
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(srv.Close)
	var releaseOnce sync.Once
	answer := func() { releaseOnce.Do(func() { close(release) }) }
	t.Cleanup(answer)
	j := &Job{Name: "drain", Schedule: "@every 1m", Shell: "true", Deadline: time.Second,
		Hooks: Hooks{OnFailure: &Hook{URL: srv.URL, Timeout: 60 * time.Second, Retries: 0}}}
	s, _ := tickScheduler(t, j)
	s.setTestHooks(func(h *testHooks) { h.hookIgnoresDrain = ignoreDrain })
	j = s.cfg.Load().Jobs[0]
	stop := s.startHooks()
	s.fireHook(j, HookEvent{Event: EventFailure, Job: j.Name, Tick: time.Now().Truncate(time.Minute), Result: "failed", Exit: 1})
	select {
	case <-got:
	case <-time.After(30 * time.Second):
		t.Fatal("webhook not called")
	}
	stopped := make(chan struct{})
	t0 := time.Now()
	go func() { stop(); close(stopped) }()
	bounded := true
	select {
	case <-stopped:
	case <-time.After(hookDrain + 20*time.Second):
		bounded = false
		answer() // rather than wait for the hook's timeout
		<-stopped
	}
	t.Logf("stop took %s", time.Since(t0).Round(time.Second))
	return bounded
}
