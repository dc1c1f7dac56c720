package zookeeper

import (
	"errors"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/leasecron/leasecron/internal/testkit/zktest"
	"github.com/leasecron/leasecron/lease"
)

// skewed is a client clock d away from this machine's.
func skewed(d time.Duration) func() time.Time {
	return func() time.Time { return time.Now().Add(d) }
}

// TestEntryExpiryOnServerClock: an entry's TTL runs on the servers' clock,
// so clients whose clocks are two hours apart agree on it. A writer an
// hour behind puts an entry with a 3s TTL; a reader an hour ahead finds
// it until shortly before the 3s end (counted from before the Put left)
// and not long after. Negative controls, judging against the client's own
// clock (trustClientClock): a reader an hour behind still finds the
// expired entry, and a reader an hour ahead finds a fresh one expired
// (and deletes it).
func TestEntryExpiryOnServerClock(t *testing.T) {
	besideConformance(t)
	e := zktest.Start(t, 1)
	const session = 5 * time.Second
	w := open(t, e.Addrs(), session)
	setClientNow(w, skewed(-time.Hour))
	r := open(t, e.Addrs(), session)
	setClientNow(r, skewed(time.Hour))
	behind := open(t, e.Addrs(), session)
	setClientNow(behind, skewed(-time.Hour))
	setTrustClientClock(behind)
	ahead := open(t, e.Addrs(), session)
	setClientNow(ahead, skewed(time.Hour))
	setTrustClientClock(ahead)
	ctx := ctxT(t, time.Minute)
	const ttl = 3 * time.Second
	space := lease.SpaceHosts

	t0 := time.Now()
	if err := w.Put(ctx, space, lease.Entry{Name: "h1", Version: 1, Data: []byte("up"), TTL: ttl}); err != nil {
		t.Fatal(err)
	}
	for time.Since(t0) < ttl-500*time.Millisecond {
		got, ok, err := r.Get(ctx, space, "h1")
		if errors.Is(err, errTimeout) {
			// No answer in time (a loaded machine): nothing to judge.
			time.Sleep(100 * time.Millisecond)
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if !ok || got.TTL != ttl {
			t.Fatalf("%s after a Put with TTL %s, a reader whose clock is 2h ahead of the writer's: found %v (%+v)", time.Since(t0), ttl, ok, got)
		}
		time.Sleep(100 * time.Millisecond)
	}
	time.Sleep(time.Until(t0.Add(ttl + time.Second)))
	if _, ok, err := behind.Get(ctx, space, "h1"); err != nil || !ok {
		t.Errorf("negative control: a reader judging by its own clock (1h behind) did not find the expired entry (%v, %v): the test cannot tell", ok, err)
	}
	for {
		_, ok, err := r.Get(ctx, space, "h1")
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			break
		}
		if time.Since(t0) > ttl+3*time.Second {
			t.Fatalf("entry with TTL %s still found %s after its Put", ttl, time.Since(t0))
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("gone %s after the Put started", time.Since(t0))

	if err := w.Put(ctx, space, lease.Entry{Name: "h2", Version: 1, Data: []byte("up"), TTL: ttl}); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := ahead.Get(ctx, space, "h2"); err != nil || ok {
		t.Errorf("negative control: a reader judging by its own clock (1h ahead) found a fresh entry (%v, %v): the test cannot tell", ok, err)
	}
}

// TestStoreOnEnsemble runs the store through different servers of a
// 3-server ensemble.
func TestStoreOnEnsemble(t *testing.T) {
	besideConformance(t)
	e := zktest.Start(t, 3)
	lead := e.WaitLeader(15 * time.Second)
	if lead < 0 {
		t.Fatal("no leader")
	}
	var followers []int
	for i := range e.Servers {
		if i != lead {
			followers = append(followers, i)
		}
	}
	t.Run("ReadAfterWriteThroughLaggingFollower", func(t *testing.T) {
		testLaggingFollower(t, e, followers[0], followers[1])
	})
	t.Run("ConcurrentPutsKeepTheHighestVersion", func(t *testing.T) {
		testConcurrentPuts(t, e)
	})
}

// testLaggingFollower: a writer on follower x, a reader on follower y.
// y is paused (SIGSTOP) while the write commits on the leader and x, the
// reader asks y, and y resumes: the read must see the write (the sync
// before it makes y catch up first), every time. Negative control: a
// reader that skips the sync reads an old value (a race it loses
// often: tried up to 40 times). A read that fails shows nothing either
// way (y, resumed late on a loaded machine, may have dropped its clients
// to resync with the leader: "zk: connection closed"); such a trial is
// done again, up to maxFailedReads times in all.
func testLaggingFollower(t *testing.T, e *zktest.Ensemble, x, y int) {
	const session = 8 * time.Second
	w := open(t, []string{e.Servers[x].Addr()}, session)
	// The readers wait up to 4s for y, which answers once resumed: a JVM
	// resumed on a loaded machine took over the default 800ms to catch up
	// and answer (a fresh-clone run). What is checked is what the read
	// returns, not how soon.
	openReader := func() *Backend {
		b, err := Open(ctxT(t, 30*time.Second), Config{Servers: []string{e.Servers[y].Addr()}, Root: "/lctest", Timeout: 4 * time.Second, SessionTimeout: 15 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = b.Close() })
		return b
	}
	r := openReader()
	naive := openReader()
	setNoSync(naive)
	ctx := ctxT(t, 2*time.Minute)
	const space, log = "lag", "lag"
	version := int64(0)
	// trial writes a new version and a new record while y is paused and
	// reads both back through reader; it reports whether the read missed
	// either, redoing a trial whose read failed.
	const maxFailedReads = 5
	failedReads := 0
	var trial func(reader *Backend) bool
	trial = func(reader *Backend) bool {
		t.Helper()
		version++
		e.Servers[y].Pause()
		resumed := false
		defer func() {
			if !resumed {
				e.Servers[y].Resume()
			}
		}()
		if err := w.Put(ctx, space, lease.Entry{Name: "k", Version: version, Data: []byte(strconv.FormatInt(version, 10))}); err != nil {
			t.Fatal(err)
		}
		rec := lease.Record{ID: "r" + strconv.FormatInt(version, 10), At: time.Now(), Data: []byte("x")}
		if err := w.Append(ctx, log, rec, 50); err != nil {
			t.Fatal(err)
		}
		type answer struct {
			e   lease.Entry
			ok  bool
			l   []lease.Record
			err error
		}
		ch := make(chan answer, 1)
		go func() {
			var a answer
			a.e, a.ok, a.err = reader.Get(ctx, space, "k")
			if a.err == nil {
				a.l, a.err = reader.Log(ctx, log, 1)
			}
			ch <- a
		}()
		time.Sleep(200 * time.Millisecond) // the requests wait in y's socket
		e.Servers[y].Resume()
		resumed = true
		a := <-ch
		if a.err != nil {
			if failedReads++; failedReads > maxFailedReads {
				t.Fatalf("read through the resumed follower failed %d times, the last: %v", failedReads, a.err)
			}
			t.Logf("read through the resumed follower failed (%v); trying again", a.err)
			return trial(reader)
		}
		return !a.ok || a.e.Version != version || len(a.l) != 1 || a.l[0].ID != rec.ID
	}
	for i := range 10 {
		if trial(r) {
			t.Errorf("trial %d: a read after a sync missed the write acknowledged before it", i)
		}
	}
	// The stale read is a race (y's client and quorum threads resume
	// together), lost often but not always: try until it shows.
	const tries = 40
	for i := range tries {
		if trial(naive) {
			t.Logf("a read without a sync missed the write at trial %d", i+1)
			return
		}
	}
	t.Errorf("negative control: reads without a sync never missed a write in %d trials: the test cannot tell", tries)
}

// testConcurrentPuts: clients on every server put versions 1..200 of one
// entry in random orders at once; afterwards the entry is version 200
// with its own data (the compare-and-set never lets a lower version
// replace a higher one).
func testConcurrentPuts(t *testing.T, e *zktest.Ensemble) {
	const session = 8 * time.Second
	var clients []*Backend
	for i := range 4 {
		clients = append(clients, open(t, []string{e.Servers[i%len(e.Servers)].Addr()}, session))
	}
	ctx := ctxT(t, 2*time.Minute)
	const space, n = "race", 200
	var wg sync.WaitGroup
	errs := make(chan error, len(clients))
	for g, c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for _, v := range rand.Perm(n) {
				if v%len(clients) != g {
					continue
				}
				if err := c.Put(ctx, space, lease.Entry{Name: "k", Version: int64(v + 1), Data: []byte(strconv.Itoa(v + 1))}); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for _, c := range clients {
		got, ok, err := c.Get(ctx, space, "k")
		if err != nil || !ok || got.Version != n || string(got.Data) != strconv.Itoa(n) {
			t.Errorf("after concurrent Puts of versions 1..%d through %s: %+v, %v, %v; want version %d", n, c.Servers(), got, ok, err, n)
		}
	}
}

// TestAppendRepeatedID: an ID appended again with another At (earlier or
// later) changes nothing: the first append of an ID stays, whichever At
// sorts first; records with other IDs and the limit still apply.
func TestAppendRepeatedID(t *testing.T) {
	besideConformance(t)
	e := zktest.Start(t, 1)
	a, b := open(t, e.Addrs(), 5*time.Second), open(t, e.Addrs(), 5*time.Second)
	ctx := ctxT(t, time.Minute)
	base := time.Now().Truncate(time.Millisecond)
	for i, c := range []struct {
		who *Backend
		id  string
		at  time.Duration
	}{
		{a, "x", 0}, {b, "x", -time.Hour}, {a, "x", time.Hour}, {b, "y", time.Second}, {a, "z", 2 * time.Second}, {b, "x", 0},
	} {
		if err := c.who.Append(ctx, "runs", lease.Record{ID: c.id, At: base.Add(c.at), Data: []byte(strconv.Itoa(i))}, 2); err != nil {
			t.Fatal(err)
		}
	}
	l, err := b.Log(ctx, "runs", 10)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range l {
		got = append(got, r.ID+"@"+r.At.Sub(base).String()+"="+string(r.Data))
	}
	if want := []string{"z@2s=4", "y@1s=3"}; !slices.Equal(got, want) {
		t.Errorf("log with limit 2 = %q, want %q", got, want)
	}
	if err := a.Append(ctx, "runs", lease.Record{ID: "y", At: base, Data: []byte("again")}, 3); err != nil {
		t.Fatal(err)
	}
	l, _ = b.Log(ctx, "runs", 10)
	got = got[:0]
	for _, r := range l {
		got = append(got, r.ID+"@"+r.At.Sub(base).String()+"="+string(r.Data))
	}
	if want := []string{"z@2s=4", "y@1s=3"}; !slices.Equal(got, want) {
		t.Errorf("after y again at another At: %q, want %q", got, want)
	}
}

// TestReservedKeys: the znodes of entries, logs and the clock cannot be
// taken as lease keys (job names cannot hold '@').
func TestReservedKeys(t *testing.T) {
	t.Parallel()
	for _, k := range []string{entriesNode, logsNode, clockNode} {
		if err := checkKey(k); err == nil {
			t.Errorf("checkKey(%q) accepted the store's znode", k)
		}
	}
	if err := checkKey("@entries2"); err != nil {
		t.Errorf("checkKey(@entries2): %v", err)
	}
}
