package redlock

import (
	_ "embed"
	"fmt"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
)

// A batch (and a single Acquire, a batch of one) sends its leases to a
// plain or Sentinel node in chunks of batchChunk leases, one script call
// per chunk (acquirebatch.lua), and releases its lost attempts the same
// way (releasebatch.lua). One call for many leases saves the node the
// per-call cost of a script (command dispatch, the KEYS and ARGV tables),
// and the client a reply of several elements per lease: each lease's
// answer is one short string. The fencing round of a batch (only for keys
// whose nodes' counters disagreed) is chunked the same way
// (fencebatch.lua). A Redis Cluster gets the same scripts with one lease
// per call, as a script must not touch keys of several hash slots.

var (
	//go:embed acquirebatch.lua
	acquireBatchSrc string
	//go:embed releasebatch.lua
	releaseBatchSrc string
	//go:embed fencebatch.lua
	fenceBatchSrc string

	acquireBatchScript = redis.NewScript(acquireBatchSrc)
	releaseBatchScript = redis.NewScript(releaseBatchSrc)
	fenceBatchScript   = redis.NewScript(fenceBatchSrc)
)

// batchChunk is the number of leases per script call: small enough that
// one call keeps a node busy for well under a millisecond, so that other
// clients' requests are not held up behind a batch of thousands.
const batchChunk = 128

// acquireCalls are the calls of one attempt: chunked for plain and
// Sentinel nodes, one per lease (perKey) for Cluster nodes.
type acquireCalls struct {
	chunked, perKey []call
}

// for returns the calls for node n.
func (ac *acquireCalls) forNode(n *node) []call {
	if n.perShard {
		return ac.perKey
	}
	return ac.chunked
}

// chunkOf returns the call of node n's round that carries lease k of an
// attempt, and the lease's place in that call's reply.
func chunkOf(n *node, k int) (ci, i int) {
	if n.perShard {
		return k, 0
	}
	return k / batchChunk, k % batchChunk
}

// buildAcquireCalls makes the calls for tallies (whose keys are
// consecutive in keyArr, one per lease). floor and fenceExp are
// acquirebatch.lua's ARGV[1] and ARGV[2].
func (c *Client) buildAcquireCalls(tallies []tally, keyArr []string, ttls, epochs []any, floor, fenceExp any) *acquireCalls {
	ac := &acquireCalls{}
	n := len(tallies)
	perShard, plain := false, false
	for _, nd := range c.nodes {
		perShard = perShard || nd.perShard
		plain = plain || !nd.perShard
	}
	build := func(size int) []call {
		chunks := (n + size - 1) / size
		argArr := make([]any, 2*chunks+3*n)
		out := make([]call, 0, chunks)
		for lo := 0; lo < n; lo += size {
			hi := min(lo+size, n)
			args := argArr[: 2+3*(hi-lo) : 2+3*(hi-lo)]
			argArr = argArr[len(args):]
			args[0], args[1] = floor, fenceExp
			for k := lo; k < hi; k++ {
				j := 2 + 3*(k-lo)
				args[j], args[j+1], args[j+2] = tallies[k].value, ttls[k], epochs[k]
			}
			out = append(out, call{script: acquireBatchScript, keys: keyArr[lo:hi:hi], args: args})
		}
		return out
	}
	if plain {
		ac.chunked = build(batchChunk)
	}
	if perShard {
		ac.perKey = build(1)
	}
	return ac
}

// keyAns is one node's answer for one lease (acquirebatch.lua's reply).
type keyAns struct {
	status            int64 // 1 granted, 0 held by another, 2 epoch completed
	done, fence, pttl int64
	holder            string
}

// keyAnswer returns node a.node's answer for lease k of the attempt.
func (c *Client) keyAnswer(a answer, k int) (keyAns, error) {
	ci, i := chunkOf(c.nodes[a.node], k)
	if err := a.callErr(ci); err != nil {
		return keyAns{}, err
	}
	vals, _ := a.cmds[ci].Val().([]any)
	if i >= len(vals) {
		return keyAns{}, fmt.Errorf("unexpected reply %v", a.cmds[ci].Val())
	}
	s, _ := vals[i].(string)
	ka, ok := parseKeyAns(s)
	if !ok {
		return keyAns{}, fmt.Errorf("unexpected reply %q", s)
	}
	return ka, nil
}

