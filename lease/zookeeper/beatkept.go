package zookeeper

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/leasecron/leasecron/lease"
)

// Reads a heartbeat keeps. Besides its own beat znode, a heartbeat reads
// the spaces of Beat.Read (the hosts' space and the pause flags): each
// one's children, entry znodes and beat znode, three requests or more
// for spaces that seldom change. Every write of an entry znode raises the
// data version of its space's znode in the same multi (spacePath), and a
// beat znode has a version of its own; so a Beat keeps what it read of
// each space with those versions, and puts a check of each into the
// multi that writes its heartbeat. The write then succeeds only if no
// space kept changed, and what was kept is what reading the spaces at
// the write would return (expiry judged again, on the clock the write's
// reply renewed): an idle heartbeat is the beat znode's read and that
// multi. A failed check drops what was kept of that space, the write is
// tried again without it, and the space is read afresh after the write.
//
// What is kept is dropped when the session changes (a store that lost
// its data, or was restored, ends every session) and read again after
// keptReadMaxAge whatever the versions say: a space deleted and made
// again, or a hand edit that does not raise the space's version, is seen
// within that time.
//
// Watches would spare the beat znode's read too, but go-zookeeper races
// with them when a session reconnects (docs/benchmarks.md).

// keptReadMaxAge is how long a Beat uses what it read of a space.
const keptReadMaxAge = time.Minute

// keptRead is what a Beat read of a space: its entry znodes (with the
// version of the space's znode) and, when beatsRead, its beat znode
// (with its version; a Beat that writes the space reads its beat znode
// as it writes it).
type keptRead struct {
	dir       dirList
	beats     recsAt
	beatsRead bool
	session   int64
	read      time.Time
}

// keptFor returns what the Beats kept of each space of read that a Beat
// writing space written can use: read in this session, young enough, and
// with the beat znode if it is not the space written.
func (b *Backend) keptFor(read []string, written string) map[string]keptRead {
	b.beatMu.Lock()
	defer b.beatMu.Unlock()
	out := map[string]keptRead{}
	session := b.conn.SessionID()
	for _, s := range read {
		k, ok := b.beatKept[s]
		if ok && k.session == session && time.Since(k.read) < keptReadMaxAge && (k.beatsRead || s == written) {
			out[s] = k
		}
	}
	return out
}

// keep notes k as what the Beats read of space; a nil k forgets it.
func (b *Backend) keep(space string, k *keptRead) {
	b.beatMu.Lock()
	defer b.beatMu.Unlock()
	if k == nil {
		delete(b.beatKept, space)
		return
	}
	b.beatKept[space] = *k
}

// keptChecks are the check operations that say the spaces of kept are
// as kept: the version of each one's znode and, but for the space
// written, of its beat znode. spaces[i] is the space of checks[i].
func (b *Backend) keptChecks(kept map[string]keptRead, written string) (checks []any, spaces []string) {
	for s, k := range kept {
		checks, spaces = append(checks, &zk.CheckVersionRequest{Path: b.spacePath(s), Version: k.dir.version}), append(spaces, s)
		if s != written {
			checks, spaces = append(checks, &zk.CheckVersionRequest{Path: b.beatPath(s), Version: k.beats.version}), append(spaces, s)
		}
	}
	return checks, spaces
}

