package leasetest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/leasecron/leasecron/lease"
)

// subtest is one behavioural test of the suite. Those that kill or pause
// servers, or load them heavily, run alone; the others run in parallel.
type subtest struct {
	name  string
	alone bool
	run   func(t *testing.T, s *suite)
}

// subtests is the suite, in the order Run runs it.
var subtests = []subtest{
	{"MutualExclusion", false, testMutualExclusion},
	{"ExclusionCheckerCatchesOverlap", false, testExclusionNegativeControl},
	{"Epochs", false, testEpochs},
	{"RefusalDetail", false, testRefusalDetail},
	{"InspectAndNotes", false, testInspectAndNotes},
	{"ReleaseOfLostLease", false, testReleaseOfLostLease},
	{"CompleteAfterExpiry", false, testCompleteAfterExpiry},
	{"CloseAfterLapse", false, testCloseAfterLapse},
	{"BadInputs", false, testBadInputs},
	{"Entries", false, testEntries},
	{"Beat", false, testBeat},
	{"EntryExpiry", false, testEntryExpiry},
	{"Logs", false, testLogs},
	{"BigRecords", false, testBigRecords},
	{"StoreBadInputs", false, testStoreBadInputs},
	{"LostAnswer", false, testLostAnswer},
	{"Batch10000", true, testBatch},
	{"Health", true, testHealth},
	{"RefusalNamesDownServers", true, testRefusalNamesDownServers},
	{"FencingAcrossRestarts", true, testFencingAcrossRestarts},
	{"HoldLossOnKill", true, testHoldLossOnKill},
	{"HoldLossOnPause", true, testHoldLossOnPause},
	{"FrozenMinority", true, testFrozenMinority},
	{"StoreServersDown", true, testStoreServersDown},
	{"StoreReadsAfterDataLoss", true, testStoreReadsAfterDataLoss},
}

// suite is the state shared by the subtests of one Run.
type suite struct {
	h   Harness
	run string // random, so that keys of repeated runs on one server differ
}

// Run runs the conformance suite against the backend h opens: first the
// light subtests that leave the servers alone, in parallel (as subtests of
// "Steady"), then the 10,000-key batch and those that kill or pause
// servers, one at a time. Each subtest uses keys of its own.
func Run(t *testing.T, h Harness) {
	t.Helper()
	h.check(t)
	h.ready(t)
	var raw [4]byte
	_, _ = rand.Read(raw[:])
	s := &suite{h: h, run: hex.EncodeToString(raw[:])}
	b := h.Open(t)
	if h.TTL < 10*b.Timeout() {
		t.Fatalf("leasetest: %s: TTL %s is less than 10 × the client's timeout %s", h.Name, h.TTL, b.Timeout())
	}
	if got := len(b.Servers()); got != h.Servers {
		t.Fatalf("leasetest: %s: Servers() lists %d servers %q, the harness says %d", h.Name, got, b.Servers(), h.Servers)
	}
	var atOnce chan struct{} // nil: no bound but -parallel's
	if h.SteadyAtOnce > 0 {
		atOnce = make(chan struct{}, h.SteadyAtOnce)
	}
	t.Run("Steady", func(t *testing.T) {
		for _, st := range subtests {
			if !st.alone {
				t.Run(st.name, func(t *testing.T) {
					t.Parallel()
					if atOnce != nil {
						atOnce <- struct{}{}
						defer func() { <-atOnce }()
					}
					st.run(t, s)
				})
			}
		}
	})
	for _, st := range subtests {
		if st.alone {
			t.Run(st.name, func(t *testing.T) { st.run(t, s) })
		}
	}
}

// open opens a client and warms its connections, so that the first
// single-attempt call does not pay for the dial.
func (s *suite) open(t *testing.T) lease.Backend {
	t.Helper()
	return s.warm(s.h.Open(t))
}

// warm opens b's connections, ignoring errors (they show up again in the
// first round), and returns b.
func (s *suite) warm(b lease.Backend) lease.Backend {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = b.Warm(ctx)
	return b
}

// key returns a key unique to the run, the test and the suffix. It holds
// only letters, digits, '.', '_' and '-', so that every store accepts it
// as one name (no '/' for ZooKeeper paths, no braces for Redis hash tags).
func (s *suite) key(t testing.TB, suffix ...string) string {
	var b strings.Builder
	b.WriteString("ct." + s.run + ".")
	for _, r := range strings.Join(append([]string{t.Name()}, suffix...), ".") {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '_', r == '-', r == '.':
			b.WriteRune(r)
		default:
			b.WriteByte('.')
		}
	}
	return b.String()
}

// ctx returns a context that ends after d or with the test.
func ctx(t testing.TB, d time.Duration) context.Context {
	c, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return c
}

// liveness bounds waits for progress (an acquisition on a free key, a
// restarted server): generous, since a loaded machine stretches them.
const liveness = 30 * time.Second

