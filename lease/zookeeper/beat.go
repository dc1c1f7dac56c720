package zookeeper

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/leasecron/leasecron/lease"
)

// Heartbeats. A space's entry znodes cost a reader one getData per entry:
// every host reading every host's heartbeat every heartbeat would cost
// the ensemble a number of requests that grows with the square of the
// fleet. Beat keeps the entries it writes in one znode per space instead,
// ROOT/@beats/SPACE (a JSON object: name -> version, TTL, data and the
// leader's clock when written), updated by compare-and-set on the
// znode's version: a heartbeat round reads and writes that one znode, so
// the fleet costs a constant number of requests per host. List and Get
// read it beside the entry znodes (the higher version of a name wins);
// heartbeats are written by Beat only.
const beatsNode = "@beats"

// beatHealthEvery is how often a Beat also asks every server for its
// mode (Health): the heartbeat's own requests reach one server only.
const beatHealthEvery = 10 * time.Second

// beatRec is one entry of a beat znode. At is the leader's clock (ms
// since the epoch) when the entry was written; 0 means "by the write
// that produced the znode's current version" (its mtime), which the next
// writer pins.
type beatRec struct {
	V   int64  `json:"v"`
	TTL int64  `json:"ttl"` // ns
	At  int64  `json:"at"`
	D   []byte `json:"d"`
}

func (b *Backend) beatPath(space string) string {
	return b.cfg.Root + "/" + beatsNode + "/" + space
}

// Beat writes bt's entry into the beat znode of bt.Space (getData, then
// setData guarded by the version read: two requests), and reads the
// spaces of bt.Read as List does at the write (their children, each
// entry znode's data, and their beat znode; the written space's beat
// znode as just written): what an earlier Beat read of a space, where
// the write's multi checked that the space has not changed since
// (beatkept.go), or else read after the write. The write's reply comes
// after the server this session uses applied it, and every write
// acknowledged before it, so the reads that follow see them without a
// sync. Every beatHealthEvery it adds Health's status of every server.
func (b *Backend) Beat(ctx context.Context, bt lease.Beat) lease.BeatResult {
	var r lease.BeatResult
	kept := b.keptFor(bt.Read, bt.Space)
	own, err := b.beatWrite(ctx, bt.Space, bt.Entry, kept)
	if err != nil {
		r.PutErr = fmt.Errorf("zookeeper: put %s/%s: %w", bt.Space, bt.Entry.Name, err)
	}
	if err != nil || !own.written {
		// Without the write's reply (or with no write: a live entry of
		// a higher version was there), nothing says what the server has
		// applied, and nothing checked what was kept: sync as List does.
		clear(kept)
		if serr := b.sync(ctx); serr != nil {
			r.ReadErr = fmt.Errorf("zookeeper: list %v: %w", bt.Read, serr)
			return r
		}
	}
	r.Lists = make([][]lease.Entry, len(bt.Read))
	for i, s := range bt.Read {
		k, ok := kept[s]
		l, lerr := b.beatList(ctx, s, bt.Space, own, err == nil, k, ok)
		if lerr != nil {
			r.Lists, r.ReadErr = nil, fmt.Errorf("zookeeper: list %s: %w", s, lerr)
			break
		}
		r.Lists[i] = l
	}
	b.beatMu.Lock()
	due := time.Since(b.beatHealth) >= beatHealthEvery
	if due {
		b.beatHealth = time.Now()
	}
	b.beatMu.Unlock()
	if due {
		r.Health = b.Health(ctx)
	}
	return r
}

// beatList reads space as List does (without a sync: after Beat's
// write, or its sync), for a Beat that wrote (when wrote) own into the
// beat znode of the space written, which it reads as just written; k is
// what an earlier Beat read of space, when the write checked it (ok).
func (b *Backend) beatList(ctx context.Context, space, written string, own recsAt, wrote bool, k keptRead, ok bool) ([]lease.Entry, error) {
	if !ok {
		var err error
		if k, err = b.readToKeep(ctx, space, written); err != nil {
			return nil, err
		}
	}
	l, err := b.liveKept(ctx, k)
	if err != nil {
		return nil, err
	}
	beats := k.beats
	if space == written {
		if !wrote {
			// The beat znode as the failed write left it: read it.
			be, err := b.beatEntries(ctx, space)
			if err != nil {
				return nil, err
			}
			return mergeBeats(l, be), nil
		}
		beats = own
	}
	live, err := b.liveRecs(ctx, beats)
	if err != nil {
		return nil, err
	}
	return mergeBeats(l, live), nil
}

// beatWrite stores e in the beat znode of space unless it holds a live
// entry of that name with a version >= e.Version, and returns the
// znode's entries as written (their At pinned; a live entry of a higher
// version kept), with the znode's stat. The write checks that the spaces
// of kept are as kept (setKeeping).
func (b *Backend) beatWrite(ctx context.Context, space string, e lease.Entry, kept map[string]keptRead) (recsAt, error) {
	path := b.beatPath(space)
	for try := range putTries {
		if try > 0 {
			if err := b.sync(ctx); err != nil {
				return recsAt{}, err
			}
		}
		cur, err := b.readBeats(ctx, path)
		if errors.Is(err, zk.ErrNoNode) {
			if err := b.makeDirs(ctx, beatsNode, space); err != nil {
				return recsAt{}, err
			}
			continue
		}
		if err != nil {
			return recsAt{}, err
		}
		if old, ok := cur.recs[e.Name]; ok && old.V >= e.Version {
			exp, err := b.recExpired(ctx, old)
			if err != nil {
				return recsAt{}, err
			}
			if !exp {
				return cur, nil
			}
		}
		b.dropJudgedExpired(space, cur.recs)
		cur.recs[e.Name] = beatRec{V: e.Version, TTL: int64(e.TTL), D: e.Data}
		data, err := json.Marshal(cur.recs)
		if err != nil {
			return recsAt{}, err
		}
		st, err := b.setKeeping(ctx, path, data, cur.version, kept, space)
		if errors.Is(err, zk.ErrBadVersion) || errors.Is(err, zk.ErrNoNode) {
			continue
		}
		if err != nil {
			return recsAt{}, b.nodeErr(err)
		}
		rec := cur.recs[e.Name]
		rec.At = st.Mtime
		cur.recs[e.Name] = rec
		b.judgeExpired(ctx, space, cur.recs)
		cur.written = true
		return cur, nil
	}
	return recsAt{}, fmt.Errorf("%d writers in a row came first", putTries)
}

