// Package zookeeper is the ZooKeeper backend of leasecron: a lease is an
// ephemeral znode held by the daemon's ZooKeeper session, behind the
// backend.Backend interface. It is like go-zookeeper's zk.Lock or Apache
// Curator's InterProcessMutex, except that a holder always knows how long
// its lock is certainly still its own (Lease.ValidUntil), so it can stop
// its work before anyone else could take the lock over; that it refuses a
// run-once epoch that was completed; and that every acquisition gets a
// fencing token.
//
// # Znodes
//
// Under the root (default /leasecron), each key has a persistent node with
// three children:
//
//	ROOT/KEY/lock   ephemeral: "TOKEN OWNER" of the holder; its czxid is the fencing token
//	ROOT/KEY/done   persistent: the highest completed epoch, in decimal
//	ROOT/KEY/note   persistent: "VERSION\nNOTE", the newest note (SetNote)
//
// Acquire is one multi: Check(done, version) + Create(lock, ephemeral) +
// SetData(lock) — the check makes a completion that happened after this
// client read done fail the create, and the SetData's reply carries the
// lock's czxid, the fencing token: the zxid of the transaction that created
// the lock, strictly greater than every earlier one cluster-wide. A key's
// done version is cached after the first read, so a tick costs one round
// trip per key (requests are pipelined on the session's connection).
// Complete is one multi: SetData(done, version = the lease's generation) +
// Delete(lock); when the lock is already gone (given up at its validity's
// end, or with its session), SetData(done) alone under the same version:
// the generation unchanged means nobody took the key after us.
//
// # Validity
//
// The lock lives as long as the session: ZooKeeper deletes it when the
// session expires, which the leader decides once it has not heard from the
// client for the negotiated session timeout. Every acquire and extend is a
// write that goes through the leader and touches the session, so the lock
// is certainly ours until (start of that request) + min(TTL, negotiated
// session timeout) − drift margin; that is ValidUntil. A disconnected
// client does not count as holding — validity keeps running out from the
// last answered request (Curator's SUSPENDED, not yet LOST), so the holder
// stops before the server could expire the session. The session timeout is
// asked for at Open (Config.SessionTimeout, leasecron: lease.ttl) and the
// server may change it within its minSessionTimeout..maxSessionTimeout;
// the negotiated value is used.
//
// A create whose reply was lost (a timeout, a broken connection) may still
// have made the lock. A late success deletes it again; a lock found later
// whose ephemeral owner is this session but whose token belongs to no
// acquisition in progress or held is such an orphan and is deleted before
// the next attempt.
//
// ZooKeeper keeps its own quorum: Quorum is 1 and Health reports each
// server's mode (srvr four-letter word) and the session's state.
//
// # Entries and logs
//
// Entries (Put, Get, List) and logs (Append, Log) live beside the keys,
// under znodes whose names hold '@', which job names cannot (and which
// Acquire refuses as keys):
//
//	ROOT/@entries/SPACE/NAME       persistent: "VERSION TTL_NS\n" then the entry's data
//	ROOT/@logs/LOG/AT-ID           persistent: the record's data
//	ROOT/@clock                    persistent, empty: written to read the servers' clock
//
// AT is the record's time in ms, offset by 2^63 and zero-padded to 20
// digits, so that names sort by At, then ID. Parents are created on the
// first write that misses them (two daemons may race: ErrNodeExists is
// fine). Data is at most 16 KiB, far below ZooKeeper's 1 MB jute.maxbuffer.
//
// Put is a compare-and-set on the entry znode's version: read it; create
// it when absent (a multi of Create and SetData, whose reply carries the
// mtime); keep it when its stored version is >= the new one and it has not
// expired (confirmed by a Check through the leader, as the read may come
// from a lagging server); else Set it at the version read. A lost race is
// retried, up to 10 times. Two round trips when it writes.
//
// Expiry does not use the clients' clocks. An entry's TTL counts from its
// znode's mtime: the leader's wall clock when the Put was applied. A
// client judges it against its estimate of that clock: every write's
// reply carries the mtime the leader gave it before replying, so at a
// later moment the leader's clock reads at least mtime + (time elapsed on
// this client's monotonic clock since the reply came). The newest such
// sample is kept; when it is older than 5 s, a judgement first writes
// ROOT/@clock for a fresh one (a daemon that heartbeats every 5 s rarely
// needs to). So an entry is never judged expired before its TTL ended on
// the leader's clock, and is judged so at most the sample's round trip
// later. Two things widen that bound: the rate difference of the two
// clocks over at most 5 s (negligible), and an election, after which
// mtimes come from another server's clock, so the skew between the
// servers' clocks (NTP keeps it to milliseconds) adds to it. An expired
// entry is absent for Get, List and Put, and the reader that finds it
// deletes it, at the version it read (a Put in between keeps it). ZooKeeper's
// own TTL nodes are not used: they need zookeeper.extendedTypesEnabled on
// every server; ephemeral nodes are not used either (they live as long
// as the session, not the TTL).
//
// Append creates the record znode (it exists already for a repeated
// record: a no-op), lists the log, and deletes the oldest records beyond
// the limit, and any later copy of a record ID appended again with
// another At (the copy with the lowest creation zxid stays): two round
// trips, and a third (the deletes, pipelined) once the log is full. The listing follows the create on the
// same session, so it sees every record created before it: concurrent
// appenders may leave a few records over the limit, which the next Append
// deletes. A log thus holds at most limit records between Appends (plus
// those of Appends in flight), an entry space one znode per name; expired
// entries go when a Get, List or Put finds them (a List of the space
// finds them all).
//
// Reads (Get, List, Log) first sync the server the session talks to with
// the leader, so they see every write acknowledged before they started
// — the write of another daemon through another server included. A
// write is acknowledged once a quorum logged it, so it survives the loss
// of a minority of servers. (A sync'd read can still miss a write in one
// rare case ZooKeeper documents: a leader that lost its quorum without
// knowing it yet, until it steps down.) A List or Log reads the
// entries' or records' data with pipelined requests, at most 32 in flight.
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

	"github.com/leasecron/leasecron/backend"
)

