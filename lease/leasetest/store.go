package leasetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leasecron/leasecron/lease"
)

// testEntries: Put, Get and List of Backend.Entries. A higher version
// replaces an entry, an equal or lower one does not; spaces are apart;
// List is sorted by name; Data comes back byte for byte; another client
// sees every write at once.
func testEntries(t *testing.T, s *suite) {
	b, other := s.open(t), s.open(t)
	space, space2 := s.key(t, "space"), s.key(t, "space2")
	data := []byte("binary\x00data\nwith \"quotes\" and \xff")
	put := func(space string, e lease.Entry) {
		t.Helper()
		if err := b.Put(ctx(t, liveness), space, e); err != nil {
			t.Fatalf("Put(%s, %s v%d): %v", space, e.Name, e.Version, err)
		}
	}
	get := func(space, name string) (lease.Entry, bool) {
		t.Helper()
		e, ok, err := other.Get(ctx(t, liveness), space, name)
		if err != nil {
			t.Fatalf("Get(%s, %s): %v", space, name, err)
		}
		return e, ok
	}
	if _, ok := get(space, "nobody"); ok {
		t.Errorf("Get of an entry never put: found")
	}
	if l, err := other.List(ctx(t, liveness), space); err != nil || len(l) != 0 {
		t.Errorf("List of an empty space: %v, %v; want none", l, err)
	}

	put(space, lease.Entry{Name: "job-b", Version: 5, Data: data})
	put(space, lease.Entry{Name: "job-a", Version: 1, Data: []byte("a1")})
	put(space2, lease.Entry{Name: "job-a", Version: 7, Data: []byte("other space")})
	if e, ok := get(space, "job-b"); !ok || e.Name != "job-b" || e.Version != 5 || !bytes.Equal(e.Data, data) || e.TTL != 0 {
		t.Errorf("Get(job-b) = %+v, %v; want version 5 with the data put, TTL 0", e, ok)
	}
	for _, c := range []struct {
		v    int64
		data string
		want string
		wv   int64
	}{
		{3, "b3 (late)", string(data), 5}, // lower: ignored
		{5, "b5 again", string(data), 5},  // equal: ignored
		{9, "b9", "b9", 9},
		{8, "b8 (late)", "b9", 9},
	} {
		put(space, lease.Entry{Name: "job-b", Version: c.v, Data: []byte(c.data)})
		if e, ok := get(space, "job-b"); !ok || e.Version != c.wv || string(e.Data) != c.want {
			t.Errorf("after Put(job-b v%d %q): Get = v%d %q (found %v), want v%d %q", c.v, c.data, e.Version, e.Data, ok, c.wv, c.want)
		}
	}
	l, err := other.List(ctx(t, liveness), space)
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	var got []string
	for _, e := range l {
		got = append(got, fmt.Sprintf("%s v%d %s", e.Name, e.Version, e.Data))
	}
	if want := []string{"job-a v1 a1", "job-b v9 b9"}; !slices.Equal(got, want) {
		t.Errorf("List(%s) = %q, want %q", space, got, want)
	}
	if e, ok := get(space2, "job-a"); !ok || string(e.Data) != "other space" {
		t.Errorf("Get in the second space = %+v, %v; want its own entry", e, ok)
	}
	// Names with every allowed character, and a full page of names.
	odd := "Host-1.example.com:2181@rack_7*"
	put(space2, lease.Entry{Name: odd, Version: 1, Data: []byte("odd")})
	for i := range 120 {
		put(space2, lease.Entry{Name: fmt.Sprintf("n%03d", i), Version: int64(i + 1), Data: []byte(itoa(i))})
	}
	l, err = other.List(ctx(t, liveness), space2)
	if err != nil || len(l) != 122 {
		t.Fatalf("List of 122 entries: %d entries, %v", len(l), err)
	}
	if !slices.IsSortedFunc(l, func(a, b lease.Entry) int { return strings.Compare(a.Name, b.Name) }) {
		t.Errorf("List is not sorted by name")
	}
	if e, ok := get(space2, odd); !ok || string(e.Data) != "odd" {
		t.Errorf("Get(%q) = %+v, %v", odd, e, ok)
	}
}

// entryTTL is the TTL of EntryExpiry: whole seconds, for etcd.
const entryTTL = 2 * time.Second

