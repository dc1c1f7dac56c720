package zookeeper

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/leasecron/leasecron/lease"
)

// Defaults used by Open when the Config leaves a field zero.
const (
	DefaultRoot           = "/leasecron"
	DefaultTimeout        = time.Second
	DefaultSessionTimeout = 30 * time.Second
	DefaultDrift          = lease.DefaultDrift
)

// Config says where the ensemble is and how to use it.
type Config struct {
	// Servers are the ensemble's client addresses, host:port.
	Servers []string
	// Root is the znode under which every key lives; default /leasecron.
	Root string
	// Timeout bounds each request; default 1s. It (at least a tenth of
	// SessionTimeout) also bounds each dial, each connect handshake and
	// how long a server may leave a request unanswered before the session
	// moves on to the next server (see "Frozen servers").
	Timeout time.Duration
	// SessionTimeout is asked of the servers for this client's session;
	// default 30s (leasecron passes lease.ttl). Locks vanish at most this
	// long after the client was last heard from. Servers that grant less
	// are refused (ErrSessionTooShort).
	SessionTimeout time.Duration
	// Auth is "user:password" for the digest scheme (ZooKeeper ACLs), or
	// "" for none. It is never shown in errors.
	Auth string
	// Drift is the clock drift factor, as in package lease: default (0)
	// DefaultDrift; lease.NoDrift for none; else in [0, 1).
	Drift float64
}

// Backend is a ZooKeeper session that takes leases. It is safe for
// concurrent use.
type Backend struct {
	conn    *zk.Conn
	cfg     Config
	negoMS  atomic.Int64 // negotiated session timeout, ms (0: unknown yet)
	closed  atomic.Bool
	servers []string
	// cur is the connection to the server the session uses (see dial).
	cur atomic.Pointer[boundedConn]
	// test holds the switches only tests set (testhooks.go).
	test testHooks

	// beatMu guards beatHealth, when a Beat last ran Health,
	// beatExpired, the entries of each space's beat znode found expired
	// after this client's last write of it (beat.go), and beatKept, what
	// the Beats read of each space (beatkept.go).
	beatMu      sync.Mutex
	beatHealth  time.Time
	beatExpired map[string]map[string]beatRec
	beatKept    map[string]keptRead

	// clock estimates the servers' clock, for entries' expiry.
	clock serverClock

	// bg ends the goroutines that finish deleting given-up locks in the
	// background (see Lease.deleteLockEventually); Close cancels it and
	// waits for them.
	bg     context.Context
	stopBg context.CancelFunc
	bgWG   sync.WaitGroup

	mu      sync.Mutex
	active  map[string]bool      // tokens of acquisitions in flight or held
	doneVer map[string]doneState // each key's done node, as last read
	ready   map[string]bool      // keys whose persistent nodes exist
}

var _ lease.Backend = (*Backend)(nil)

// doneState is a key's done node as this client last read it: the
// completed epoch and the node's version. A completion changes the version,
// so an acquisition that checks it in its multi cannot miss one.
type doneState struct {
	epoch   int64
	version int32
}

// Open connects to the ensemble and waits (up to ctx, or the session
// timeout) for a session, so that the negotiated session timeout is known.
// It refuses (ErrSessionTooShort) when the servers granted less than
// cfg.SessionTimeout. It creates Root if missing, and refuses a root laid
// out by a client of another version (ErrOtherLayout).
func Open(ctx context.Context, cfg Config) (*Backend, error) {
	return openWith(ctx, cfg, nil)
}

