package redlock

import (
	"context"
	"strings"

	"github.com/redis/go-redis/v9"
)

// isNoScript reports whether err is Redis's NOSCRIPT reply: the server's
// script cache does not have the script (SCRIPT FLUSH, or a server that
// lost its cache without the client opening a new connection).
func isNoScript(err error) bool {
	return err != nil && redis.HasErrorPrefix(err, "NOSCRIPT")
}

// anyNoScript reports whether some command of a round failed with NOSCRIPT.
func anyNoScript(cmds [][]*redis.Cmd) bool {
	for _, cs := range cmds {
		for _, c := range cs {
			if isNoScript(c.Err()) {
				return true
			}
		}
	}
	return false
}

// hashTag returns the "{...}" prefix of a lease's Redis key: every key of
// one lease shares it, and the lane's order matters only between calls on
// the same lease.
func hashTag(key string) string {
	if strings.HasPrefix(key, "{") {
		if i := strings.IndexByte(key, '}'); i > 0 {
			return key[:i+1]
		}
	}
	return key
}

// reloadAndRetry handles a round some of whose calls failed with NOSCRIPT:
// a call that failed so had no effect. It loads the scripts again and
// resends, in their order, the calls that can go again without breaking
// the lane's order: those on a lease that no later call of the round
// reached (a call that failed otherwise, or succeeded, because another
// connection had loaded the scripts again in between, counts as reached:
// resending an earlier call on its lease would apply it after a later
// one). The others keep their NOSCRIPT error. The new replies replace the
// old ones in cmds; nothing is sent more than once more. The round's data
// marker check rides on the round's last script call (birth.go), which
// no later call can have reached, so it is resent whenever it failed with
// NOSCRIPT; the last call resent checks the marker again, after the
// resent calls, and reloadAndRetry returns it (nil if nothing was resent).
// A round without script calls has its marker call (birth) on its own: it
// only reads or creates the marker, so it is resent whenever it failed
// with NOSCRIPT; reloadAndRetry returns its reply.
func (n *node) reloadAndRetry(ctx context.Context, sc *stickyConn, live []*op, cmds [][]*redis.Cmd, birth *redis.Cmd, clock bool) (*redis.Cmd, *redis.Cmd) {
	var again []pos
	reached := map[string]bool{}
	for i := len(live) - 1; i >= 0; i-- {
		for j := len(live[i].calls) - 1; j >= 0; j-- {
			c := live[i].calls[j]
			if isNoScript(cmds[i][j].Err()) && !anyReached(reached, c.keys) {
				again = append(again, pos{i, j})
				continue
			}
			if len(c.keys) == 0 {
				reached[""] = true
			}
			for _, k := range c.keys {
				reached[hashTag(k)] = true
			}
		}
	}
	birthAgain := birth != nil && isNoScript(birth.Err())
	if len(again) == 0 && !birthAgain {
		return birth, nil
	}
	var pipe redis.Pipeliner
	if cc, ok := n.rdb.(*redis.ClusterClient); ok {
		// A Cluster's ScriptLoad loads on every shard (in a pipeline it
		// would go to one).
		for _, src := range allScriptSources {
			if err := cc.ScriptLoad(ctx, src).Err(); err != nil {
				return birth, nil
			}
		}
		pipe = n.pipeline(sc)
	} else {
		pipe = n.pipeline(sc)
		for _, src := range allScriptSources {
			pipe.ScriptLoad(ctx, src)
		}
	}
	resent := make([]*redis.Cmd, len(again))
	var checked *redis.Cmd
	wrap := len(again) > 0 && !n.perShard && birthWrapped[live[again[0].i].calls[again[0].j].script] != nil
	for k := len(again) - 1; k >= 0; k-- { // again is in reverse order
		p := again[k]
		c := live[p.i].calls[p.j]
		c = n.roundCall(c, k == 0 && wrap, clock)
		resent[k] = pipe.EvalSha(ctx, c.script.Hash(), c.keys, c.args...)
	}
	if wrap {
		checked = resent[0]
	}
	// Resent calls whose last has no marker-checking variant get the
	// check on its own after them.
	birthAgain = birthAgain || len(again) > 0 && !n.perShard && !wrap
	if birthAgain {
		bc := n.birthCall()
		birth = pipe.EvalSha(ctx, bc.script.Hash(), bc.keys, bc.args...)
	}
	_, _ = sc.run(ctx, pipe) // each command carries its own error
	for k, p := range again {
		cmds[p.i][p.j] = resent[k]
	}
	return birth, checked
}

// anyReached reports whether a later call of the round reached a lease of
// keys (a call of a batch touches many leases).
func anyReached(reached map[string]bool, keys []string) bool {
	if len(keys) == 0 {
		return reached[""]
	}
	for _, k := range keys {
		if reached[hashTag(k)] {
			return true
		}
	}
	return false
}

// pos is the place of one call in a round: op i, call j.
type pos struct{ i, j int }
