package etcd

import (
	"context"
	"errors"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/leasecron/leasecron/lease"
)

// acquireChunk runs one transaction for the requests at idx (distinct
// keys, each with its batch's shared lease in sh) and fills out and held.
// When the transaction's answer is lost, it returns the requests with the
// lock values they may have written (Owner holds the value), to clean up,
// and notes each value in written.
func (b *Backend) acquireChunk(ctx context.Context, start time.Time, reqs []lease.Request, idx []int,
	sh []*shared, out []lease.Result, held []clientv3.LeaseID, written []string, failed func(error) error) []lease.Request {
	tokens := make([]string, len(idx))
	values := make([]string, len(idx))
	ops := make([]clientv3.Op, len(idx))
	for j, i := range idx {
		r := reqs[i]
		tokens[j] = lease.NewToken()
		values[j] = lockValue(tokens[j], r.TTL, r.Owner)
		ops[j] = acquireOp(b.keys(r.Key), r.Epoch, values[j], sh[i].id)
	}
	// A member needs time to run every key's transaction: 100 µs per key.
	tctx, cancel := context.WithTimeout(ctx, b.cfg.Timeout+time.Duration(len(idx))*100*time.Microsecond)
	resp, err := b.c.Txn(tctx).Then(ops...).Commit()
	cancel()
	if err != nil {
		ne := failed(fmt.Errorf("acquire txn: %w", err))
		lost := make([]lease.Request, len(idx))
		for j, i := range idx {
			out[i].Err = &lease.RefusedError{Key: reqs[i].Key, Reason: lease.ErrNoQuorum, NodeErrs: ne}
			lost[j] = lease.Request{Key: reqs[i].Key, Owner: values[j], TTL: reqs[i].TTL}
			written[i] = values[j]
		}
		return lost
	}
	fence := resp.Header.Revision
	var late []lease.Request
	for j, i := range idx {
		r := reqs[i]
		var a acquireAnswer
		if j < len(resp.Responses) {
			if t := resp.Responses[j].GetResponseTxn(); t != nil {
				a = readAcquire(t)
			}
		}
		if a.won {
			left := lease.Validity(start, r.TTL, b.o.drift) + b.test.validityBonus
			if left <= 0 {
				out[i].Err = b.refuse(r.Key, fmt.Errorf("acquired after %s, past the validity", time.Since(start).Round(time.Millisecond)), "too late")
				late = append(late, lease.Request{Key: r.Key, Owner: values[j], TTL: r.TTL})
				continue
			}
			sh[i].refs.Add(1)
			l := &Lease{State: lease.NewState(r, tokens[j], fence), b: b, sh: sh[i]}
			l.SetValidUntil(start.Add(left))
			out[i].Lease = l
			continue
		}
		re := &lease.RefusedError{Key: r.Key, DoneEpoch: a.doneEpo}
		switch {
		case r.Epoch > 0 && a.doneEpo >= r.Epoch:
			re.Reason = lease.ErrEpochDone
		case a.holder != nil:
			// The answer is linearizable: a quorum of members agreed.
			re.Reason, re.Holder, re.HolderTTL, re.HolderNodes = lease.ErrHeld, a.holder.owner, a.holder.ttl, b.Quorum()
			held[i] = a.holder.lease
		default:
			re.Reason, re.NodeErrs = lease.ErrNoQuorum, b.nodeErr(fmt.Errorf("unexpected transaction answer"))
		}
		out[i].Err = re
	}
	return late
}

