package redlock

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// ErrUnsafeNode is wrapped by the refusal of a node that could lose lease
// keys without restarting (it evicts keys under memory pressure), or whose
// restarts the client cannot see (its INFO has no run_id).
var ErrUnsafeNode = errors.New("redlock: node can lose lease keys unnoticed")

// ErrDuplicateNode is wrapped by the refusal of a node that is the same
// server (same run_id) as another node of the client, listed under another
// address: one server must not get two votes.
var ErrDuplicateNode = errors.New("redlock: same server listed twice")

// checkServer refuses a server, from its INFO (sections server and
// memory), that can drop lease keys on its own or whose restarts cannot be
// detected:
//
//   - maxmemory > 0 with a policy other than noeviction: the volatile-*
//     policies evict keys with a TTL (every lock key, fencing counters),
//     the allkeys-* ones any key (completion marks too); with noeviction a
//     full server refuses writes instead, and rounds fail safely.
//   - no run_id (a proxy, some Redis-compatible servers): a restart
//     that lost the data looks like the same server.
func checkServer(fields map[string]string) error {
	if fields["run_id"] == "" {
		return fmt.Errorf("INFO has no run_id (a proxy or a Redis-compatible server?): restarts that lose data cannot be detected; list the Redis servers themselves: %w", ErrUnsafeNode)
	}
	mm, ok := fields["maxmemory"]
	if !ok {
		return nil
	}
	limit, err := strconv.ParseInt(mm, 10, 64)
	if err != nil {
		return fmt.Errorf("INFO memory has maxmemory %q, not a number: %w", mm, ErrUnsafeNode)
	}
	policy := fields["maxmemory_policy"]
	if limit > 0 && policy != "noeviction" {
		if policy == "" {
			policy = "(not reported)"
		}
		return fmt.Errorf("maxmemory is %d bytes with maxmemory-policy %s, which can evict lease keys: "+
			"set maxmemory-policy noeviction (or maxmemory 0): %w", limit, policy, ErrUnsafeNode)
	}
	return nil
}

// servers maps the run_id of every server a client's nodes connected to
// to the node that reached it first, so that one server listed twice
// (localhost:6379 and 127.0.0.1:6379, or a Sentinel's master also listed
// as a plain node) gets one vote, not two.
type servers struct {
	mu    sync.Mutex
	owner map[string]*node
}

func newServers() *servers { return &servers{owner: map[string]*node{}} }

// claim records that n reached the server runID (replacing prev, the
// run_id n saw before at the same place, if any). It fails when another
// node already reached that server.
func (s *servers) claim(n *node, runID, prev string) error {
	if s == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if o := s.owner[runID]; o != nil && o != n {
		return fmt.Errorf("it is the same server (run_id %s) as node %s: %w", runID, o.name, ErrDuplicateNode)
	}
	if prev != "" && prev != runID && s.owner[prev] == n {
		delete(s.owner, prev)
	}
	s.owner[runID] = n
	return nil
}

// recheckEvery is how often a lane checks its server again (INFO server
// and memory, in front of a round) on connections it keeps using: a
// server reconfigured to evict keys (CONFIG SET maxmemory-policy) keeps
// its client connections, so onConnect would not see it.
const recheckEvery = time.Second

// recheck queues INFO in front of the round's calls when a check is due
// (every recheckEvery, and every round while the server fails it) and
// returns the command, or nil. A Cluster's shards are checked on their
// new connections only.
func (n *node) recheck(ctx context.Context, pipe redis.Pipeliner) *redis.StringCmd {
	if n.perShard {
		return nil
	}
	n.mu.Lock()
	failing := n.liveErr != nil
	n.mu.Unlock()
	if !failing && time.Since(n.checkedAt) < recheckEvery {
		return nil
	}
	return pipe.Info(ctx, "server", "memory")
}

// rechecked applies the result of recheck's INFO and returns the reason
// the server is unsafe (nil if it passed; while it fails, also when no
// check ran or INFO failed).
func (n *node) rechecked(info *redis.StringCmd) error {
	if info == nil || info.Err() != nil || info.Val() == "" {
		// No check ran, or the round failed before INFO was answered (a
		// connection refused at AUTH, say): nothing new is known.
		n.mu.Lock()
		defer n.mu.Unlock()
		return n.liveErr
	}
	n.checkedAt = time.Now()
	err := checkServer(parseInfo(info.Val()))
	n.mu.Lock()
	n.liveErr = err
	n.mu.Unlock()
	return err
}
