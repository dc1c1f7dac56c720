package redlock

import (
	"context"
	"strconv"

	"github.com/redis/go-redis/v9"
)

// Lane generations. A round that fails on its connection (a read timeout,
// a reset) leaves that connection to go-redis, which closes it; the next
// round goes on a new one. Closing a connection does not stop a request
// that is still in the network (TCP retransmission in a network blip):
// it can reach the server after the next round, and an acquire could
// then land after the release that cleaned up after it (a lock left for
// its whole TTL), or a late extend re-create a released lock.
//
// So every script call a lane sends to a plain or Sentinel node carries
// the lane's generation, and the script first compares it with the
// lane's generation key on the node (leasecron:lease:gen:<the lane's
// nonce>): a call whose generation is below the key's is refused (an
// error reply, STALE) before it does anything. After a round failed on
// its connection the lane raises its generation, and its next round
// raises the key (genRaise, to the maximum of the key and the new value)
// in front of its calls. A request of the failed round is therefore
// applied before the next round's calls, or refused: never after. The
// key expires genKeyTTL after the last raise; a lane that never failed
// has none. This needs no server rights beyond scripts (unlike CLIENT
// KILL). A Redis Cluster node has no generation key (a key of fixed name
// lives on one shard): there a request of a failed round may still land
// after the next round.

// genKeyPrefix prefixes a lane's generation key.
const genKeyPrefix = "leasecron:lease:gen:"

// genKeyTTL is how long a generation key lives after its last raise,
// far beyond any time a request can spend in the network.
const genKeyTTL = 24 * 60 * 60 * 1000 // ms

// genHead begins a script's generation-checking variant: the last KEYS
// entry is the lane's generation key and the last ARGV entry the call's
// generation; the body sees KEYS and ARGV without them.
const genHead = `local gkey = table.remove(KEYS)
local ggen = tonumber(table.remove(ARGV))
local gcur = redis.call('GET', gkey)
if gcur and tonumber(gcur) > ggen then
  return redis.error_reply('STALE request of an earlier lane generation')
end
`

// genRaiseSrc raises a generation key to ARGV[1] unless it is higher
// already, and sets its expiry (ARGV[2] ms). It is sent with EVAL (its
// source), so a node whose script cache was emptied runs it too.
const genRaiseSrc = `local cur = tonumber(redis.call('GET', KEYS[1]) or '0')
if cur < tonumber(ARGV[1]) then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
end
return 1`

// laneScripts are the scripts lanes send as calls: each has a
// generation-checking variant.
func laneScripts() []struct {
	script *redis.Script
	src    string
} {
	return append(roundScripts[:len(roundScripts):len(roundScripts)], []struct {
		script *redis.Script
		src    string
	}{{entriesScript, entriesSrc}, {logScript, logSrc}}...)
}

// genWrapped maps each lane script to its generation-checking variant.
var genWrapped = func() map[*redis.Script]*redis.Script {
	m := map[*redis.Script]*redis.Script{}
	for _, s := range laneScripts() {
		m[s.script] = redis.NewScript(genHead + s.src)
	}
	return m
}()

// genSources are the sources of the generation-checking variants.
func genSources() []string {
	var out []string
	for _, s := range laneScripts() {
		out = append(out, genHead+s.src)
	}
	return out
}

// genKey is the node's lane's generation key.
func (n *node) genKey() string { return genKeyPrefix + n.nonce }

// roundCall returns c as a round sends it: in its generation-checking
// variant on a plain or Sentinel node, and, for the round's last call
// (last), also checking the data marker (birth.go). A script with no
// variant is sent as it is.
func (n *node) roundCall(c call, last, clock bool) call {
	if n.perShard {
		return c
	}
	if last && birthWrapped[c.script] != nil {
		return n.withBirth(c, clock)
	}
	g := genWrapped[c.script]
	if g == nil {
		return c
	}
	keys := make([]string, len(c.keys)+1)
	copy(keys, c.keys)
	keys[len(c.keys)] = n.genKey()
	args := make([]any, len(c.args)+1)
	copy(args, c.args)
	args[len(c.args)] = strconv.FormatInt(n.gen, 10)
	return call{script: g, keys: keys, args: args}
}

// queueRaise queues the raise of the generation key in front of a round's
// calls when one is pending (after a round that failed on its
// connection) and returns its command, or nil.
func (n *node) queueRaise(ctx context.Context, pipe redis.Pipeliner) *redis.Cmd {
	if n.perShard || !n.genRaise {
		return nil
	}
	return pipe.Eval(ctx, genRaiseSrc, []string{n.genKey()}, n.gen, genKeyTTL)
}

// raised notes the answer to a raise: done when it ran, pending again
// otherwise (the next round sends it again).
func (n *node) raised(cmd *redis.Cmd) {
	if cmd != nil && cmd.Err() == nil {
		n.genRaise = false
	}
}

// connFailed starts a new generation after a round that failed on its
// connection: the next round raises the key before its calls.
func (n *node) connFailed() {
	if n.perShard || n.noGenRaise.Load() {
		return
	}
	n.gen++
	n.genRaise = true
}