// cleanLater deletes, in the background, locks that a transaction whose
// answer was lost (or came too late) may have written: each only if it
// still holds the value written (Owner carries it, with the attempt's own
// token), so no other holder's lock — nor a later one of this host — is
// touched. The shared lease is not revoked for them, as other keys of the
// batch may hold it. A delete that fails (the member that took the lost
// transaction was killed, say) is tried again until it is answered or the
// lock's TTL has passed: a lock left behind would hold the key, and the
// next ticks of its job, for its whole TTL.
func (b *Backend) cleanLater(reqs []lease.Request) {
	if len(reqs) == 0 {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed.Load() {
		return // they expire with their lease
	}
	b.wg.Go(func() {
		b.parallel(len(reqs), func(i int) {
			lock := b.keys(reqs[i].Key).lock
			until := time.Now().Add(reqs[i].TTL)
			for wait := 50 * time.Millisecond; ; wait = min(2*wait, time.Second) {
				ctx, cancel := context.WithTimeout(b.bg, b.cfg.Timeout)
				_, err := b.c.Txn(ctx).If(clientv3.Compare(clientv3.Value(lock), "=", reqs[i].Owner)).
					Then(clientv3.OpDelete(lock)).Commit()
				cancel()
				if err == nil || b.bg.Err() != nil || time.Now().Add(wait).After(until) {
					return
				}
				t := time.NewTimer(wait)
				select {
				case <-b.bg.Done():
					t.Stop()
					return
				case <-t.C:
				}
			}
		})
	})
}

// readRefused replaces the no-quorum refusals in out with what one
// member's own copy of the data says, read without a quorum
// (serializable): a key held by another owner is refused as held (with
// HolderNodes 1, as the copy may be stale) and a completed epoch as done,
// so that refusals keep their detail while the cluster elects a leader.
// Refusing on a stale copy is safe; a key that looks free, or holds the
// lock this request wrote in a transaction whose answer was lost
// (written; cleaned up by cleanLater), stays ErrNoQuorum.
func (b *Backend) readRefused(ctx context.Context, reqs []lease.Request, out []lease.Result, held []clientv3.LeaseID, written []string) {
	var idx []int
	for i, r := range out {
		var re *lease.RefusedError
		if r.Err != nil && errors.As(r.Err, &re) && re.Reason == lease.ErrNoQuorum && !errors.Is(r.Err, lease.ErrClosed) {
			idx = append(idx, i)
		}
	}
	per := max(b.o.maxTxnOps/2, 1)
	var chunks [][]int
	for len(idx) > 0 {
		n := min(per, len(idx))
		chunks, idx = append(chunks, idx[:n]), idx[n:]
	}
	b.parallelN(txnParallel, len(chunks), func(j int) {
		ops := make([]clientv3.Op, 0, 2*len(chunks[j]))
		for _, i := range chunks[j] {
			k := b.keys(reqs[i].Key)
			ops = append(ops, clientv3.OpGet(k.lock, clientv3.WithSerializable()), clientv3.OpGet(k.done, clientv3.WithSerializable()))
		}
		tctx, cancel := context.WithTimeout(ctx, b.cfg.Timeout)
		resp, err := b.c.Txn(tctx).Then(ops...).Commit()
		cancel()
		if err != nil {
			return
		}
		for n, i := range chunks[j] {
			if 2*n+1 >= len(resp.Responses) {
				break
			}
			re := out[i].Err.(*lease.RefusedError)
			re.DoneEpoch = parseDone(resp.Responses[2*n+1].GetResponseRange().GetKvs())
			lock := resp.Responses[2*n].GetResponseRange().GetKvs()
			switch {
			case reqs[i].Epoch > 0 && re.DoneEpoch >= reqs[i].Epoch:
				re.Reason = lease.ErrEpochDone
			case len(lock) > 0 && written[i] != "" && string(lock[0].Value) == written[i]:
				re.Detail = "the key holds this request's own lock, written by a transaction whose answer was lost"
			case len(lock) > 0:
				h := parseLock(lock[0])
				re.Reason, re.Holder, re.HolderTTL, re.HolderNodes = lease.ErrHeld, h.owner, h.ttl, 1
				re.Detail = "read from one member without a quorum"
				held[i] = h.lease
			}
		}
	})
}