// Defaults used by Open when the Config leaves a field zero.
const (
	DefaultRoot           = "/leasecron"
	DefaultTimeout        = time.Second
	DefaultSessionTimeout = 30 * time.Second
	DefaultDrift          = 0.01
)

// Config says where the ensemble is and how to use it.
type Config struct {
	// Servers are the ensemble's client addresses, host:port.
	Servers []string
	// Root is the znode under which every key lives; default /leasecron.
	Root string
	// Timeout bounds each request; default 1s.
	Timeout time.Duration
	// SessionTimeout is asked of the servers for this client's session;
	// default 30s (leasecron passes lease.ttl). Locks vanish at most this
	// long after the client was last heard from.
	SessionTimeout time.Duration
	// Auth is "user:password" for the digest scheme (ZooKeeper ACLs), or
	// "" for none. It is never shown in errors.
	Auth string
	// Drift is the clock drift factor, as in package lease; default 0.01.
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
	// unsafeSpan, when set (negative-control tests only), replaces the
	// validity span: a client that trusts its lock longer than its
	// session is certainly alive.
	unsafeSpan time.Duration
	// heldByHook, when set (tests only), runs in heldBy between reading a
	// lock it found to be an orphan and deleting it.
	heldByHook func()
	// trustClientClock, when set (negative-control tests only), judges
	// an entry's expiry against this client's wall clock (clientNow)
	// instead of the servers' clock, as a store trusting its clients'
	// clocks would; testClientNow, when set, replaces that clock.
	trustClientClock bool
	testClientNow    func() time.Time
	// unsafeNoSync, when set (negative-control tests only), reads entries
	// and logs without syncing the server first.
	unsafeNoSync bool

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

var _ backend.Backend = (*Backend)(nil)

// doneState is a key's done node as this client last read it: the
// completed epoch and the node's version. A completion changes the version,
// so an acquisition that checks it in its multi cannot miss one.
type doneState struct {
	epoch   int64
	version int32
}

// sessionLogger receives go-zookeeper's log lines: it learns the
// negotiated session timeout from the "authenticated" line and drops the
// rest (the package logs nothing itself).
type sessionLogger struct{ b *Backend }

func (l sessionLogger) Printf(format string, args ...any) {
	if strings.HasPrefix(format, "authenticated: id=%d, timeout=%d") && len(args) == 2 {
		if ms, ok := args[1].(int32); ok {
			l.b.negoMS.Store(int64(ms))
		}
	}
}

// Open connects to the ensemble and waits (up to ctx, or the session
// timeout) for a session, so that the negotiated session timeout is known.
// It creates Root if missing.
func Open(ctx context.Context, cfg Config) (*Backend, error) {
	if err := CheckConfig(cfg); err != nil {
		return nil, err
	}
	cfg.Root = strings.TrimRight(cmpOr(cfg.Root, DefaultRoot), "/")
	cfg.Timeout = cmpOr(cfg.Timeout, DefaultTimeout)
	cfg.SessionTimeout = cmpOr(cfg.SessionTimeout, DefaultSessionTimeout)
	if cfg.Drift == 0 {
		cfg.Drift = DefaultDrift
	}
	bg, stopBg := context.WithCancel(context.Background())
	b := &Backend{cfg: cfg, servers: append([]string(nil), cfg.Servers...), bg: bg, stopBg: stopBg,
		active: map[string]bool{}, doneVer: map[string]doneState{}, ready: map[string]bool{}}
	conn, events, err := zk.Connect(cfg.Servers, cfg.SessionTimeout,
		zk.WithLogger(sessionLogger{b}), zk.WithLogInfo(true))
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
	if cfg.Auth != "" {
		if err := conn.AddAuth("digest", []byte(cfg.Auth)); err != nil {
			stopBg()
			conn.Close()
			return nil, fmt.Errorf("zookeeper %s: authentication: %w", conn.Server(), err)
		}
	}
	if err := b.ensurePath(ctx, cfg.Root); err != nil {
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

// SessionTimeout returns the session timeout the servers granted.
func (b *Backend) SessionTimeout() time.Duration {
	return time.Duration(b.negoMS.Load()) * time.Millisecond
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
// with f's error once it returns (to undo what it did).
func (b *Backend) call(ctx context.Context, timeout time.Duration, f func() error, late func(error)) error {
	if b.closed.Load() {
		return backend.ErrClosed
	}
	done := make(chan error, 1)
	go func() {
		err := f()
		done <- err
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
		return &backend.NodeError{Node: srv, Err: err}
	}
	errs := make([]error, len(b.servers))
	for i, s := range b.servers {
		errs[i] = &backend.NodeError{Node: s, Err: err}
	}
	return errors.Join(errs...)
}

// ensurePath creates path and its parents as persistent nodes. It runs
// once, at Open, and may take up to the session timeout (a new ensemble's
// first write waits for its leader to settle).
func (b *Backend) ensurePath(ctx context.Context, path string) error {
	p := ""
	for _, part := range strings.Split(strings.TrimPrefix(path, "/"), "/") {
		p += "/" + part
		err := b.call(ctx, b.cfg.SessionTimeout, func() error {
			_, err := b.conn.Create(p, nil, 0, b.acl())
			return err
		}, nil)
		if err != nil && !errors.Is(err, zk.ErrNodeExists) {
			return fmt.Errorf("zookeeper: create %s: %w", p, b.nodeErr(err))
		}
	}
	return nil
}

// validity is how long a lease is certainly ours, counted from start (the
// moment before the request that granted or extended it left).
func (b *Backend) validity(ttl time.Duration, start time.Time) time.Duration {
	span := min(ttl, b.SessionTimeout())
	if b.unsafeSpan > 0 {
		span = b.unsafeSpan
	}
	return span - time.Since(start) - time.Duration(float64(span)*b.cfg.Drift) - 2*time.Millisecond
}
