package zookeeper

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/leasecron/leasecron/internal/testkit/zktest"
	"github.com/leasecron/leasecron/lease"
)

// open returns a Backend on addrs with a short session, closed at cleanup.
func open(t testing.TB, addrs []string, session time.Duration) *Backend {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	b, err := Open(ctx, Config{Servers: addrs, Root: "/lctest", Timeout: session / 10, SessionTimeout: session})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	return b
}

func ctxT(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// TestBasics: exclusion between two sessions, refusal detail, epochs,
// fencing order, release and completion.
func TestBasics(t *testing.T) {
	besideConformance(t)
	e := zktest.Start(t, 1)
	a, b := open(t, e.Addrs(), 3*time.Second), open(t, e.Addrs(), 3*time.Second)
	if got := a.SessionTimeout(); got != 3*time.Second {
		t.Errorf("negotiated session timeout %s, want 3s", got)
	}
	ctx := ctxT(t, 30*time.Second)
	req := lease.Request{Key: "job", TTL: 3 * time.Second, Epoch: 100, Owner: "tick=100 host=a"}
	l1, err := a.Acquire(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if v := time.Until(l1.ValidUntil()); v <= 2*time.Second || v > 3*time.Second {
		t.Errorf("validity %s, want just under 3s", v)
	}
	res := b.TryAcquireBatch(ctx, []lease.Request{{Key: "job", TTL: 3 * time.Second, Epoch: 100, Owner: "tick=100 host=b"}})
	var rerr *lease.RefusedError
	if !errors.As(res[0].Err, &rerr) || !errors.Is(rerr, lease.ErrHeld) || rerr.Holder != "tick=100 host=a" {
		t.Fatalf("second acquire: %v", res[0].Err)
	}
	if err := l1.Extend(ctx, 0); err != nil {
		t.Fatal(err)
	}
	if err := l1.Complete(ctx); err != nil {
		t.Fatal(err)
	}
	_, err = b.Acquire(ctx, lease.Request{Key: "job", TTL: time.Second, Epoch: 100, Owner: "b"})
	if !errors.As(err, &rerr) || !errors.Is(err, lease.ErrEpochDone) || rerr.DoneEpoch != 100 {
		t.Fatalf("acquire of a completed epoch: %v", err)
	}
	_, err = b.Acquire(ctx, lease.Request{Key: "job", TTL: time.Second, Epoch: 99, Owner: "b"})
	if !errors.Is(err, lease.ErrEpochDone) {
		t.Fatalf("acquire of an older epoch: %v", err)
	}
	l2, err := b.Acquire(ctx, lease.Request{Key: "job", TTL: time.Second, Epoch: 101, Owner: "b"})
	if err != nil {
		t.Fatal(err)
	}
	if l2.Fence() <= l1.Fence() {
		t.Errorf("fence %d after %d", l2.Fence(), l1.Fence())
	}
	info, err := a.Inspect(ctx, "job")
	if err != nil || info.Holder != "b" || info.DoneEpoch != 100 || info.Fence < l2.Fence() {
		t.Errorf("inspect: %+v, %v", info, err)
	}
	if err := l2.Release(ctx); err != nil {
		t.Fatal(err)
	}
	// A stale release of l1 (lost long ago) is harmless.
	l3, err := a.Acquire(ctx, lease.Request{Key: "job", TTL: time.Second, Epoch: 102, Owner: "a"})
	if err != nil {
		t.Fatal(err)
	}
	if err := l2.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := l3.Extend(ctx, 0); err != nil {
		t.Fatalf("the holder lost its lock to a stale release: %v", err)
	}
	// Notes: a lower version does not overwrite a higher one.
	if err := a.SetNote(ctx, "job", 5, "five"); err != nil {
		t.Fatal(err)
	}
	if err := b.SetNote(ctx, "job", 4, "four"); err != nil {
		t.Fatal(err)
	}
	if info, _ := a.Inspect(ctx, "job"); info.Note != "five" || info.NoteVersion != 5 {
		t.Errorf("note %q v%d", info.Note, info.NoteVersion)
	}
	for _, s := range a.Health(ctx) {
		if s.Err != nil || !s.Voting {
			t.Errorf("health: %+v", s)
		}
	}
}

// TestCloseFreesLocks: a session closed (a daemon's clean exit) frees its
// locks at once; a holder's session expiring lets another take over only
// after the first one's validity ended.
func TestCloseFreesLocks(t *testing.T) {
	besideConformance(t)
	e := zktest.Start(t, 1)
	a, b := open(t, e.Addrs(), 2*time.Second), open(t, e.Addrs(), 2*time.Second)
	ctx := ctxT(t, 30*time.Second)
	if _, err := a.Acquire(ctx, lease.Request{Key: "k", TTL: 2 * time.Second, Owner: "a"}); err != nil {
		t.Fatal(err)
	}
	_ = a.Close()
	if _, err := b.TryAcquireBatch(ctx, []lease.Request{{Key: "k", TTL: 2 * time.Second, Owner: "b"}})[0].Lease, (error)(nil); err != nil {
		t.Fatal(err)
	}
}

// TestCheckConfig: bad configs are refused without a server.
func TestCheckConfig(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		cfg  Config
		want string
	}{
		{Config{}, "no servers"},
		{Config{Servers: []string{"zk1"}}, "want host:port"},
		{Config{Servers: []string{"zk1:99999"}}, "bad port"},
		{Config{Servers: []string{"zk1:2181"}, Root: "leasecron"}, "absolute path"},
		{Config{Servers: []string{"zk1:2181"}, Root: "/a/"}, "absolute path"},
		{Config{Servers: []string{"zk1:2181"}, Timeout: 5 * time.Second, SessionTimeout: 6 * time.Second}, "third of the session"},
		{Config{Servers: []string{"zk1:2181"}, Auth: "justuser"}, "user:password"},
	} {
		err := CheckConfig(tc.cfg)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want %q", tc.cfg, err, tc.want)
		}
	}
	if err := CheckConfig(Config{Servers: []string{"zk1:2181", "[::1]:2181"}, Root: "/lc", Auth: "u:p"}); err != nil {
		t.Error(err)
	}
}
