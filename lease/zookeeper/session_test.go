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

// shortSession is the servers' maxSessionTimeout in the short-session
// tests, and askedSession the session timeout (lease TTL) asked for: a
// holder renewing every TTL/3 renews after the session-bounded validity
// ended.
const (
	shortSession = time.Second
	askedSession = 4 * time.Second
)

// TestShortSessionRefused: servers whose maxSessionTimeout is under the
// TTL make Open refuse, with an error that names the server and the
// setting to change.
func TestShortSessionRefused(t *testing.T) {
	besideConformance(t)
	e := zktest.StartWith(t, 1, zktest.Options{MaxSessionTimeout: shortSession})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	b, err := Open(ctx, Config{Servers: e.Addrs(), Root: "/lctest", Timeout: askedSession / 10, SessionTimeout: askedSession})
	if err == nil {
		_ = b.Close()
		t.Fatal("Open accepted a session timeout under the one asked for")
	}
	if !errors.Is(err, ErrSessionTooShort) {
		t.Errorf("error %v, want ErrSessionTooShort", err)
	}
	for _, want := range []string{"maxSessionTimeout", e.Addrs()[0], "granted 1s", "asked 4s"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %q", err, want)
		}
	}
}

// TestNegativeControlShortSessionAccepted: a client that goes on with the
// short session takes leases whose validity is under the daemon's kill
// margin (200 ms + 2 × the request timeout) right after they are granted,
// while the server and the client are fine — every job started under one
// would be killed at once.
func TestNegativeControlShortSessionAccepted(t *testing.T) {
	besideConformance(t)
	e := zktest.StartWith(t, 1, zktest.Options{MaxSessionTimeout: shortSession})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	b, err := openWith(ctx, Config{Servers: e.Addrs(), Root: "/lctest", Timeout: askedSession / 10, SessionTimeout: askedSession},
		setAcceptShortSession)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if got := b.SessionTimeout(); got != shortSession {
		t.Fatalf("granted %s, want the servers' maximum %s", got, shortSession)
	}
	l, err := b.Acquire(ctx, lease.Request{Key: "short", TTL: askedSession, Owner: "a"})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Release(ctx) }()
	killMargin := 200*time.Millisecond + 2*b.Timeout()
	if left := time.Until(l.ValidUntil()); left >= killMargin {
		t.Fatalf("a lease of a %s session is valid for %s, not under the kill margin %s: the control shows nothing", shortSession, left, killMargin)
	} else {
		t.Logf("a lease asked for %s is valid for %s after its grant, under the kill margin %s", askedSession, left.Round(time.Millisecond), killMargin)
	}
}

// TestShortLaterSessionRefused: a later session (after an expiry, say on
// servers whose maxSessionTimeout was lowered meanwhile) granted under
// the TTL is re-checked: once go-zookeeper reports it, every acquisition
// is refused with ErrSessionTooShort.
func TestShortLaterSessionRefused(t *testing.T) {
	besideConformance(t)
	e := zktest.Start(t, 1)
	b := open(t, e.Addrs(), askedSession)
	ctx := ctxT(t, 30*time.Second)
	if _, err := b.Acquire(ctx, lease.Request{Key: "before", TTL: askedSession, Owner: "a"}); err != nil {
		t.Fatal(err)
	}
	// What go-zookeeper logs when a new session is established.
	sessionLogger{b}.Printf("authenticated: id=%d, timeout=%d", int64(1), int32(shortSession.Milliseconds()))
	if got := b.SessionTimeout(); got != shortSession {
		t.Fatalf("session timeout %s after the new session, want %s", got, shortSession)
	}
	res := b.TryAcquireBatch(ctx, []lease.Request{{Key: "after", TTL: askedSession, Owner: "a"}})
	if !errors.Is(res[0].Err, ErrSessionTooShort) || !strings.Contains(res[0].Err.Error(), "maxSessionTimeout") {
		t.Errorf("batch acquisition on the short session: %v, want ErrSessionTooShort naming maxSessionTimeout", res[0].Err)
	}
	actx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	if _, err := b.Acquire(actx, lease.Request{Key: "after", TTL: askedSession, Owner: "a"}); !errors.Is(err, ErrSessionTooShort) {
		t.Errorf("acquisition on the short session: %v, want ErrSessionTooShort", err)
	}
}