// readToKeep reads space for a Beat (after its write, or a sync): its
// entry znodes and, unless it is the space written, its beat znode. It
// makes the space's znode and beat znode where missing, so that a check
// of their versions can say nothing changed, and keeps the read; when it
// cannot make them, the read is returned as List's, and not kept.
func (b *Backend) readToKeep(ctx context.Context, space, written string) (keptRead, error) {
	k := keptRead{session: b.conn.SessionID(), read: time.Now()}
	var err error
	if k.dir, err = b.listDir(ctx, space); err != nil {
		return keptRead{}, err
	}
	if k.dir.version < 0 && b.makeDirs(ctx, entriesNode, space) == nil {
		if k.dir, err = b.listDir(ctx, space); err != nil {
			return keptRead{}, err
		}
	}
	k.beats.version = -1
	if space != written {
		k.beatsRead = true
		k.beats, err = b.readBeats(ctx, b.beatPath(space))
		if errors.Is(err, zk.ErrNoNode) && b.makeDirs(ctx, beatsNode, space) == nil {
			k.beats, err = b.readBeats(ctx, b.beatPath(space))
		}
		if errors.Is(err, zk.ErrNoNode) {
			k.beats, err = recsAt{version: -1}, nil
		}
		if err != nil {
			return keptRead{}, err
		}
	}
	if k.dir.version >= 0 && (!k.beatsRead || k.beats.version >= 0) {
		b.keep(space, &k)
	}
	return k, nil
}

// liveKept returns the entry znodes of k that have not expired since
// they were read.
func (b *Backend) liveKept(ctx context.Context, k keptRead) ([]lease.Entry, error) {
	out := make([]lease.Entry, 0, len(k.dir.entries))
	for i, e := range k.dir.entries {
		exp, err := b.expired(ctx, e, &zk.Stat{Mtime: k.dir.mtimes[i]})
		if err != nil {
			return nil, err
		}
		if !exp {
			out = append(out, e)
		}
	}
	return out, nil
}

// setKeeping is setChecked with the checks of kept (see keptChecks):
// a space whose check failed is dropped from kept (and forgotten), and
// the write tried again without it.
func (b *Backend) setKeeping(ctx context.Context, path string, data []byte, version int32, kept map[string]keptRead, written string) (*zk.Stat, error) {
	for {
		checks, spaces := b.keptChecks(kept, written)
		st, failed, err := b.setChecked(ctx, path, data, version, checks)
		if len(failed) == 0 {
			return st, err
		}
		for _, i := range failed {
			delete(kept, spaces[i])
			b.keep(spaces[i], nil)
		}
	}
}

// setChecked sets path's data at version, in one multi with checks (one
// request within the timeout), and notes the server's clock from the
// write's mtime. failed holds the indexes of the checks that failed;
// otherwise err is the write's.
//
// In a failed multi the operations before the first that failed answer
// OK, that one its error, and the ones after it ZooKeeper's "runtime
// inconsistency": so only the first failed check is known (each one
// found costs a multi), and the write's own zk.ErrBadVersion (another
// writer came first) is the multi's error.
func (b *Backend) setChecked(ctx context.Context, path string, data []byte, version int32, checks []any) (st *zk.Stat, failed []int, err error) {
	if len(checks) == 0 {
		st, err = b.setObserved(ctx, path, data, version)
		return st, nil, err
	}
	var got *zk.Stat
	err = b.call(ctx, b.cfg.Timeout, func() error {
		res, err := b.conn.Multi(append([]any{&zk.SetDataRequest{Path: path, Data: data, Version: version}}, checks...)...)
		if err == nil {
			b.clock.observe(res[0].Stat.Mtime, b.clientNow())
			got = res[0].Stat
			return nil
		}
		var cf checksFailed
		if len(res) == len(checks)+1 {
			for i, r := range res[1:] {
				if errors.Is(r.Error, zk.ErrBadVersion) || errors.Is(r.Error, zk.ErrNoNode) {
					cf.at = append(cf.at, i)
				}
			}
		}
		if len(cf.at) > 0 {
			return cf
		}
		return err
	}, nil)
	var cf checksFailed
	if errors.As(err, &cf) {
		return nil, cf.at, nil
	}
	if err != nil {
		return nil, nil, err // got is the late request's (see call)
	}
	return got, nil, nil
}

// checksFailed is setChecked's multi failing on its checks at (indexes
// into the checks).
type checksFailed struct{ at []int }

// Error says which checks failed.
func (c checksFailed) Error() string { return fmt.Sprintf("checks %v failed", c.at) }
