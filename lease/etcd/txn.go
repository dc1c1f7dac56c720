package etcd

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// This file holds every transaction of the backend: what it compares,
// writes and reads, and how its answer is read back.

// keys are the etcd keys of one lease key (see the package documentation).
type keys struct{ lock, fence, done, note string }

func (b *Backend) keys(key string) keys {
	p := b.cfg.Prefix + key + "/"
	return keys{lock: p + "lock", fence: p + "fence", done: p + "done", note: p + "note"}
}

// pad formats n so that byte-wise order is numeric order (n >= 0).
func pad(n uint64) string { return fmt.Sprintf("%020d", n) }

// lockValue is the lock's value: "TOKEN TTLMS OWNER".
func lockValue(token string, ttl time.Duration, owner string) string {
	return token + " " + strconv.FormatInt(ttl.Milliseconds(), 10) + " " + owner
}

// holder is a decoded lock.
type holder struct {
	token, owner string
	ttl          time.Duration // the holder's TTL, from the value
	lease        clientv3.LeaseID
	createRev    int64
}

func parseLock(kv *mvccpb.KeyValue) holder {
	parts := strings.SplitN(string(kv.Value), " ", 3)
	h := holder{lease: clientv3.LeaseID(kv.Lease), createRev: kv.CreateRevision}
	if len(parts) == 3 {
		h.token, h.owner = parts[0], parts[2]
		if ms, err := strconv.ParseInt(parts[1], 10, 64); err == nil {
			h.ttl = time.Duration(ms) * time.Millisecond
		}
	}
	return h
}

// parseDone decodes the done key's value (0 if absent or malformed).
func parseDone(kvs []*mvccpb.KeyValue) int64 {
	if len(kvs) == 0 {
		return 0
	}
	n, _ := strconv.ParseInt(string(kvs[0].Value), 10, 64)
	return n
}

// acquireOp is one key's acquisition, as a (nested) transaction:
//
//	If(CreateRevision(lock) = 0, CreateRevision(done) = 0)   // no done key yet
//	Then(Put(lock, value, lease), Put(fence))
//	Else(Txn(If(CreateRevision(lock) = 0, Value(done) < pad(epoch))
//	         Then(Put(lock, value, lease), Put(fence))
//	         Else(Get(lock), Get(done))))
//
// Two levels because etcd's value compare fails on a missing key. Without
// an epoch only the lock is compared. The winning put's revision (the
// response header's) is the fence.
func acquireOp(k keys, epoch int64, value string, id clientv3.LeaseID) clientv3.Op {
	put := []clientv3.Op{clientv3.OpPut(k.lock, value, clientv3.WithLease(id)), clientv3.OpPut(k.fence, "")}
	get := []clientv3.Op{clientv3.OpGet(k.lock), clientv3.OpGet(k.done)}
	free := clientv3.Compare(clientv3.CreateRevision(k.lock), "=", 0)
	if epoch <= 0 {
		return clientv3.OpTxn([]clientv3.Cmp{free}, put, get)
	}
	inner := clientv3.OpTxn([]clientv3.Cmp{free, clientv3.Compare(clientv3.Value(k.done), "<", pad(uint64(epoch)))}, put, get)
	return clientv3.OpTxn([]clientv3.Cmp{free, clientv3.Compare(clientv3.CreateRevision(k.done), "=", 0)}, put, []clientv3.Op{inner})
}

// acquireOpsPerKey is how many levels of ops one key adds below the
// batch's own level (see checkTxnRequest in etcd: each nested level's
// budget is --max-txn-ops minus the levels above).
const acquireOpsPerKey = 4

// acquireAnswer is one key's outcome in a batch transaction.
type acquireAnswer struct {
	won     bool
	holder  *holder // nil when the lock was free
	doneEpo int64
}

// readAcquire decodes one key's nested transaction response.
func readAcquire(r *pb.TxnResponse) acquireAnswer {
	if r.Succeeded {
		return acquireAnswer{won: true}
	}
	if len(r.Responses) == 1 { // the epoch's inner transaction
		if in := r.Responses[0].GetResponseTxn(); in != nil {
			return readAcquire(in)
		}
	}
	var a acquireAnswer
	if len(r.Responses) == 2 {
		if kvs := r.Responses[0].GetResponseRange().GetKvs(); len(kvs) > 0 {
			h := parseLock(kvs[0])
			a.holder = &h
		}
		a.doneEpo = parseDone(r.Responses[1].GetResponseRange().GetKvs())
	}
	return a
}

// guard is the compare every write of a holder makes: the lock is still
// the one its acquisition created.
func guard(k keys, fence int64) clientv3.Cmp {
	return clientv3.Compare(clientv3.CreateRevision(k.lock), "=", fence)
}

// completeOps is the completion of the lease of the given fence: if the
// fence key's ModRevision is still that fence — no acquisition since ours,
// as every winning acquisition rewrites it — mark the epoch done and
// delete the lock (ours, or already gone with our expired etcd lease);
// else read the done key (a lost answer to an earlier attempt may have
// marked it).
func completeOps(k keys, fence, epoch int64) (cmp clientv3.Cmp, then, els []clientv3.Op) {
	return clientv3.Compare(clientv3.ModRevision(k.fence), "=", fence),
		[]clientv3.Op{clientv3.OpPut(k.done, pad(uint64(epoch))), clientv3.OpDelete(k.lock)},
		[]clientv3.Op{clientv3.OpGet(k.done)}
}

// inspectOps reads everything Inspect reports in one transaction.
func inspectOps(k keys) []clientv3.Op {
	return []clientv3.Op{clientv3.OpGet(k.lock), clientv3.OpGet(k.done), clientv3.OpGet(k.fence), clientv3.OpGet(k.note)}
}

// noteValue is the note key's value: "VERSION NOTE".
func noteValue(version int64, note string) string { return pad(uint64(version)) + " " + note }

// parseNote decodes a note value (version -1 when absent).
func parseNote(kvs []*mvccpb.KeyValue) (string, int64) {
	if len(kvs) == 0 {
		return "", -1
	}
	v, note, _ := strings.Cut(string(kvs[0].Value), " ")
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return "", -1
	}
	return note, n
}

// setNoteOp writes the note unless a higher version is stored: the stored
// value, which starts with its padded version, must sort below
// pad(version+1). A missing key cannot be compared by value, hence the
// CreateRevision branch first.
func setNoteOp(k keys, version int64, note string) (cmp []clientv3.Cmp, then, els []clientv3.Op) {
	put := clientv3.OpPut(k.note, noteValue(version, note))
	inner := clientv3.OpTxn([]clientv3.Cmp{clientv3.Compare(clientv3.Value(k.note), "<", pad(uint64(version)+1))},
		[]clientv3.Op{put}, []clientv3.Op{clientv3.OpGet(k.note)})
	return []clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(k.note), "=", 0)}, []clientv3.Op{put}, []clientv3.Op{inner}
}