// testEntryExpiry: an entry put with a TTL is found (with that TTL) until
// shortly before the TTL ends and gone soon after it; a Put refreshes it;
// an expired entry is absent for Put too (a lower version stores again);
// an entry without a TTL stays.
func testEntryExpiry(t *testing.T, s *suite) {
	b, other := s.open(t), s.open(t)
	space := s.key(t)
	if err := b.Put(ctx(t, liveness), space, lease.Entry{Name: "kept", Version: 1, Data: []byte("k")}); err != nil {
		t.Fatal(err)
	}
	put := func(v int64) time.Time {
		t.Helper()
		t0 := time.Now()
		if err := b.Put(ctx(t, liveness), space, lease.Entry{Name: "beat", Version: v, Data: []byte(itoa(int(v))), TTL: entryTTL}); err != nil {
			t.Fatalf("Put with TTL: %v", err)
		}
		return t0
	}
	put(10)
	time.Sleep(entryTTL / 2)
	t0 := put(11) // refreshes the TTL
	e, ok, err := other.Get(ctx(t, liveness), space, "beat")
	if err != nil || !ok || e.Version != 11 || e.TTL != entryTTL {
		t.Fatalf("Get right after Put with TTL %s: %+v, %v, %v; want version 11 with its TTL", entryTTL, e, ok, err)
	}
	// Found until shortly before the TTL ends (measured from before the
	// refreshing Put left: the store's clock starts later).
	for time.Since(t0) < entryTTL-300*time.Millisecond {
		l, err := other.List(ctx(t, liveness), space)
		if err != nil {
			t.Fatal(err)
		}
		if len(l) != 2 {
			t.Fatalf("%s after a Put with TTL %s (refreshed): List has %d entries, want beat and kept", time.Since(t0), entryTTL, len(l))
		}
		time.Sleep(100 * time.Millisecond)
	}
	// Gone within a few seconds after it.
	for {
		_, ok, err := other.Get(ctx(t, liveness), space, "beat")
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			break
		}
		if time.Since(t0) > entryTTL+5*time.Second {
			t.Fatalf("entry with TTL %s still found %s after its Put", entryTTL, time.Since(t0))
		}
		time.Sleep(100 * time.Millisecond)
	}
	l, err := other.List(ctx(t, liveness), space)
	if err != nil || len(l) != 1 || l[0].Name != "kept" {
		t.Errorf("List after expiry = %+v, %v; want only the entry without TTL", l, err)
	}
	put(3) // lower than the expired 11: stored
	if e, ok, err := other.Get(ctx(t, liveness), space, "beat"); err != nil || !ok || e.Version != 3 {
		t.Errorf("Put of version 3 over an expired version 11: Get = %+v, %v, %v; want version 3", e, ok, err)
	}
}

// logLimit is the limit of the Logs tests.
const logLimit = 50

// testLogs: Append keeps the newest limit records by At; Log returns
// them newest first, byte for byte; a repeated ID is not added twice; an
// old record appended to a full log is dropped; logs are apart.
func testLogs(t *testing.T, s *suite) {
	b, other := s.open(t), s.open(t)
	lg, lg2 := s.key(t), s.key(t, "2")
	base := time.Now().Truncate(time.Millisecond).Add(-time.Hour)
	rec := func(i int) lease.Record {
		return lease.Record{ID: "r" + itoa(i), At: base.Add(time.Duration(i) * time.Second), Data: []byte("run\x00" + itoa(i) + "\n")}
	}
	appendRec := func(log string, r lease.Record) {
		t.Helper()
		if err := b.Append(ctx(t, liveness), log, r, logLimit); err != nil {
			t.Fatalf("Append(%s, %s): %v", log, r.ID, err)
		}
	}
	if l, err := other.Log(ctx(t, liveness), lg, 10); err != nil || len(l) != 0 {
		t.Errorf("Log of an unknown log: %v, %v; want empty", l, err)
	}
	// Out of order, the newest in the middle.
	order := []int{}
	for i := range 60 {
		order = append(order, (i*37)%60)
	}
	for _, i := range order {
		appendRec(lg, rec(i))
	}
	appendRec(lg, rec(59)) // again: no duplicate
	appendRec(lg2, rec(1000))
	check := func(when string, n int, newest, want int) {
		t.Helper()
		l, err := other.Log(ctx(t, liveness), lg, n)
		if err != nil {
			t.Fatalf("%s: Log(%d): %v", when, n, err)
		}
		if len(l) != want {
			t.Fatalf("%s: Log(%d) returned %d records, want %d", when, n, len(l), want)
		}
		for k, r := range l {
			w := rec(newest - k)
			if r.ID != w.ID || !r.At.Equal(w.At) || !bytes.Equal(r.Data, w.Data) {
				t.Fatalf("%s: Log(%d)[%d] = %s at %s %q, want %s at %s %q", when, n, k, r.ID, r.At, r.Data, w.ID, w.At, w.Data)
			}
		}
	}
	check("60 appended, limit 50", 1000, 59, logLimit)
	check("60 appended, limit 50", 5, 59, 5)
	appendRec(lg, rec(3)) // older than every kept record of a full log
	check("an old record appended to a full log", 1000, 59, logLimit)
	if l, err := other.Log(ctx(t, liveness), lg2, 10); err != nil || len(l) != 1 || l[0].ID != "r1000" {
		t.Errorf("second log: %+v, %v; want its one record", l, err)
	}

	testConcurrentAppends(t, s, b, other, rec)
}

