package postgres_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/leasecron/leasecron/internal/testkit/pgtest"
	"github.com/leasecron/leasecron/lease"
	"github.com/leasecron/leasecron/lease/internal/sqlleasetest"
	"github.com/leasecron/leasecron/lease/postgres"
)

// open opens a test client on url (sqlleasetest.Open: the short test
// timeout, then opts).
func open(t testing.TB, url string, opts ...postgres.Option) *postgres.Backend {
	t.Helper()
	return sqlleasetest.Open(t, postgres.OpenWith, postgres.WithTimeout, url, opts...)
}

// ctxT and try are the shared tests' Ctx (30 s) and Try (one attempt).
var (
	ctxT = sqlleasetest.Ctx
	try  = sqlleasetest.Try
)

// TestDefaults pins the documented defaults.
func TestDefaults(t *testing.T) {
	t.Parallel()
	table, timeout, drift := postgres.Options()
	if table != "leasecron_leases" || timeout != 2 || drift != 0.01 {
		t.Fatalf("defaults: table %q timeout %vs drift %v", table, timeout, drift)
	}
	s := pgtest.Start(t)
	ctx := ctxT(t)
	b, err := postgres.Open(ctx, postgres.Config{URL: s.URL()})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if b.Timeout() != 2*time.Second || b.Quorum() != 1 || b.Table() != `"leasecron_leases"` {
		t.Fatalf("Timeout %s Quorum %d Table %s", b.Timeout(), b.Quorum(), b.Table())
	}
	if srv := b.Servers(); len(srv) != 1 || strings.Contains(srv[0], s.Password()) || !strings.Contains(srv[0], s.Addr()) {
		t.Fatalf("Servers() = %v: want the address without the password", srv)
	}
	if err := b.Warm(ctx); err != nil {
		t.Fatal(err)
	}
	var named int
	s.QueryRow("SELECT count(*) FROM pg_stat_activity WHERE usename = 'leasecron' AND application_name = 'leasecron'", nil, &named)
	if named < 1 {
		t.Fatal("no connection with application_name leasecron")
	}
	var logged string
	s.QueryRow("SELECT relpersistence::text FROM pg_class WHERE oid = 'leasecron_leases'::regclass", nil, &logged)
	if logged != "p" {
		t.Fatalf("table persistence %q, want p (LOGGED)", logged)
	}
}

