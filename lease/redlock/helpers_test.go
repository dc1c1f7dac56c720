package redlock_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/leasecron/leasecron/internal/testkit/redistest"
	"github.com/leasecron/leasecron/lease"
	"github.com/leasecron/leasecron/lease/redlock"
)

// testGuard is the restart guard used by tests that are not about restart
// detection: fresh redis-server processes have an uptime of ~0 s, so with
// the default guard (the longest TTL requested) they would not vote for a
// whole TTL.
const testGuard = 300 * time.Millisecond

// newClient creates a client on urls that is closed when the test ends.
func newClient(t testing.TB, urls []string, opts ...redlock.Option) *redlock.Client {
	t.Helper()
	c, err := redlock.New(urls, opts...)
	if err != nil {
		t.Fatalf("lease.New: %v", err)
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return c
}

// testTimeout is the per-node timeout of clients in tests that are not
// about timeouts: the default 50 ms is far too tight for a loaded 2-core
// machine running the race detector and dozens of redis-servers.
const testTimeout = time.Second

// votingClient creates a client with a short restart guard and a generous
// per-node timeout (both overridable by opts) and waits until every node
// answers and votes.
func votingClient(t testing.TB, urls []string, opts ...redlock.Option) *redlock.Client {
	t.Helper()
	c := newClient(t, urls, append([]redlock.Option{redlock.WithRestartGuard(testGuard), redlock.WithTimeout(testTimeout)}, opts...)...)
	waitVoting(t, c, nil)
	return c
}

// waitVoting waits (bounded) until the nodes with the given indexes (all
// when idx is nil) answer a round and PING and vote, and the client's request lanes to
// them are connected: PING uses go-redis's main connection pool, the lanes
// its pipeline pool, and a cold pipeline connection (dial, INFO, SCRIPT
// LOAD) can take longer than a per-node timeout under load.
func waitVoting(t testing.TB, c *redlock.Client, idx []int) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		// A round first: a node's first round writes its data marker, and
		// a node met with a new marker does not vote for the guard.
		_, _ = c.Inspect(context.Background(), "warm-up")
		st := c.Health(context.Background())
		var bad []string
		for i, s := range st {
			if idx != nil && !slices.Contains(idx, i) {
				continue
			}
			if s.Err != nil || !s.Voting {
				bad = append(bad, fmt.Sprintf("%s (err=%v, voting at %s)", s.Server, s.Err, s.VotingAt.Format(time.StampMilli)))
			}
		}
		if len(bad) == 0 {
			info, err := c.Inspect(context.Background(), "warm-up")
			want := len(st)
			if idx != nil {
				want = len(idx)
			}
			if info.Answered >= want {
				return
			}
			bad = append(bad, fmt.Sprintf("warm-up: %d answered: %v", info.Answered, err))
		}
		if time.Now().After(deadline) {
			t.Fatalf("nodes not voting after 15s: %s", strings.Join(bad, ", "))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// start starts k redis-server nodes.
func start(t *testing.T, k int, opts ...redistest.Option) *redistest.Cluster {
	t.Helper()
	return redistest.Start(t, k, opts...)
}

// key returns a key unique to the test (and suffix).
func key(t testing.TB, suffix ...string) string {
	k := strings.NewReplacer("/", ".", "{", "(", "}", ")", " ", "_").Replace(t.Name())
	for _, s := range suffix {
		k += "." + s
	}
	return k
}

// ctxT returns a context bounded well within the test's own deadline.
func ctxT(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// nodeErrors collects every *lease.NodeError in err's tree.
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

// nodeErrorNames returns the sorted node names of nodeErrors(err).
func nodeErrorNames(err error) []string {
	var names []string
	for _, ne := range nodeErrors(err) {
		if !slices.Contains(names, ne.Node) {
			names = append(names, ne.Node)
		}
	}
	slices.Sort(names)
	return names
}

// leaseHash is the Redis key of lease k: one hash holding its lock (h,
// deadline d in server ms), fence counter f, completed epoch e and note.
func leaseHash(k string) string { return "{" + k + "}:lease" }

// heldScript lists the leases whose lock is held (h set, d in the future).
var heldScript = redis.NewScript(`local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local out = {}
for _, k in ipairs(redis.call('KEYS', '*:lease')) do
  local s = redis.call('HMGET', k, 'h', 'd')
  if s[1] and tonumber(s[2]) > now then
    out[#out + 1] = k
  end
end
return out`)

// lockKeys returns the hashes ("{...}:lease") of the leases whose lock is
// held on node n.
func lockKeys(t testing.TB, n *redistest.Node) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ks, err := heldScript.Run(ctx, n.Client(), nil).StringSlice()
	if err != nil {
		t.Fatalf("held leases on %s: %v", n.Addr(), err)
	}
	slices.Sort(ks)
	return ks
}

// leaseField returns field f of lease k's hash on node n ("" if absent).
func leaseField(t testing.TB, n *redistest.Node, k, f string) string {
	t.Helper()
	v, err := n.Client().HGet(context.Background(), leaseHash(k), f).Result()
	if err != nil && !errors.Is(err, redis.Nil) {
		t.Fatalf("HGET %s %s on %s: %v", leaseHash(k), f, n.Addr(), err)
	}
	return v
}

// setScript writes fields of a lease's hash as the scripts would: "h"
// with a TTL in ARGV[2] ms sets the lock with its deadline; "e" (a
// completion mark) keeps the hash without TTL; a field "f" alone keeps
// the TTL there is.
var setScript = redis.NewScript(`local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
if ARGV[1] == 'h' then
  redis.call('HSET', KEYS[1], 'h', ARGV[3], 'd', string.format('%d', now + tonumber(ARGV[2])))
  if redis.call('PTTL', KEYS[1]) < tonumber(ARGV[2]) and redis.call('HEXISTS', KEYS[1], 'e') == 0 then
    redis.call('PEXPIRE', KEYS[1], ARGV[2])
  end
else
  redis.call('HSET', KEYS[1], ARGV[1], ARGV[3])
  if ARGV[1] == 'e' then
    redis.call('PERSIST', KEYS[1])
  end
end
return 1`)

// setLock makes value the holder of lease k's lock on node n for ttl.
func setLock(t testing.TB, n *redistest.Node, k, value string, ttl time.Duration) {
	t.Helper()
	if err := setScript.Run(context.Background(), n.Client(), []string{leaseHash(k)}, "h", ttl.Milliseconds(), value).Err(); err != nil {
		t.Fatalf("set lock of %s on %s: %v", k, n.Addr(), err)
	}
}

// setLeaseField writes field f ("e": the completed epoch, "f": the fence
// counter) of lease k's hash on node n.
func setLeaseField(t testing.TB, n *redistest.Node, k, f string, v any) {
	t.Helper()
	if err := setScript.Run(context.Background(), n.Client(), []string{leaseHash(k)}, f, 0, v).Err(); err != nil {
		t.Fatalf("set %s of %s on %s: %v", f, k, n.Addr(), err)
	}
}

// waitFor polls cond every 10 ms until it is true or d passed; it reports
// whether cond became true.
func waitFor(d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// interval is one holder's claim of exclusive ownership.
type interval struct {
	who        string
	start, end time.Time // monotonic readings
}

// recorder collects holders' intervals and checks that none overlap.
type recorder struct {
	mu  sync.Mutex
	ivs []interval
}

// add records that who held the lease from start (when Acquire returned)
// until end (the earlier of ValidUntil and the moment Release was called).
func (r *recorder) add(who string, start, end time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ivs = append(r.ivs, interval{who, start, end})
}

// overlaps returns a description of every pair of overlapping intervals.
func (r *recorder) overlaps() []string {
	r.mu.Lock()
	ivs := slices.Clone(r.ivs)
	r.mu.Unlock()
	slices.SortFunc(ivs, func(a, b interval) int { return a.start.Compare(b.start) })
	var out []string
	for i := 1; i < len(ivs); i++ {
		for j := 0; j < i; j++ {
			if ivs[i].start.Before(ivs[j].end) {
				out = append(out, fmt.Sprintf("%s [%d..%d] overlaps %s [%d..%d] by %s",
					ivs[i].who, 0, ivs[i].end.Sub(ivs[i].start).Microseconds(),
					ivs[j].who, ivs[j].start.Sub(ivs[i].start).Microseconds(), ivs[j].end.Sub(ivs[i].start).Microseconds(),
					ivs[j].end.Sub(ivs[i].start)))
			}
		}
	}
	return out
}

func (r *recorder) len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.ivs)
}

// mustAcquire acquires req or fails the test.
func mustAcquire(t testing.TB, c *redlock.Client, req lease.Request) lease.Lease {
	t.Helper()
	l, err := c.Acquire(ctxT(t, 10*time.Second), req)
	if err != nil {
		t.Fatalf("Acquire(%s): %v", req.Key, err)
	}
	return l
}

// refused asserts that err is a *lease.RefusedError with the given reason.
func refused(t testing.TB, err error, reason error) *lease.RefusedError {
	t.Helper()
	if err == nil {
		t.Fatalf("acquire succeeded, want refusal (%v)", reason)
	}
	var re *lease.RefusedError
	if !errors.As(err, &re) {
		t.Fatalf("error %v (%T) is not a *RefusedError", err, err)
	}
	if !errors.Is(err, lease.ErrNotObtained) {
		t.Errorf("errors.Is(%v, ErrNotObtained) = false", err)
	}
	if !errors.Is(err, reason) {
		t.Fatalf("errors.Is(%v, %v) = false", err, reason)
	}
	for _, other := range []error{lease.ErrHeld, lease.ErrEpochDone, lease.ErrNoQuorum} {
		if other != reason && errors.Is(err, other) {
			t.Errorf("refusal %v also matches %v", err, other)
		}
	}
	return re
}

// checkHolders reports the errors the contenders sent on errs (closing it:
// call it after they all returned) and fails if two holders overlapped.
func checkHolders(t *testing.T, errs chan error, rec *recorder) {
	t.Helper()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if ov := rec.overlaps(); len(ov) > 0 {
		t.Fatalf("%d overlapping holders, e.g. %s", len(ov), ov[0])
	}
}

// lockScript returns lease KEYS[1]'s holder and the time left on its
// lock in ms ({"", -2} when no lock is held).
var lockScript = redis.NewScript(`local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local s = redis.call('HMGET', KEYS[1], 'h', 'd')
if not s[1] or tonumber(s[2]) <= now then
  return {'', -2}
end
return {s[1], tonumber(s[2]) - now}`)

// lockOf returns the holder value of lease k's lock on the server behind
// c ("" when none is held) and the time left on it.
func lockOf(t testing.TB, c redis.Scripter, k string) (string, time.Duration) {
	t.Helper()
	vals, err := lockScript.Run(context.Background(), c, []string{leaseHash(k)}).Slice()
	if err != nil || len(vals) != 2 {
		t.Fatalf("lock of %s: %v %v", k, vals, err)
	}
	v, _ := vals[0].(string)
	ms, _ := vals[1].(int64)
	return v, time.Duration(ms) * time.Millisecond
}