// parseKeyAns reads one lease's answer of acquirebatch.lua.
func parseKeyAns(s string) (keyAns, bool) {
	st, rest, ok1 := strings.Cut(s, " ")
	done, rest, ok2 := strings.Cut(rest, " ")
	var ka keyAns
	var err1, err2, err3, err4 error
	ka.status, err1 = strconv.ParseInt(st, 10, 64)
	ka.done, err2 = strconv.ParseInt(done, 10, 64)
	if !ok1 || !ok2 || err1 != nil || err2 != nil {
		return ka, false
	}
	if ka.status == 1 {
		ka.fence, err3 = strconv.ParseInt(rest, 10, 64)
		return ka, err3 == nil
	}
	fence, rest, ok3 := strings.Cut(rest, " ")
	pttl, holder, ok4 := strings.Cut(rest, " ")
	ka.fence, err3 = strconv.ParseInt(fence, 10, 64)
	ka.pttl, err4 = strconv.ParseInt(pttl, 10, 64)
	ka.holder = holder
	return ka, ok3 && ok4 && err3 == nil && err4 == nil
}

// releaseCalls are the cleanup releases of lost attempts on one node: one
// releasebatch.lua call per chunk, or one release.lua call per lease on a
// Cluster.
func releaseCalls(nd *node, losers []*tally) []call {
	if nd.perShard {
		out := make([]call, len(losers))
		for k, t := range losers {
			out[k] = call{script: releaseScript, keys: t.keys, args: []any{t.value}}
		}
		return out
	}
	out := make([]call, 0, (len(losers)+batchChunk-1)/batchChunk)
	for lo := 0; lo < len(losers); lo += batchChunk {
		hi := min(lo+batchChunk, len(losers))
		keys := make([]string, hi-lo)
		args := make([]any, hi-lo)
		for k, t := range losers[lo:hi] {
			keys[k], args[k] = t.keys[0], t.value
		}
		out = append(out, call{script: releaseBatchScript, keys: keys, args: args})
	}
	return out
}

// fenceCalls are the calls of a fencing round for winners, whose tokens
// are set: chunked for plain and Sentinel nodes, one lease per call for
// Cluster nodes.
func (c *Client) fenceCalls(winners []*tally) *acquireCalls {
	ac := &acquireCalls{}
	perShard, plain := false, false
	for _, nd := range c.nodes {
		perShard = perShard || nd.perShard
		plain = plain || !nd.perShard
	}
	build := func(size int) []call {
		var out []call
		for lo := 0; lo < len(winners); lo += size {
			hi := min(lo+size, len(winners))
			keys := make([]string, 0, hi-lo)
			args := make([]any, 1, 1+2*(hi-lo))
			args[0] = winners[lo].fenceExp
			for k := lo; k < hi; k++ {
				keys = append(keys, winners[k].keys[0])
				args = append(args, winners[k].value, strconv.FormatInt(winners[k].fence, 10))
			}
			out = append(out, call{script: fenceBatchScript, keys: keys, args: args})
		}
		return out
	}
	if plain {
		ac.chunked = build(batchChunk)
	}
	if perShard {
		ac.perKey = build(1)
	}
	return ac
}

// fenceAnswer returns node a.node's answer for winner k of a fencing
// round: whether it stored the token.
func (c *Client) fenceAnswer(a answer, k int) (bool, error) {
	ci, i := chunkOf(c.nodes[a.node], k)
	if err := a.callErr(ci); err != nil {
		return false, err
	}
	vals, _ := a.cmds[ci].Val().([]any)
	if i >= len(vals) {
		return false, fmt.Errorf("unexpected reply %v", a.cmds[ci].Val())
	}
	return isOne(vals[i]), nil
}
