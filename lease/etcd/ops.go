package etcd

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/leasecron/leasecron/lease"
)

// Inspect reads the lock, done, fence and note keys in one transaction
// while it asks every endpoint for its Status, then the holder's lease's
// remaining time. Answered counts the members that answered the Status
// (the others are named in NodeErrs); HolderNodes is Answered, or Quorum
// if fewer, since the read was linearizable. When the read fails, the
// error matches ErrNoQuorum and names every endpoint that is down.
func (b *Backend) Inspect(ctx context.Context, key string) (lease.Info, error) {
	if b.closed.Load() {
		return lease.Info{}, fmt.Errorf("inspect %s: %w", key, lease.ErrClosed)
	}
	k := b.keys(key)
	var sts []lease.ServerStatus
	done := make(chan struct{})
	go func() {
		defer close(done)
		sts = b.Health(ctx)
	}()
	tctx, cancel := context.WithTimeout(ctx, b.cfg.Timeout)
	defer cancel()
	resp, err := b.c.Txn(tctx).Then(inspectOps(k)...).Commit()
	<-done
	in := lease.Info{NoteVersion: -1}
	var errs []error
	for _, st := range sts {
		if st.Err != nil {
			errs = append(errs, &lease.NodeError{Node: st.Server, Err: st.Err})
		} else {
			in.Answered++
		}
	}
	in.NodeErrs = errors.Join(errs...)
	if err != nil {
		ne := in.NodeErrs
		if ne == nil {
			ne = b.nodeErr(err)
		}
		return lease.Info{NodeErrs: ne, NoteVersion: -1}, fmt.Errorf("inspect %s: %w: %w", key, lease.ErrNoQuorum, ne)
	}
	r := resp.Responses
	in.DoneEpoch = parseDone(r[1].GetResponseRange().GetKvs())
	if kvs := r[2].GetResponseRange().GetKvs(); len(kvs) > 0 {
		in.Fence = kvs[0].ModRevision
	}
	in.Note, in.NoteVersion = parseNote(r[3].GetResponseRange().GetKvs())
	if kvs := r[0].GetResponseRange().GetKvs(); len(kvs) > 0 {
		h := parseLock(kvs[0])
		in.Holder, in.HolderNodes, in.TTL = h.owner, max(in.Answered, b.Quorum()), b.timeLeft(tctx, h)
	}
	return in, nil
}

// timeLeft estimates how long until holder's lease is free: etcd answers
// LeaseTimeToLive in whole seconds, rounded down, so the estimate is one
// second more, at most the lease's granted TTL and the holder's own TTL
// (whichever is longer). Without an answer, the holder's TTL.
func (b *Backend) timeLeft(ctx context.Context, h holder) time.Duration {
	t, err := b.c.TimeToLive(ctx, h.lease)
	if err != nil || t.TTL < 0 {
		return h.ttl
	}
	return min(time.Duration(t.TTL+1)*time.Second, max(h.ttl, time.Duration(t.GrantedTTL)*time.Second))
}

// downErrs explains a failed request: the *lease.NodeError of every
// endpoint whose Status fails (down, no leader, alarm), or, when all
// answer, one NodeError for the cluster with err.
func (b *Backend) downErrs(ctx context.Context, err error) error {
	var errs []error
	for _, st := range b.Health(ctx) {
		if st.Err != nil {
			errs = append(errs, &lease.NodeError{Node: st.Server, Err: st.Err})
		}
	}
	if len(errs) == 0 {
		return b.nodeErr(err)
	}
	return errors.Join(append(errs, err)...)
}

// SetNote stores note beside key's lease unless a note with a higher
// version is stored: one transaction comparing the stored version, so a
// lower version never overwrites a higher one. version must be >= 0.
func (b *Backend) SetNote(ctx context.Context, key string, version int64, note string) error {
	if version < 0 {
		return fmt.Errorf("set note %s: negative version %d", key, version)
	}
	if b.closed.Load() {
		return fmt.Errorf("set note %s: %w", key, lease.ErrClosed)
	}
	cmp, then, els := setNoteOp(b.keys(key), version, note)
	tctx, cancel := context.WithTimeout(ctx, b.cfg.Timeout)
	defer cancel()
	if _, err := b.c.Txn(tctx).If(cmp...).Then(then...).Else(els...).Commit(); err != nil {
		return fmt.Errorf("set note %s: %w", key, b.nodeErr(err))
	}
	return nil
}