// TestLeaseLifecycle: exclusion with refusal detail from the row,
// strictly increasing fences, extend/release guarded by the token,
// epochs refused once completed, notes never overwritten by a lower
// version, Inspect.
func TestLeaseLifecycle(t *testing.T) {
	t.Parallel()
	s := pgtest.Start(t)
	a, c := open(t, s.URL()), open(t, s.URL(), postgres.WithTable("public.leasecron_leases"))
	ctx := ctxT(t)
	req := lease.Request{Key: "job", TTL: 5 * time.Second, Owner: "host=a"}
	before := time.Now()
	l1, err := try(t, a, req)
	if err != nil {
		t.Fatalf("first acquire: %v", err)
	}
	if vu := l1.ValidUntil(); vu.After(before.Add(5*time.Second-50*time.Millisecond)) || !vu.After(before) {
		t.Fatalf("ValidUntil %s after start, want under the TTL minus the drift margin", vu.Sub(before))
	}
	_, err = try(t, c, lease.Request{Key: "job", TTL: time.Second, Owner: "host=c"})
	var re *lease.RefusedError
	if !errors.As(err, &re) || !errors.Is(err, lease.ErrHeld) || re.Holder != "host=a" || re.HolderTTL <= 0 || re.HolderTTL > 5*time.Second {
		t.Fatalf("second acquire: %v (%+v), want ErrHeld by host=a with ~5s left", err, re)
	}
	in, err := c.Inspect(ctx, "job")
	if err != nil || in.Holder != "host=a" || in.HolderNodes != 1 || in.TTL <= 0 || in.TTL > 5*time.Second || in.Fence != l1.Fence() || in.NoteVersion != -1 || in.Answered != 1 {
		t.Fatalf("Inspect = %+v, %v", in, err)
	}
	// Extended from the request's start: at least the TTL from there,
	// less the time it took and the drift margin (not necessarily later
	// than before, when the statement was slow on a loaded machine).
	extStart := time.Now()
	if err := l1.Extend(ctx, 0); err != nil || l1.ValidUntil().Before(extStart.Add(lease.Validity(extStart, 5*time.Second, lease.DefaultDrift))) {
		t.Fatalf("Extend: %v (valid until %s after the extend's start)", err, l1.ValidUntil().Sub(extStart))
	}
	if err := l1.Release(ctx); err != nil || !l1.ValidUntil().IsZero() {
		t.Fatalf("Release: %v, ValidUntil %v", err, l1.ValidUntil())
	}
	if err := l1.Extend(ctx, 0); !errors.Is(err, lease.ErrNotHeld) {
		t.Fatalf("Extend after release: %v, want ErrNotHeld", err)
	}
	l2, err := c.Acquire(ctx, lease.Request{Key: "job", TTL: time.Second, Owner: "host=c", Epoch: 7})
	if err != nil || l2.Fence() <= l1.Fence() {
		t.Fatalf("acquire after release: %v, fence %d after %d", err, l2.Fence(), l1.Fence())
	}
	if err := l1.Release(ctx); err != nil { // not ours: no effect
		t.Fatal(err)
	}
	if _, err := try(t, a, req); !errors.Is(err, lease.ErrHeld) {
		t.Fatalf("a stale Release freed another's lease: %v", err)
	}
	if err := l2.Complete(ctx); err != nil {
		t.Fatal(err)
	}
	for _, e := range []int64{5, 7} {
		_, err := a.Acquire(ctx, lease.Request{Key: "job", TTL: time.Second, Epoch: e})
		if !errors.As(err, &re) || !errors.Is(err, lease.ErrEpochDone) || re.DoneEpoch != 7 {
			t.Fatalf("epoch %d after completing 7: %v, want ErrEpochDone (7)", e, err)
		}
	}
	l3, err := a.Acquire(ctx, lease.Request{Key: "job", TTL: time.Second, Epoch: 8})
	if err != nil || l3.Fence() <= l2.Fence() {
		t.Fatalf("epoch 8: %v", err)
	}
	// Notes.
	for _, n := range []struct {
		v    int64
		note string
	}{{2, "two"}, {1, "one"}, {2, "two again"}, {3, "three"}, {0, "zero"}} {
		if err := a.SetNote(ctx, "job", n.v, n.note); err != nil {
			t.Fatal(err)
		}
	}
	in, err = a.Inspect(ctx, "job")
	if err != nil || in.Note != "three" || in.NoteVersion != 3 || in.DoneEpoch != 7 || in.Fence != l3.Fence() {
		t.Fatalf("Inspect = %+v, %v; want note three v3, done 7, fence %d", in, err, l3.Fence())
	}
	if in, err := a.Inspect(ctx, "never"); err != nil || in.NoteVersion != -1 || in.Holder != "" || in.Answered != 1 {
		t.Fatalf("Inspect(never) = %+v, %v", in, err)
	}
}

// TestBatch: one statement decides a tick's keys; refusals carry their
// reasons; bad requests fail alone; a held key expires on its TTL.
func TestBatch(t *testing.T) {
	t.Parallel()
	s := pgtest.Start(t)
	a, c := open(t, s.URL()), open(t, s.URL())
	ctx := ctxT(t)
	if _, err := try(t, a, lease.Request{Key: "held", TTL: 700 * time.Millisecond, Owner: "a"}); err != nil {
		t.Fatal(err)
	}
	l, err := try(t, a, lease.Request{Key: "done", TTL: time.Second, Epoch: 10})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Complete(ctx); err != nil {
		t.Fatal(err)
	}
	reqs := []lease.Request{
		{Key: "z", TTL: time.Second, Owner: "c"},
		{Key: "held", TTL: time.Second, Owner: "c"},
		{Key: "done", TTL: time.Second, Epoch: 10},
		{Key: "", TTL: time.Second},
		{Key: "a", TTL: time.Second, Epoch: 3},
		{Key: "z", TTL: time.Second},
		{Key: "nul\x00", TTL: time.Second},
	}
	res := c.TryAcquireBatch(ctx, reqs)
	if res[0].Err != nil || res[4].Err != nil || res[0].Lease.Key() != "z" || res[4].Lease.Epoch() != 3 {
		t.Fatalf("free keys: %v, %v", res[0].Err, res[4].Err)
	}
	if !errors.Is(res[1].Err, lease.ErrHeld) || !errors.Is(res[2].Err, lease.ErrEpochDone) {
		t.Fatalf("held: %v; done: %v", res[1].Err, res[2].Err)
	}
	for _, i := range []int{3, 5, 6} {
		var re *lease.RefusedError
		if res[i].Err == nil || res[i].Lease != nil || errors.As(res[i].Err, &re) {
			t.Fatalf("bad request %d: %v, want a plain error", i, res[i].Err)
		}
	}
	time.Sleep(800 * time.Millisecond)
	if _, err := try(t, c, lease.Request{Key: "held", TTL: time.Second}); err != nil {
		t.Fatalf("after the TTL: %v", err)
	}
}

