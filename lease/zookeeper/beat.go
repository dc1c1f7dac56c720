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
// spaces of bt.Read after the write as List does (their children, each
// entry znode's data, and their beat znode; the written space's beat
// znode as just written). The write's reply comes after the server this
// session uses applied it, and every write acknowledged before it, so the
// reads that follow see them without a sync. Every beatHealthEvery it
// adds Health's status of every server.
func (b *Backend) Beat(ctx context.Context, bt lease.Beat) lease.BeatResult {
	var r lease.BeatResult
	own, err := b.beatWrite(ctx, bt.Space, bt.Entry)
	if err != nil {
		r.PutErr = fmt.Errorf("zookeeper: put %s/%s: %w", bt.Space, bt.Entry.Name, err)
	}
	if err != nil {
		// Without the write's reply, nothing says what the server has
		// applied: sync as List does.
		if serr := b.sync(ctx); serr != nil {
			r.ReadErr = fmt.Errorf("zookeeper: list %v: %w", bt.Read, serr)
			return r
		}
	}
	r.Lists = make([][]lease.Entry, len(bt.Read))
	for i, s := range bt.Read {
		l, lerr := b.listZnodes(ctx, s)
		if lerr == nil {
			var beats []lease.Entry
			if s == bt.Space && err == nil {
				beats, lerr = b.liveRecs(ctx, own)
			} else {
				beats, lerr = b.beatEntries(ctx, s)
			}
			l = mergeBeats(l, beats)
		}
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

// beatWrite stores e in the beat znode of space unless it holds a live
// entry of that name with a version >= e.Version, and returns the
// znode's entries as written (their At pinned; a live entry of a higher
// version kept), with the znode's stat.
func (b *Backend) beatWrite(ctx context.Context, space string, e lease.Entry) (recsAt, error) {
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
		if err := b.dropExpiredRecs(ctx, cur.recs); err != nil {
			return recsAt{}, err
		}
		cur.recs[e.Name] = beatRec{V: e.Version, TTL: int64(e.TTL), D: e.Data}
		data, err := json.Marshal(cur.recs)
		if err != nil {
			return recsAt{}, err
		}
		st, err := b.setObserved(ctx, path, data, cur.version)
		if errors.Is(err, zk.ErrBadVersion) || errors.Is(err, zk.ErrNoNode) {
			continue
		}
		if err != nil {
			return recsAt{}, b.nodeErr(err)
		}
		rec := cur.recs[e.Name]
		rec.At = st.Mtime
		cur.recs[e.Name] = rec
		return cur, nil
	}
	return recsAt{}, fmt.Errorf("%d writers in a row came first", putTries)
}

// recsAt is a beat znode's entries (their At pinned) and its version.
type recsAt struct {
	recs    map[string]beatRec
	version int32
}

// readBeats reads the beat znode at path; its entries' At is pinned to
// the znode's mtime where 0. Malformed data reads as no entries.
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
	return out, nil
}

// recExpired reports whether r has expired on the estimate of the
// servers' clock (see expired).
func (b *Backend) recExpired(ctx context.Context, r beatRec) (bool, error) {
	return b.expired(ctx, lease.Entry{TTL: time.Duration(r.TTL)}, &zk.Stat{Mtime: r.At})
}

// dropExpiredRecs deletes the expired entries of recs.
func (b *Backend) dropExpiredRecs(ctx context.Context, recs map[string]beatRec) error {
	for n, r := range recs {
		exp, err := b.recExpired(ctx, r)
		if err != nil {
			return err
		}
		if exp {
			delete(recs, n)
		}
	}
	return nil
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
	slices.SortFunc(out, func(a, b lease.Entry) int { return strings.Compare(a.Name, b.Name) })
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
	slices.SortFunc(l, func(a, b lease.Entry) int { return strings.Compare(a.Name, b.Name) })
	return l
}
