package etcd

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/leasecron/leasecron/lease"
)

// grantParallel bounds the Grant, Revoke and clean-up calls in flight at
// once; txnParallel the acquisition transactions of one batch (each
// carries up to max-txn-ops - 4 keys; more at once only overload the
// leader, whose raft log every one of them goes through).
const (
	grantParallel = 32
	txnParallel   = 2
)

// Backend is the etcd lease store. It is safe for concurrent use.
type Backend struct {
	cfg  Config
	o    options
	c    *clientv3.Client
	tls  *tls.Config // nil for http endpoints
	node string      // the endpoints, for NodeError

	mu     sync.Mutex // held while adding to wg, and by Close
	closed atomic.Bool
	bg     context.Context // cancelled by Close; bounds background revokes
	stop   context.CancelFunc
	wg     sync.WaitGroup

	// test holds the negative controls' switches (testhooks.go).
	test testHooks

	eps     endpointSet    // the client's endpoints (endpoints.go)
	probeWG sync.WaitGroup // the reprobe loop; Close waits for it

	beat beatState // what the last Beat wrote (beat.go)
}

var _ lease.Backend = (*Backend)(nil)

// Open validates cfg (CheckConfig) and creates a client of the cluster.
// Without a Username it does not wait for a connection: the first request
// (or Warm) dials. With one it logs in, which needs a member to answer
// within Timeout; a failed TLS handshake is then explained in the error.
// ctx's values (not its cancellation) are kept for the client's requests.
func Open(ctx context.Context, cfg Config) (*Backend, error) {
	if err := CheckConfig(cfg); err != nil {
		return nil, fmt.Errorf("etcd backend: %w", err)
	}
	cfg = cfg.withDefaults()
	o := options{drift: cfg.Drift, maxTxnOps: cfg.MaxTxnOps, retryEvery: cfg.RetryEvery}
	if err := lease.CheckDrift(o.drift); err != nil {
		return nil, fmt.Errorf("etcd backend: %w", err)
	}
	if o.maxTxnOps <= acquireOpsPerKey {
		return nil, fmt.Errorf("etcd backend: max txn ops must exceed %d, got %d", acquireOpsPerKey, o.maxTxnOps)
	}
	cc := clientv3.Config{
		Endpoints:            cfg.Endpoints,
		DialTimeout:          cfg.Timeout,
		DialKeepAliveTime:    10 * time.Second,
		DialKeepAliveTimeout: max(cfg.Timeout, time.Second),
		Username:             cfg.Username,
		Password:             cfg.Password,
		Logger:               zap.NewNop(),
		Context:              context.WithoutCancel(ctx),
	}
	if strings.HasPrefix(cfg.Endpoints[0], "https://") {
		tc, err := tlsConfig(cfg)
		if err != nil {
			return nil, fmt.Errorf("etcd backend: %w", err)
		}
		cc.TLS = tc
	}
	c, err := clientv3.New(cc)
	if err != nil {
		return nil, fmt.Errorf("etcd backend %s: %w", strings.Join(cfg.Endpoints, ","), explainTLS(err, cfg, cc.TLS))
	}
	bg, stop := context.WithCancel(context.Background())
	return &Backend{cfg: cfg, o: o, c: c, tls: cc.TLS, node: strings.Join(cfg.Endpoints, ","), bg: bg, stop: stop}, nil
}

// Client returns the underlying etcd client.
func (b *Backend) Client() *clientv3.Client { return b.c }

// Prefix returns the key prefix, with its trailing '/'.
func (b *Backend) Prefix() string { return b.cfg.Prefix }

// nodeErr wraps err as the cluster's NodeError.
func (b *Backend) nodeErr(err error) error { return &lease.NodeError{Node: b.node, Err: err} }

// refuse builds a no-quorum refusal for key.
func (b *Backend) refuse(key string, err error, detail string) *lease.RefusedError {
	return &lease.RefusedError{Key: key, Reason: lease.ErrNoQuorum, NodeErrs: b.nodeErr(err), Detail: detail}
}

// Acquire takes the lease, retrying every Config.RetryEvery (± 25 %) while it
// is held by another owner or the cluster does not answer, until ctx ends.
// When ctx ends it returns the last refusal that named a holder, if any
// (a later attempt that timed out says less).
// A refusal because the lease is held reports the holder's lease's
// remaining time (one more round trip: LeaseTimeToLive, whole seconds).
func (b *Backend) Acquire(ctx context.Context, req lease.Request) (lease.Lease, error) {
	var lastHeld error // the last refusal that named a holder
	for {
		res, held := b.tryBatch(ctx, []lease.Request{req})
		if res[0].Err == nil {
			return res[0].Lease, nil
		}
		err := res[0].Err
		var re *lease.RefusedError
		if errors.As(err, &re) && re.Reason == lease.ErrHeld && held[0] != clientv3.NoLease {
			tctx, cancel := context.WithTimeout(ctx, b.cfg.Timeout)
			re.HolderTTL = b.timeLeft(tctx, holder{lease: held[0], ttl: re.HolderTTL})
			cancel()
		}
		if errors.Is(err, lease.ErrEpochDone) || errors.Is(err, lease.ErrClosed) {
			return nil, err
		}
		if errors.Is(err, lease.ErrHeld) {
			lastHeld = err
		} else if lastHeld != nil {
			// A timed-out attempt says less than the holder seen before.
			err = lastHeld
		}
		t := time.NewTimer(lease.Jitter(b.o.retryEvery))
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, errors.Join(err, ctx.Err())
		case <-t.C:
		}
	}
}