// acquire takes req on b, retrying refusals (after a short random pause)
// until it is granted or ctx ends; ErrEpochDone is final. It does not
// call t.Fatal, so goroutines may use it.
func acquire(ctx context.Context, b lease.Backend, req lease.Request) (lease.Lease, error) {
	for {
		l, err := b.Acquire(ctx, req)
		if err == nil {
			return l, nil
		}
		if errors.Is(err, lease.ErrEpochDone) || ctx.Err() != nil {
			return nil, fmt.Errorf("acquire %s as %q: %w", req.Key, req.Owner, err)
		}
		if !errors.Is(err, lease.ErrNotObtained) {
			return nil, fmt.Errorf("acquire %s as %q: not a refusal: %w", req.Key, req.Owner, err)
		}
		select {
		case <-ctx.Done():
		case <-time.After(lease.Jitter(5 * time.Millisecond)):
		}
	}
}

// mustAcquire is acquire bounded by liveness, failing t on error.
func mustAcquire(t testing.TB, b lease.Backend, req lease.Request) lease.Lease {
	t.Helper()
	l, err := acquire(ctx(t, liveness), b, req)
	if err != nil {
		t.Fatalf("%v", err)
	}
	return l
}

// tryOnce makes one attempt at req (TryAcquireBatch of one), which no
// backend retries.
func tryOnce(t testing.TB, b lease.Backend, req lease.Request) (lease.Lease, error) {
	t.Helper()
	res := b.TryAcquireBatch(ctx(t, liveness), []lease.Request{req})
	if len(res) != 1 {
		t.Fatalf("TryAcquireBatch of 1 request returned %d results", len(res))
	}
	return res[0].Lease, res[0].Err
}

// refused checks that err is a *lease.RefusedError matching
// ErrNotObtained and reason, and returns it.
func refused(t testing.TB, what string, l lease.Lease, err error, reason error) *lease.RefusedError {
	t.Helper()
	if err == nil {
		t.Fatalf("%s: granted (fence %d, owner %q), want refused with %v", what, l.Fence(), l.Owner(), reason)
	}
	var re *lease.RefusedError
	if !errors.As(err, &re) {
		t.Fatalf("%s: error %v (%T) is not a *lease.RefusedError", what, err, err)
	}
	if !errors.Is(err, lease.ErrNotObtained) || !errors.Is(err, reason) {
		t.Fatalf("%s: error %v does not match ErrNotObtained and %v", what, err, reason)
	}
	return re
}

// refusal makes attempt until it is refused for reason, or for a reason
// other than a missed quorum, and checks the refusal with refused. A
// refusal for lack of a timely quorum when another reason is expected is
// a liveness failure of a loaded machine: it is tried again, within
// liveness. A grant always fails t.
func refusal(t testing.TB, what string, attempt func() (lease.Lease, error), reason error) (*lease.RefusedError, error) {
	t.Helper()
	deadline := time.Now().Add(liveness)
	for {
		l, err := attempt()
		if err != nil && !errors.Is(err, reason) && errors.Is(err, lease.ErrNoQuorum) && time.Now().Before(deadline) {
			time.Sleep(lease.Jitter(10 * time.Millisecond))
			continue
		}
		return refused(t, what, l, err, reason), err
	}
}

// nodeErrors returns every *lease.NodeError in err's tree.
func nodeErrors(err error) []*lease.NodeError {
	var out []*lease.NodeError
	var walk func(error)
	walk = func(e error) {
		if e == nil {
			return
		}
		if ne, ok := e.(*lease.NodeError); ok {
			out = append(out, ne)
		}
		switch u := e.(type) {
		case interface{ Unwrap() []error }:
			for _, x := range u.Unwrap() {
				walk(x)
			}
		case interface{ Unwrap() error }:
			walk(u.Unwrap())
		}
	}
	walk(err)
	return out
}

// namesServer reports whether err holds a *lease.NodeError for server.
func namesServer(err error, server string) bool {
	for _, ne := range nodeErrors(err) {
		if ne.Node == server {
			return true
		}
	}
	return false
}

// faults injects faults into the harness's servers for one subtest and
// undoes them: heal restarts the killed servers, resumes the paused ones
// and waits for Ready; a cleanup does the same if the test ends first.
type faults struct {
	t      *testing.T
	h      Harness
	down   map[int]bool
	paused map[int]bool
}

// faults returns the fault injector of t.
func (s *suite) faults(t *testing.T) *faults {
	f := &faults{t: t, h: s.h, down: map[int]bool{}, paused: map[int]bool{}}
	t.Cleanup(f.heal)
	return f
}

// kill SIGKILLs the servers that are not down yet.
func (f *faults) kill(servers ...int) {
	f.t.Helper()
	for _, i := range servers {
		if f.down[i] {
			continue
		}
		f.h.Kill(f.t, i)
		f.down[i] = true
		delete(f.paused, i)
	}
}

// pause SIGSTOPs the servers.
func (f *faults) pause(servers ...int) {
	f.t.Helper()
	for _, i := range servers {
		f.h.Pause(f.t, i)
		f.paused[i] = true
	}
}

// heal resumes paused servers, restarts killed ones and waits for Ready.
func (f *faults) heal() {
	f.t.Helper()
	if len(f.down) == 0 && len(f.paused) == 0 {
		return
	}
	for i := range f.paused {
		f.h.Resume(f.t, i)
	}
	for i := range f.down {
		f.h.Restart(f.t, i)
	}
	clear(f.paused)
	clear(f.down)
	f.h.ready(f.t)
}

// all returns the indexes of the harness's servers.
func (s *suite) all() []int {
	out := make([]int, s.h.Servers)
	for i := range out {
		out[i] = i
	}
	return out
}