// testConcurrentAppends: concurrent appenders from several clients;
// after one more Append, the log is exactly the newest limit records of
// all. An Append that timed out (the appenders contend for the log; a
// loaded machine) is repeated, as the scheduler does: a repeated ID
// changes nothing.
func testConcurrentAppends(t *testing.T, s *suite, b, other lease.Backend, rec func(int) lease.Record) {
	lg3 := s.key(t, "concurrent")
	clients := []lease.Backend{b, other, s.open(t), s.open(t)}
	var wg sync.WaitGroup
	errs := make(chan error, 200)
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 25 {
				r := rec(g*25 + i)
				if err := appendRetried(clients[g%len(clients)], lg3, r, logLimit); err != nil {
					errs <- fmt.Errorf("concurrent Append %s: %w", r.ID, err)
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
	if err := b.Append(ctx(t, liveness), lg3, rec(199), logLimit); err != nil {
		t.Fatal(err)
	}
	l, err := other.Log(ctx(t, liveness), lg3, lease.MaxLogLimit)
	if err != nil {
		t.Fatal(err)
	}
	if len(l) != logLimit || l[0].ID != "r199" || l[logLimit-1].ID != "r150" {
		var ids []string
		for _, r := range l {
			ids = append(ids, r.ID)
		}
		t.Errorf("after 200 concurrent appends with limit %d: %d records %v, want r199 down to r150", logLimit, len(l), ids)
	}
}

// testStoreBadInputs: bad names, sizes and limits are refused with an
// error naming the culprit, before anything is stored.
func testStoreBadInputs(t *testing.T, s *suite) {
	b := s.open(t)
	space := s.key(t)
	now := time.Now()
	long := strings.Repeat("x", lease.MaxNameSize+1)
	for _, c := range []struct {
		name string
		err  error
		must string
	}{
		{"empty space", b.Put(ctx(t, liveness), "", lease.Entry{Name: "a", Version: 1}), "space"},
		{"slash in name", b.Put(ctx(t, liveness), space, lease.Entry{Name: "a/b", Version: 1}), "a/b"},
		{"dot-dot name", b.Put(ctx(t, liveness), space, lease.Entry{Name: "..", Version: 1}), ".."},
		{"long name", b.Put(ctx(t, liveness), space, lease.Entry{Name: long, Version: 1}), "entry name"},
		{"big data", b.Put(ctx(t, liveness), space, lease.Entry{Name: "big", Version: 1, Data: make([]byte, lease.MaxEntrySize+1)}), "big"},
		{"negative TTL", b.Put(ctx(t, liveness), space, lease.Entry{Name: "neg", Version: 1, TTL: -time.Second}), "neg"},
		{"get bad name", func() error { _, _, err := b.Get(ctx(t, liveness), space, "a b"); return err }(), "a b"},
		{"list bad space", func() error { _, err := b.List(ctx(t, liveness), "sp ace"); return err }(), "sp ace"},
		{"append limit 0", b.Append(ctx(t, liveness), space, lease.Record{ID: "r", At: now}, 0), "limit"},
		{"append bad id", b.Append(ctx(t, liveness), space, lease.Record{ID: "r/1", At: now}, 5), "r/1"},
		{"append zero At", b.Append(ctx(t, liveness), space, lease.Record{ID: "r", Data: []byte("x")}, 5), "At"},
		{"log n 0", func() error { _, err := b.Log(ctx(t, liveness), space, 0); return err }(), "limit"},
		{"log bad name", func() error { _, err := b.Log(ctx(t, liveness), "a\nb", 5); return err }(), "log"},
	} {
		if c.err == nil || !strings.Contains(c.err.Error(), c.must) {
			t.Errorf("%s: error %v, want one naming %q", c.name, c.err, c.must)
		}
	}
	if _, ok, err := b.Get(ctx(t, liveness), space, "big"); err != nil || ok {
		t.Errorf("an entry refused for its size was stored (found %v, %v)", ok, err)
	}
	if l, err := b.Log(ctx(t, liveness), space, 5); err != nil || len(l) != 0 {
		t.Errorf("records refused were stored: %v, %v", l, err)
	}
}

// testStoreServersDown: with one server down (when the rest form a
// quorum) a Put and an Append are read back by another client; with too
// few servers for a quorum, Put, Get, List, Append and Log fail naming a
// dead server; after the servers are back, what was written is there.
func testStoreServersDown(t *testing.T, s *suite) {
	b, other := s.open(t), s.open(t)
	space := s.key(t)
	names := b.Servers()
	q := b.Quorum()
	at := time.Now().Truncate(time.Millisecond)
	f := s.faults(t)
	if err := b.Put(ctx(t, liveness), space, lease.Entry{Name: "before", Version: 1, Data: []byte("b")}); err != nil {
		t.Fatal(err)
	}
	if s.h.Servers-1 >= q && !answersAsOne(b) {
		f.kill(0)
		if err := b.Put(ctx(t, liveness), space, lease.Entry{Name: "one-down", Version: 1, Data: []byte("1")}); err != nil {
			t.Fatalf("Put with one server down: %v", err)
		}
		if err := b.Append(ctx(t, liveness), space, lease.Record{ID: "one-down", At: at, Data: []byte("1")}, 5); err != nil {
			t.Fatalf("Append with one server down: %v", err)
		}
		if e, ok, err := other.Get(ctx(t, liveness), space, "one-down"); err != nil || !ok || string(e.Data) != "1" {
			t.Errorf("Get with one server down: %+v, %v, %v", e, ok, err)
		}
		if l, err := other.Log(ctx(t, liveness), space, 5); err != nil || len(l) != 1 {
			t.Errorf("Log with one server down: %+v, %v", l, err)
		}
		f.heal()
	}
	dead := s.all()[:s.h.Servers-q+1]
	f.kill(dead...)
	namesDead := func(what string, err error) {
		t.Helper()
		if err == nil {
			t.Errorf("%s with %d of %d servers down succeeded", what, len(dead), s.h.Servers)
			return
		}
		for _, i := range dead {
			if strings.Contains(err.Error(), names[i]) {
				t.Logf("%s: %v", what, err)
				return
			}
		}
		t.Errorf("%s: error names no dead server (%q): %v", what, names[dead[0]], err)
	}
	// Each with its own short deadline: a store may wait for a server
	// until then, and the error must still say which one.
	namesDead("Put", b.Put(ctx(t, 10*time.Second), space, lease.Entry{Name: "no-quorum", Version: 1}))
	_, _, err := b.Get(ctx(t, 10*time.Second), space, "before")
	namesDead("Get", err)
	_, err = b.List(ctx(t, 10*time.Second), space)
	namesDead("List", err)
	namesDead("Append", b.Append(ctx(t, 10*time.Second), space, lease.Record{ID: "no-quorum", At: at, Data: []byte("x")}, 5))
	_, err = b.Log(ctx(t, 10*time.Second), space, 5)
	namesDead("Log", err)
	f.heal()
	if e, ok, err := other.Get(ctx(t, liveness), space, "before"); err != nil || !ok || string(e.Data) != "b" {
		if !errors.Is(err, lease.ErrClosed) {
			t.Logf("entry written before the servers were killed: %+v, %v, %v (kept only by stores that keep data across a restart)", e, ok, err)
		}
	}
}

// appendRetried appends r to lg, repeating an Append that timed out for
// up to the liveness bound.
func appendRetried(b lease.Backend, lg string, r lease.Record, limit int) error {
	end := time.Now().Add(liveness)
	for {
		c, cancel := context.WithTimeout(context.Background(), liveness)
		err := b.Append(c, lg, r, limit)
		cancel()
		if err == nil || !errors.Is(err, context.DeadlineExceeded) || time.Now().After(end) {
			return err
		}
		time.Sleep(20 * time.Millisecond)
	}
}
