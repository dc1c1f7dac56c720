package etcd

import (
	"context"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/leasecron/leasecron/backend"
)

// acquireChunk runs one transaction for the requests at idx (distinct
// keys, each with its granted lease in ids) and fills out and held.
func (b *Backend) acquireChunk(ctx context.Context, start time.Time, reqs []backend.Request, idx []int,
	ids []clientv3.LeaseID, out []backend.Result, held []clientv3.LeaseID) {
	tokens := make([]string, len(idx))
	ops := make([]clientv3.Op, len(idx))
	for j, i := range idx {
		r := reqs[i]
		tokens[j] = newToken()
		ops[j] = acquireOp(b.keys(r.Key), r.Epoch, lockValue(tokens[j], r.TTL, r.Owner), ids[i])
	}
	// A node needs time to run every key's transaction: 100 µs per key.
	tctx, cancel := context.WithTimeout(ctx, b.cfg.Timeout+time.Duration(len(idx))*100*time.Microsecond)
	resp, err := b.c.Txn(tctx).Then(ops...).Commit()
	cancel()
	if err != nil {
		// The answer may have been lost after the puts: revoking the
		// leases deletes whatever they wrote.
		var lost []clientv3.LeaseID
		for _, i := range idx {
			out[i].Err = b.refuse(reqs[i].Key, fmt.Errorf("acquire txn: %w", err), "")
			lost = append(lost, ids[i])
		}
		b.revokeLater(lost...)
		return
	}
	fence := resp.Header.Revision
	var unused []clientv3.LeaseID
	for j, i := range idx {
		r := reqs[i]
		var a acquireAnswer
		if j < len(resp.Responses) {
			if t := resp.Responses[j].GetResponseTxn(); t != nil {
				a = readAcquire(t)
			}
		}
		if a.won {
			left := b.validity(start, r.TTL)
			if left <= 0 {
				out[i].Err = b.refuse(r.Key, fmt.Errorf("acquired after %s, past the validity", time.Since(start).Round(time.Millisecond)), "too late")
				unused = append(unused, ids[i])
				continue
			}
			out[i].Lease = &Lease{b: b, req: r, token: tokens[j], id: ids[i], fence: fence,
				validUntil: time.Now().Add(left)}
			continue
		}
		unused = append(unused, ids[i])
		re := &backend.RefusedError{Key: r.Key, DoneEpoch: a.doneEpo}
		switch {
		case r.Epoch > 0 && a.doneEpo >= r.Epoch:
			re.Reason = backend.ErrEpochDone
		case a.holder != nil:
			re.Reason, re.Holder, re.HolderTTL, re.HolderNodes = backend.ErrHeld, a.holder.owner, a.holder.ttl, 1
			held[i] = a.holder.lease
		default:
			re.Reason, re.NodeErrs = backend.ErrNoQuorum, b.nodeErr(fmt.Errorf("unexpected transaction answer"))
		}
		out[i].Err = re
	}
	b.revokeLater(unused...)
}