// recsAt is a beat znode's entries (their At pinned) and its version;
// written when a Beat's write produced them.
type recsAt struct {
	recs    map[string]beatRec
	version int32
	written bool
}

// readBeats reads the beat znode at path (see parseBeats).
func (b *Backend) readBeats(ctx context.Context, path string) (recsAt, error) {
	var raw []byte
	var st *zk.Stat
	err := b.call(ctx, b.cfg.Timeout, func() error {
		var err error
		raw, st, err = b.conn.Get(path)
		return err
	}, nil)
	if errors.Is(err, zk.ErrNoNode) {
		return recsAt{}, err
	}
	if err != nil {
		return recsAt{}, b.nodeErr(err)
	}
	return parseBeats(raw, st), nil
}

// parseBeats decodes a beat znode's data raw, read with stat st; its
// entries' At is pinned to the znode's mtime where 0. Malformed data
// reads as no entries.
func parseBeats(raw []byte, st *zk.Stat) recsAt {
	out := recsAt{recs: map[string]beatRec{}, version: st.Version}
	if len(raw) > 0 && json.Unmarshal(raw, &out.recs) != nil {
		out.recs = map[string]beatRec{}
	}
	for n, r := range out.recs {
		if r.At == 0 {
			r.At = st.Mtime
			out.recs[n] = r
		}
	}
	return out
}

// recExpired reports whether r has expired on the estimate of the
// servers' clock (see expired).
func (b *Backend) recExpired(ctx context.Context, r beatRec) (bool, error) {
	return b.expired(ctx, lease.Entry{TTL: time.Duration(r.TTL)}, &zk.Stat{Mtime: r.At})
}

// Expired entries of a beat znode are dropped by its next writer. The
// writer judges them right after its write, when the write's reply has
// just renewed its estimate of the servers' clock, and drops them at its
// next write if they are still there unchanged (expiry is for good: an
// entry written again has another version or time): judged before the
// write instead, at a heartbeat as long as the estimate's age limit,
// every heartbeat would first write ROOT/@clock to renew it. Readers
// judge expiry themselves, so an expired entry left a heartbeat longer
// is never read as live.

// judgeExpired notes which entries of recs, space's beat znode as just
// written, have expired (for dropJudgedExpired).
func (b *Backend) judgeExpired(ctx context.Context, space string, recs map[string]beatRec) {
	expired := map[string]beatRec{}
	for n, r := range recs {
		if exp, err := b.recExpired(ctx, r); err == nil && exp {
			expired[n] = r
		}
	}
	b.beatMu.Lock()
	defer b.beatMu.Unlock()
	b.beatExpired[space] = expired
}

// dropJudgedExpired deletes from recs (space's beat znode as read) the
// entries judgeExpired found expired, where they are unchanged.
func (b *Backend) dropJudgedExpired(space string, recs map[string]beatRec) {
	b.beatMu.Lock()
	defer b.beatMu.Unlock()
	for n, old := range b.beatExpired[space] {
		if r, ok := recs[n]; ok && r.V == old.V && r.At == old.At && r.TTL == old.TTL {
			delete(recs, n)
		}
	}
}

// liveRecs returns the live entries of ra, sorted by name.
func (b *Backend) liveRecs(ctx context.Context, ra recsAt) ([]lease.Entry, error) {
	out := []lease.Entry{}
	for n, r := range ra.recs {
		exp, err := b.recExpired(ctx, r)
		if err != nil {
			return nil, err
		}
		if !exp {
			out = append(out, lease.Entry{Name: n, Version: r.V, Data: r.D, TTL: time.Duration(r.TTL)})
		}
	}
	sortEntries(out)
	return out, nil
}

// beatEntries returns the live entries of the beat znode of space (none
// when it is missing), for List and Get to merge with the entry znodes.
func (b *Backend) beatEntries(ctx context.Context, space string) ([]lease.Entry, error) {
	ra, err := b.readBeats(ctx, b.beatPath(space))
	if errors.Is(err, zk.ErrNoNode) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return b.liveRecs(ctx, ra)
}

// mergeBeats merges the entries of a beat znode into l (sorted by name):
// per name, the higher version.
func mergeBeats(l, beats []lease.Entry) []lease.Entry {
	if len(beats) == 0 {
		return l
	}
	at := make(map[string]int, len(l))
	for i, e := range l {
		at[e.Name] = i
	}
	for _, e := range beats {
		if i, ok := at[e.Name]; ok {
			if e.Version > l[i].Version {
				l[i] = e
			}
			continue
		}
		l = append(l, e)
	}
	sortEntries(l)
	return l
}

// sortEntries sorts entries by name.
func sortEntries(entries []lease.Entry) {
	slices.SortFunc(entries, func(a, b lease.Entry) int { return strings.Compare(a.Name, b.Name) })
}