// TryAcquireBatch makes one attempt per request: a Grant per request (in
// parallel, at most 32 at once), then the acquisitions in one transaction
// per chunk of max-txn-ops - 4 distinct keys. Validity counts from before
// the first Grant. A refusal's HolderTTL is the holder's TTL as stored in
// the lock (an upper bound of its time left), to save a round trip.
func (b *Backend) TryAcquireBatch(ctx context.Context, reqs []lease.Request) []lease.Result {
	out, _ := b.tryBatch(ctx, reqs)
	return out
}

// shared is the etcd lease of the requests of one batch with the same
// GrantSeconds, and how many of its Leases are still held.
type shared struct {
	id   clientv3.LeaseID
	refs atomic.Int64
}

// tryBatch is TryAcquireBatch; it also returns each held key's holder's
// etcd lease (NoLease otherwise).
func (b *Backend) tryBatch(ctx context.Context, reqs []lease.Request) ([]lease.Result, []clientv3.LeaseID) {
	out := make([]lease.Result, len(reqs))
	held := make([]clientv3.LeaseID, len(reqs))
	if b.closed.Load() {
		for i, r := range reqs {
			out[i].Err = &lease.RefusedError{Key: r.Key, Reason: lease.ErrNoQuorum, NodeErrs: lease.ErrClosed}
		}
		return out, held
	}
	// One failure probe per batch: which endpoints are down.
	var once sync.Once
	var nodeErrs error
	failed := func(err error) error {
		once.Do(func() { nodeErrs = b.downErrs(ctx, err) })
		return nodeErrs
	}
	start := time.Now()
	groups := map[int64]*shared{}
	var secs []int64
	for _, r := range reqs {
		if s := GrantSeconds(r.TTL); groups[s] == nil {
			groups[s] = &shared{}
			secs = append(secs, s)
		}
	}
	grantErr := make([]error, len(secs))
	b.parallel(len(secs), func(j int) {
		gctx, cancel := context.WithTimeout(ctx, b.cfg.Timeout)
		defer cancel()
		g, err := b.c.Grant(gctx, secs[j])
		if err != nil {
			grantErr[j] = fmt.Errorf("grant: %w", err)
			return
		}
		groups[secs[j]].id = g.ID
	})
	sh := make([]*shared, len(reqs))
	for i, r := range reqs {
		g := groups[GrantSeconds(r.TTL)]
		if g.id == clientv3.NoLease {
			for j, s := range secs {
				if s == GrantSeconds(r.TTL) {
					out[i].Err = &lease.RefusedError{Key: r.Key, Reason: lease.ErrNoQuorum, NodeErrs: failed(grantErr[j])}
				}
			}
			continue
		}
		sh[i] = g
	}
	var mu sync.Mutex
	var orphans []lease.Request // keys of chunks whose answer was lost
	chunks := b.chunks(reqs, out)
	written := make([]string, len(reqs)) // lock values of lost answers
	b.parallelN(txnParallel, len(chunks), func(j int) {
		if lost := b.acquireChunk(ctx, start, reqs, chunks[j], sh, out, held, written, failed); lost != nil {
			mu.Lock()
			orphans = append(orphans, lost...)
			mu.Unlock()
		}
	})
	var unused []clientv3.LeaseID
	for _, g := range groups {
		if g.id != clientv3.NoLease && g.refs.Load() == 0 {
			unused = append(unused, g.id)
		}
	}
	b.revokeLater(unused...)
	b.cleanLater(orphans)
	b.readRefused(ctx, reqs, out, held, written)
	return out, held
}

// chunks splits the granted requests (those without an error yet) into
// groups that fit one transaction and hold distinct keys.
func (b *Backend) chunks(reqs []lease.Request, out []lease.Result) [][]int {
	size := b.o.maxTxnOps - acquireOpsPerKey
	var all [][]int
	var cur []int
	seen := map[string]bool{}
	for i, r := range reqs {
		if out[i].Err != nil {
			continue
		}
		if len(cur) == size || seen[r.Key] {
			all, cur, seen = append(all, cur), nil, map[string]bool{}
		}
		cur = append(cur, i)
		seen[r.Key] = true
	}
	if len(cur) > 0 {
		all = append(all, cur)
	}
	return all
}

// parallel runs f(0..n-1) with at most grantParallel calls at once.
func (b *Backend) parallel(n int, f func(i int)) { b.parallelN(grantParallel, n, f) }

// parallelN runs f(0..n-1) with at most k calls at once.
func (b *Backend) parallelN(k, n int, f func(i int)) {
	sem := make(chan struct{}, k)
	var wg sync.WaitGroup
	for i := range n {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			f(i)
		})
	}
	wg.Wait()
}

// revokeLater revokes leases that won nothing, in the background (they
// would otherwise linger on the server until their TTL). Close waits.
func (b *Backend) revokeLater(ids ...clientv3.LeaseID) {
	if len(ids) == 0 {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed.Load() {
		return // they expire by their TTL
	}
	b.wg.Go(func() {
		b.parallel(len(ids), func(i int) {
			ctx, cancel := context.WithTimeout(b.bg, b.cfg.Timeout)
			defer cancel()
			_, _ = b.c.Revoke(ctx, ids[i])
		})
	})
}

// isLeaseGone reports whether err says the etcd lease no longer exists.
func isLeaseGone(err error) bool {
	return errors.Is(err, rpctypes.ErrLeaseNotFound) || strings.Contains(err.Error(), rpctypes.ErrLeaseNotFound.Error())
}
