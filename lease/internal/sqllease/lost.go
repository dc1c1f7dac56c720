package sqllease

import (
	"sync"
	"time"

	"github.com/leasecron/leasecron/lease"
)

// lostGrants remembers, per key, the token of this client's last attempt
// whose answer was lost (a timeout, a dead connection): the server may
// have run the statement and granted the row to that token, which no
// lease of this client carries — a grant that would hold the key, and the
// next ticks of its job, until other clients take it over one to two TTLs
// later. The next attempt at the key uses that token again, and the
// acquire statement grants a row that already carries the attempt's token
// ("already ours"), so the lost grant is taken back at once.
//
// A remembered token is handed to one attempt only (take removes it), and
// a token is noted only by the one attempt that carried it, after that
// attempt ended without a lease: at any moment a token is carried by at
// most one attempt or lease of this client. The etcd driver deletes such
// locks in the background instead; here a delete by token could run
// before the lost statement itself (which may still be on its way to the
// server, on another connection) and miss it, while reusing the token
// wins whichever statement runs first.
type lostGrants struct {
	mu      sync.Mutex
	m       map[string]lostGrant
	sweepAt int // drop expired tokens when the map reaches this size
}

// lostGrant is a token whose grant may be on the server, and when
// remembering it stops being useful (other clients take the row over by
// then).
type lostGrant struct {
	token string
	until time.Time
}

// lostGrantsSweep is the smallest map size at which expired tokens are
// dropped; after a sweep, the next comes at twice the size left, so a
// batch of n lost keys costs O(n) in sweeps.
const lostGrantsSweep = 1024

// note remembers token as key's lost grant until until (replacing an
// older one of the key, whose grant, if any, others take over by its
// TTL).
func (g *lostGrants) note(key, token string, until time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.m == nil {
		g.m = map[string]lostGrant{}
	}
	if len(g.m) >= max(g.sweepAt, lostGrantsSweep) {
		now := time.Now()
		for k, v := range g.m {
			if now.After(v.until) {
				delete(g.m, k)
			}
		}
		g.sweepAt = 2 * len(g.m)
	}
	g.m[key] = lostGrant{token: token, until: until}
}

// take returns key's lost grant's token, if one is remembered and still
// useful, and forgets it.
func (g *lostGrants) take(key string) (string, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	v, ok := g.m[key]
	if !ok {
		return "", false
	}
	delete(g.m, key)
	return v.token, time.Now().Before(v.until)
}

// reuseLost returns tokens with the token of each key's lost grant in
// place of the fresh one (a copy when any is replaced).
func (c *Core) reuseLost(reqs []lease.Request, tokens []string, idx []int) []string {
	out, copied := tokens, false
	for _, i := range idx {
		if tok, ok := c.lost.take(reqs[i].Key); ok {
			if !copied {
				out, copied = append([]string(nil), tokens...), true
			}
			out[i] = tok
		}
	}
	return out
}