// TestOpenErrors: bad credentials, a role that may not create the table,
// a role without privileges on an existing table, a foreign table and a
// bad table name are refused by Open with errors naming the culprit and
// never the password.
func TestOpenErrors(t *testing.T) {
	t.Parallel()
	s := pgtest.Start(t)
	ctx := ctxT(t)
	openErr := func(url string, opts ...postgres.Option) error {
		// A generous timeout: a connect that times out is not an error
		// of Open (the server may come back), and SCRAM is slow under
		// the race detector.
		b, err := postgres.OpenWith(ctx, url, append([]postgres.Option{postgres.WithTimeout(10 * time.Second)}, opts...)...)
		if err == nil {
			b.Close()
			t.Fatalf("Open(%s) succeeded", url)
		}
		return err
	}
	must := func(err error, secret string, want ...string) {
		t.Helper()
		for _, w := range want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("error %q does not name %q", err, w)
			}
		}
		if secret != "" && strings.Contains(err.Error(), secret) {
			t.Errorf("error %q contains the password", err)
		}
	}
	must(openErr(s.URLFor(pgtest.User, "Wr0ngSecret")), "Wr0ngSecret", "password authentication failed", s.Addr())
	s.Exec("CREATE ROLE weak LOGIN PASSWORD 'weakpw1'")
	err := openErr(s.URLFor("weak", "weakpw1"))
	must(err, "weakpw1", `"leasecron_leases"`, "does not exist", `role "weak" may not create it`, "CREATE", s.Addr())
	open(t, s.URL()) // creates the table as the owner
	must(openErr(s.URLFor("weak", "weakpw1")), "weakpw1", `role "weak" lacks the INSERT, SELECT, UPDATE privilege`, `"leasecron_leases"`)
	s.Exec("CREATE TABLE other (key text PRIMARY KEY)")
	must(openErr(s.URL(), postgres.WithTable("other")), s.Password(), `"other"`, "not a leasecron lease table", "done_epoch")
	must(openErr(s.URL(), postgres.WithTable("a.b.c")), s.Password(), "a.b.c")
	must(openErr(s.URL(), postgres.WithTable(`x"; DROP TABLE other; --`)), s.Password(), "not a valid name")
	must(openErr(s.URLFor(pgtest.User, "pw")+"&foo=bar"), "", s.Addr())
	if err := openErr("host=127.0.0.1 password=kw"); strings.Contains(err.Error(), "kw") {
		t.Errorf("keyword string error quotes the password: %v", err)
	}
	if _, err := postgres.OpenWith(ctx, s.URL(), postgres.WithTimeout(0)); err == nil {
		t.Error("timeout 0 accepted")
	}
	if _, err := postgres.OpenWith(ctx, s.URL(), postgres.WithDrift(1)); err == nil {
		t.Error("drift 1 accepted")
	}
	// A schema-qualified table in its own schema.
	s.Exec("CREATE SCHEMA ops AUTHORIZATION " + pgtest.User)
	b := open(t, s.URL(), postgres.WithTable("ops.leases"))
	if _, err := try(t, b, lease.Request{Key: "k", TTL: time.Second}); err != nil {
		t.Fatal(err)
	}
	var n int
	s.QueryRow("SELECT count(*) FROM ops.leases", nil, &n)
	if n != 1 {
		t.Fatalf("ops.leases has %d rows", n)
	}
}