// Health asks every endpoint for its Status, in parallel. A member is
// Voting (and Err is nil) when it answered in time, knows a leader and
// reports no alarm; Latency is the Status round trip.
// The members that failed are taken out of the client's endpoints until
// they answer again (see noteHealth).
func (b *Backend) Health(ctx context.Context) []lease.ServerStatus {
	out := make([]lease.ServerStatus, len(b.cfg.Endpoints))
	var wg sync.WaitGroup
	for i, ep := range b.cfg.Endpoints {
		wg.Go(func() {
			out[i] = b.status(ctx, ep)
		})
	}
	wg.Wait()
	if ctx.Err() == nil { // else the statuses failed for that alone
		b.noteHealth(out)
	}
	return out
}

func (b *Backend) status(ctx context.Context, ep string) lease.ServerStatus {
	st := lease.ServerStatus{Server: ep}
	if b.closed.Load() {
		st.Err = lease.ErrClosed
		return st
	}
	tctx, cancel := context.WithTimeout(ctx, b.cfg.Timeout)
	defer cancel()
	if !b.test.unorderedDial {
		b.eps.dial.RLock()
		defer b.eps.dial.RUnlock()
	}
	t0 := time.Now()
	resp, err := b.c.Status(tctx, ep)
	st.Latency = time.Since(t0)
	switch {
	case err != nil:
		st.Err = err
	case resp.Leader == 0:
		st.Err = fmt.Errorf("member %x knows no leader", resp.Header.GetMemberId())
	case len(resp.Errors) > 0:
		st.Err = fmt.Errorf("member %x reports %v", resp.Header.GetMemberId(), resp.Errors)
	default:
		st.Voting = true
	}
	return st
}

// Warm opens the connection with a serializable read, so the first round
// does not pay for the dial or the TLS handshake. Its error says why a TLS
// handshake fails (gRPC alone reports only a timeout).
func (b *Backend) Warm(ctx context.Context) error {
	if b.closed.Load() {
		return lease.ErrClosed
	}
	tctx, cancel := context.WithTimeout(ctx, max(b.cfg.Timeout, 2*time.Second))
	defer cancel()
	if _, err := b.c.Get(tctx, b.cfg.Prefix, clientv3.WithSerializable(), clientv3.WithCountOnly()); err != nil {
		return fmt.Errorf("warm: %w", b.nodeErr(explainTLS(err, b.cfg, b.tls)))
	}
	return nil
}

// Timeout is the per-request timeout (Config.Timeout).
func (b *Backend) Timeout() time.Duration { return b.cfg.Timeout }

// Quorum is a majority of the endpoints: etcd's own Raft quorum decides,
// and a linearizable answer of one member stands for a majority. List
// every member as an endpoint, so that this is the cluster's quorum.
func (b *Backend) Quorum() int { return len(b.cfg.Endpoints)/2 + 1 }

// Servers lists the endpoints (they carry no credentials).
func (b *Backend) Servers() []string { return append([]string(nil), b.cfg.Endpoints...) }

// Close waits for background revokes (bounded by the timeout) and closes
// the client. Held leases expire by their TTL. Later calls fail with
// ErrClosed.
func (b *Backend) Close() error {
	b.mu.Lock()
	if b.closed.Swap(true) {
		b.mu.Unlock()
		return nil
	}
	b.mu.Unlock()
	b.wg.Wait()
	b.stop()
	b.probeWG.Wait()
	if err := b.c.Close(); err != nil && !errors.Is(err, context.Canceled) {
		return fmt.Errorf("etcd backend close: %w", err)
	}
	return nil
}
