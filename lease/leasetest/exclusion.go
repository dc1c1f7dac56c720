package leasetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/leasecron/leasecron/lease"
)

// Contention parameters: 32 goroutines on one key, each taking it twice
// and holding it for a few milliseconds, far less than any TTL.
const (
	contenders   = 32
	holdsEach    = 2
	holdDuration = 3 * time.Millisecond
)

// interval is one holder's tenure: from the moment its Acquire returned
// to the moment before it called Release, cut at its lease's ValidUntil
// (the promise ends there), all on this process's monotonic clock.
type interval struct {
	owner      string
	start, end time.Time
	fence      int64
	cut        bool // the holder overran ValidUntil; end is ValidUntil
}

// recorder collects the intervals of concurrent holders.
type recorder struct {
	mu  sync.Mutex
	ivs []interval
}

func (r *recorder) add(iv interval) {
	r.mu.Lock()
	r.ivs = append(r.ivs, iv)
	r.mu.Unlock()
}

// intervals returns the recorded intervals sorted by start.
func (r *recorder) intervals() []interval {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := slices.Clone(r.ivs)
	slices.SortFunc(out, func(a, b interval) int { return a.start.Compare(b.start) })
	return out
}

// overlaps returns a description of every interval that began before an
// earlier-starting one ended: two holders at the same instant. ivs must be
// sorted by start.
func overlaps(ivs []interval) []string {
	var out []string
	last := -1 // the interval with the latest end so far
	for i, iv := range ivs {
		if last >= 0 && iv.start.Before(ivs[last].end) {
			out = append(out, fmt.Sprintf("%q held from %s while %q held until %s (overlap %s)",
				iv.owner, iv.start.Format(time.StampMicro), ivs[last].owner,
				ivs[last].end.Format(time.StampMicro), ivs[last].end.Sub(iv.start)))
		}
		if last < 0 || iv.end.After(ivs[last].end) {
			last = i
		}
	}
	return out
}

// contend runs contenders goroutines that each take key holdsEach times
// through bs (round robin), hold it for holdDuration and release it,
// recording every tenure. It returns when all are done or ctx ends, with
// the goroutines' errors joined.
func contend(ctx context.Context, bs []lease.Backend, key string, ttl time.Duration) ([]interval, error) {
	var rec recorder
	errs := make([]error, contenders)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for g := range contenders {
		b := bs[g%len(bs)]
		wg.Go(func() {
			<-start
			for n := range holdsEach {
				req := lease.Request{Key: key, TTL: ttl, Owner: fmt.Sprintf("contender %d hold %d", g, n)}
				l, err := acquire(ctx, b, req)
				if err != nil {
					errs[g] = err
					return
				}
				iv := interval{owner: req.Owner, start: time.Now(), fence: l.Fence()}
				time.Sleep(holdDuration)
				iv.end = time.Now()
				if vu := l.ValidUntil(); !iv.end.Before(vu) {
					iv.end, iv.cut = vu, true
				}
				rec.add(iv)
				rctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				// A failed release leaves the key held until its TTL ends;
				// exclusion is unaffected, progress only slows down.
				_ = l.Release(rctx)
				cancel()
			}
		})
	}
	close(start)
	wg.Wait()
	return rec.intervals(), errors.Join(errs...)
}

// testMutualExclusion: 32 goroutines on 4 clients contend for one key;
// the tenures recorded on one monotonic clock never overlap, and fencing
// tokens increase in the order of the tenures. Bounded by liveness.
func testMutualExclusion(t *testing.T, s *suite) {
	bs := make([]lease.Backend, 4)
	for i := range bs {
		bs[i] = s.open(t)
	}
	t0 := time.Now()
	ivs, err := contend(ctx(t, liveness), bs, s.key(t), s.h.TTL)
	if err != nil {
		t.Fatalf("contention did not finish within %s (%d of %d tenures): %v", liveness, len(ivs), contenders*holdsEach, err)
	}
	t.Logf("%d tenures of %d contenders in %s", len(ivs), contenders, time.Since(t0).Round(time.Millisecond))
	if len(ivs) != contenders*holdsEach {
		t.Fatalf("%d tenures recorded, want %d", len(ivs), contenders*holdsEach)
	}
	for _, o := range overlaps(ivs) {
		t.Errorf("two holders at once: %s", o)
	}
	cut := 0
	for i, iv := range ivs {
		if iv.cut {
			cut++
		}
		if i > 0 && iv.fence <= ivs[i-1].fence {
			t.Errorf("fence of %q (%d) is not above that of the earlier holder %q (%d)", iv.owner, iv.fence, ivs[i-1].owner, ivs[i-1].fence)
		}
	}
	if cut > 0 {
		t.Logf("%d holders overran their validity (machine overloaded); their tenures were cut at ValidUntil", cut)
	}
}

// testExclusionNegativeControl runs the same contention and checker
// through a broken backend that grants every Acquire its store refused:
// the checker must report two holders at once.
func testExclusionNegativeControl(t *testing.T, s *suite) {
	bs := make([]lease.Backend, 4)
	for i := range bs {
		bs[i] = grantAll{s.open(t)}
	}
	ivs, err := contend(ctx(t, liveness), bs, s.key(t), s.h.TTL)
	if err != nil {
		t.Fatalf("contention through the broken backend: %v", err)
	}
	if o := overlaps(ivs); len(o) == 0 {
		t.Fatalf("the exclusion checker found no overlap among %d tenures through a backend that grants every Acquire", len(ivs))
	} else {
		t.Logf("the checker caught %d overlaps, e.g. %s", len(o), o[0])
	}
}

// grantAll is a deliberately broken Backend: Acquire makes one real
// attempt and, when the store refuses, pretends it was granted.
type grantAll struct{ lease.Backend }

func (g grantAll) Acquire(ctx context.Context, req lease.Request) (lease.Lease, error) {
	res := g.Backend.TryAcquireBatch(ctx, []lease.Request{req})[0]
	if res.Err == nil {
		return res.Lease, nil
	}
	return &fakeLease{req: req, validUntil: time.Now().Add(req.TTL)}, nil
}

// fakeLease is the lease grantAll makes up; releasing it does nothing.
type fakeLease struct {
	req        lease.Request
	validUntil time.Time
}

func (f *fakeLease) Key() string                                 { return f.req.Key }
func (f *fakeLease) Owner() string                               { return f.req.Owner }
func (f *fakeLease) Token() string                               { return "fake" }
func (f *fakeLease) Epoch() int64                                { return f.req.Epoch }
func (f *fakeLease) TTL() time.Duration                          { return f.req.TTL }
func (f *fakeLease) Fence() int64                                { return 0 }
func (f *fakeLease) ValidUntil() time.Time                       { return f.validUntil }
func (f *fakeLease) Extend(context.Context, time.Duration) error { return nil }
func (f *fakeLease) Release(context.Context) error               { return nil }
func (f *fakeLease) Complete(context.Context) error              { return nil }