// openWith is Open; setup, if not nil, is called on the Backend before it
// connects (tests set their hooks there).
func openWith(ctx context.Context, cfg Config, setup func(*Backend)) (*Backend, error) {
	if err := CheckConfig(cfg); err != nil {
		return nil, err
	}
	cfg.Root = strings.TrimRight(cmpOr(cfg.Root, DefaultRoot), "/")
	cfg.Timeout = cmpOr(cfg.Timeout, DefaultTimeout)
	cfg.SessionTimeout = cmpOr(cfg.SessionTimeout, DefaultSessionTimeout)
	cfg.Drift = lease.DriftOf(cfg.Drift)
	if err := lease.CheckDrift(cfg.Drift); err != nil {
		return nil, err
	}
	bg, stopBg := context.WithCancel(context.Background())
	b := &Backend{cfg: cfg, servers: append([]string(nil), cfg.Servers...), bg: bg, stopBg: stopBg,
		active: map[string]bool{}, doneVer: map[string]doneState{}, ready: map[string]bool{},
		beatExpired: map[string]map[string]beatRec{}, beatKept: map[string]keptRead{}}
	if setup != nil {
		setup(b)
	}
	conn, events, err := zk.Connect(cfg.Servers, cfg.SessionTimeout,
		zk.WithLogger(sessionLogger{b}), zk.WithLogInfo(true), zk.WithDialer(b.dial))
	if err != nil {
		stopBg()
		return nil, fmt.Errorf("zookeeper %s: %w", strings.Join(cfg.Servers, ","), err)
	}
	b.conn = conn
	go drain(events)
	wait, cancel := context.WithTimeout(ctx, max(cfg.SessionTimeout, 5*time.Second))
	defer cancel()
	for b.negoMS.Load() == 0 || conn.State() != zk.StateHasSession {
		select {
		case <-wait.Done():
			stopBg()
			conn.Close()
			return nil, fmt.Errorf("zookeeper %s: no session: %w", strings.Join(cfg.Servers, ","), wait.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
	if err := b.sessionErr(); err != nil {
		stopBg()
		conn.Close()
		return nil, err
	}
	if cfg.Auth != "" {
		if err := conn.AddAuth("digest", []byte(cfg.Auth)); err != nil {
			stopBg()
			conn.Close()
			return nil, fmt.Errorf("zookeeper %s: authentication: %w", conn.Server(), err)
		}
	}
	if err := b.makeRoot(ctx); err != nil {
		stopBg()
		conn.Close()
		return nil, err
	}
	return b, nil
}

// drain consumes the session's events (state changes are read from
// Conn.State when needed).
func drain(events <-chan zk.Event) {
	for range events {
	}
}

func cmpOr[T comparable](v, d T) T {
	var zero T
	if v == zero {
		return d
	}
	return v
}

// Timeout is the per-request timeout.
func (b *Backend) Timeout() time.Duration { return b.cfg.Timeout }

// Quorum is 1: the ensemble keeps its own quorum.
func (b *Backend) Quorum() int { return 1 }

// Servers lists the ensemble's addresses.
func (b *Backend) Servers() []string { return append([]string(nil), b.servers...) }

// Close closes the session: its locks vanish at once.
func (b *Backend) Close() error {
	b.mu.Lock() // orders this against deleteLockEventually's bgWG.Add
	first := b.closed.CompareAndSwap(false, true)
	b.mu.Unlock()
	if first {
		b.stopBg()
		b.bgWG.Wait()
		b.conn.Close()
	}
	return nil
}

// errTimeout is a request's error when it had no answer within Timeout.
var errTimeout = errors.New("no answer in time")

// call runs f (a blocking go-zookeeper request) bounded by ctx and the
// per-request timeout. When f has not returned by then, call returns
// errTimeout and f goes on in the background; late, if given, is called
// with f's error once it returns (to undo what it did). So a caller reads
// what f wrote only when call returned nil (or f's own error): after a
// timeout f may still be writing it. A request given
// up on is watched: if the server stays silent, the connection is dropped
// (watchSilence).
func (b *Backend) call(ctx context.Context, timeout time.Duration, f func() error, late func(error)) error {
	if b.closed.Load() {
		return lease.ErrClosed
	}
	done := make(chan error, 1)
	answered := make(chan struct{})
	start := time.Now()
	go func() {
		err := f()
		done <- err
		close(answered)
	}()
	t := time.NewTimer(timeout)
	defer t.Stop()
	var err error
	select {
	case err = <-done:
		return err
	case <-t.C:
		err = errTimeout
	case <-ctx.Done():
		err = ctx.Err()
	}
	b.watchSilence(start, answered)
	if late != nil {
		go func() { late(<-done) }()
	}
	return err
}

// nodeErr wraps err with the server it concerns: the one the session is
// connected to for an error a server returned, and every server for a
// request that found none to answer it (a timeout, a lost connection).
func (b *Backend) nodeErr(err error) error {
	serverSaid := errors.Is(err, zk.ErrNoAuth) || errors.Is(err, zk.ErrNoNode) ||
		errors.Is(err, zk.ErrNodeExists) || errors.Is(err, zk.ErrBadVersion) || errors.Is(err, zk.ErrSessionExpired)
	if srv := b.conn.Server(); serverSaid && srv != "" && b.conn.State() == zk.StateHasSession {
		return &lease.NodeError{Node: srv, Err: err}
	}
	errs := make([]error, len(b.servers))
	for i, s := range b.servers {
		errs[i] = &lease.NodeError{Node: s, Err: err}
	}
	return errors.Join(errs...)
}

// ensureParents creates the parents of path as persistent nodes. It runs
// once, at Open, and may take up to the session timeout (a new ensemble's
// first write waits for its leader to settle).
func (b *Backend) ensureParents(ctx context.Context, path string) error {
	parts := strings.Split(strings.TrimPrefix(path, "/"), "/")
	p := ""
	for _, part := range parts[:len(parts)-1] {
		p += "/" + part
		err := b.createOrFind(ctx, p, func() error {
			_, err := b.conn.Create(p, nil, 0, b.acl())
			return err
		})
		if err != nil && !errors.Is(err, zk.ErrNodeExists) {
			return fmt.Errorf("zookeeper: create %s: %w", p, b.nodeErr(err))
		}
	}
	return nil
}

// span is how long a grant or extension of ttl can be trusted, before
// the drift margin: the ttl, at most the session timeout (a lock lives
// as long as the session). Validity counts it with lease.Validity.
func (b *Backend) span(ttl time.Duration) time.Duration {
	if b.test.span > 0 {
		return b.test.span
	}
	return min(ttl, b.SessionTimeout())
}
