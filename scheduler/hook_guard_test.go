package scheduler

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/leasecron/leasecron/lease"
)

// tickCounter is a webhook that counts the events it got by tick.
type tickCounter struct {
	mu sync.Mutex
	n  map[int64]int
}

func (c *tickCounter) count(tick time.Time) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[tick.Unix()]
}

func newTickCounter(t *testing.T) (*tickCounter, string) {
	c := &tickCounter{n: map[int64]int{}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var ev HookEvent
		if json.NewDecoder(r.Body).Decode(&ev) == nil {
			c.mu.Lock()
			c.n[ev.Tick.Unix()]++
			c.mu.Unlock()
		}
	}))
	t.Cleanup(srv.Close)
	return c, srv.URL
}

// hookGuardRun delivers on_failure for ticks t2, t1, t1 on s while host h2
// holds the event's guard for t1 (it delivers t1's event, then dies): t2's
// event waits for the guard instead of being dropped, t1's comes after
// t2's was done and is still delivered, and its repeat is not.
func hookGuardRun(t *testing.T, unguarded bool) (c *tickCounter, t1, t2 time.Time) {
	c, url := newTickCounter(t)
	j := &Job{Name: "hooked", Schedule: "@every 1m", Shell: "true", Deadline: time.Second,
		Hooks: Hooks{OnFailure: &Hook{URL: url, Timeout: 10 * time.Second}}}
	s, _ := tickScheduler(t, j)
	s.noHookGuard = unguarded
	j = s.cfg.Load().Jobs[0]
	ctx := context.Background()
	t1 = time.Now().Add(-2 * time.Minute).Truncate(time.Minute)
	t2 = t1.Add(time.Minute)
	res := s.be.TryAcquireBatch(ctx, []lease.Request{{Key: s.hookKey(j.Name, EventFailure), TTL: 3 * time.Second,
		Owner: "hook failure tick=" + strconv.FormatInt(t1.Unix(), 10) + " host=h2"}})[0]
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	for _, tk := range []time.Time{t2, t1, t1} {
		s.runHook(ctx, hookTask{job: j, hook: j.Hooks.OnFailure,
			ev: HookEvent{Event: EventFailure, Job: j.Name, Tick: tk, Result: "failed", Exit: 1}})
	}
	return c, t1, t2
}

// TestHookGuardPerTick: the hook guard keeps each tick's event once
// across the fleet without one tick's event hiding another's: an event
// waits for the guard another host holds, and events done out of order
// are each delivered once.
func TestHookGuardPerTick(t *testing.T) {
	c, t1, t2 := hookGuardRun(t, false)
	if n := c.count(t2); n != 1 {
		t.Errorf("the later tick's on_failure (guard held by another host meanwhile) delivered %d times, want 1", n)
	}
	if n := c.count(t1); n != 1 {
		t.Errorf("the earlier tick's on_failure, queued twice after the later one's, delivered %d times, want 1", n)
	}
}

// TestHookGuardPerTickNegativeControl is TestHookGuardPerTick without the
// guard: the repeated event is delivered twice.
func TestHookGuardPerTickNegativeControl(t *testing.T) {
	c, t1, _ := hookGuardRun(t, true)
	if n := c.count(t1); n < 2 {
		t.Errorf("without the guard the repeated event was delivered %d times: the test cannot see a second delivery", n)
	}
}
