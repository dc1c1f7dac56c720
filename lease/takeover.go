package lease

import (
	"sync"
	"time"
)

// minPrune is the size of the observation map below which it is never
// pruned.
const minPrune = 1024

// observation is a held lease version a contender saw: the holder's
// token, the version of its record (a new one on every write: each
// renewal; PostgreSQL's xmin, MySQL's version column), the holder's TTL as
// of that write, when this client first got a reply showing it
// (monotonic), and when it last did.
type observation struct {
	token, version string
	ttl            time.Duration
	first, last    time.Time
}

// Observations are what one client has seen of held leases, by key: the
// contender's side of a takeover, counted on the contender's own
// monotonic clock, so that a store's clock that steps cannot shorten a
// lease (ZooKeeper and Curator expire a session the same way, on the
// observer's clock). A lease may be taken over only when this client has
// seen the same version of it for at least the holder's TTL. The
// PostgreSQL and MySQL drivers use it; a contender that restarts forgets
// what it saw and waits a full TTL again (safe, only slower). Safe for
// concurrent use.
type Observations struct {
	mu      sync.Mutex
	m       map[string]*observation
	pruneAt int
}

// NewObservations returns an empty set of observations.
func NewObservations() *Observations {
	return &Observations{m: make(map[string]*observation), pruneAt: minPrune}
}

// Ripe returns the token and version to take over for key: the version
// this client has seen unchanged for at least its TTL by now, or "" and
// "" (no takeover).
func (o *Observations) Ripe(key string, now time.Time) (token, version string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if ob := o.m[key]; ob != nil && now.Sub(ob.first) >= ob.ttl {
		return ob.token, ob.version
	}
	return "", ""
}

// Saw records that a reply received at now showed key held with token and
// version, written with ttl. It returns how long until that version may
// be taken over by this client (<= 0: already).
//
// The count starts when the reply arrived, not when the request left: the
// row version was committed before the statement's snapshot, so before
// the reply, and the holder counted its validity from before its own
// request left, earlier still. A request that left before the holder's
// write may see it, and counting from its start would end the count
// before the holder's validity.
func (o *Observations) Saw(key, token, version string, ttl time.Duration, now time.Time) time.Duration {
	o.mu.Lock()
	defer o.mu.Unlock()
	ob := o.m[key]
	if ob == nil || ob.token != token || ob.version != version {
		ob = &observation{token: token, version: version, ttl: ttl, first: now}
		o.m[key] = ob
	}
	ob.last = now
	o.pruneLocked(now)
	return ob.ttl - now.Sub(ob.first)
}

// Forget drops key's observation (the key was granted to this client, or
// found free).
func (o *Observations) Forget(key string) {
	o.mu.Lock()
	delete(o.m, key)
	o.mu.Unlock()
}

// pruneLocked drops, once the map has doubled since the last pruning, the
// observations not confirmed for a minute beyond their TTL (keys nobody
// here contends for any more). Dropping one costs only liveness: the next
// attempt on its key counts a full TTL again.
func (o *Observations) pruneLocked(now time.Time) {
	if len(o.m) < o.pruneAt {
		return
	}
	for k, ob := range o.m {
		if now.Sub(ob.last) > ob.ttl+time.Minute {
			delete(o.m, k)
		}
	}
	o.pruneAt = max(minPrune, 2*len(o.m))
}
