package redistest

import (
	"context"
	"strings"
	"time"
)

// ReplicaOf makes the node a replica of master (REPLICAOF host port, sent
// directly, not through the proxy) and waits until it finished the initial
// synchronisation: its dataset is then master's. The node keeps its
// process and run_id. A failure fails the test.
func (n *Node) ReplicaOf(master *Node) {
	n.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	c := n.Client()
	host, port := "127.0.0.1", strings.TrimPrefix(master.Addr(), "127.0.0.1:")
	if err := c.Do(ctx, "REPLICAOF", host, port).Err(); err != nil {
		n.t.Fatalf("redistest: REPLICAOF on %s: %v", n.Addr(), err)
	}
	for {
		info, err := c.Info(ctx, "replication").Result()
		if err == nil && strings.Contains(info, "master_link_status:up") && strings.Contains(info, "master_sync_in_progress:0") {
			return
		}
		if ctx.Err() != nil {
			n.t.Fatalf("redistest: %s not in sync with %s after %s: %v\n%s", n.Addr(), master.Addr(), startTimeout, err, info)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Promote turns a replica back into a master (REPLICAOF NO ONE), as a
// Sentinel or an operator does on failover. It keeps the dataset it
// replicated and its run_id; Redis gives it a new master_replid.
func (n *Node) Promote() {
	n.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := n.Client().Do(ctx, "REPLICAOF", "NO", "ONE").Err(); err != nil {
		n.t.Fatalf("redistest: REPLICAOF NO ONE on %s: %v", n.Addr(), err)
	}
}

// FlushAll deletes every key of the node (FLUSHALL) without restarting
// it: the run_id and uptime stay the same.
func (n *Node) FlushAll() {
	n.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := n.Client().FlushAll(ctx).Err(); err != nil {
		n.t.Fatalf("redistest: FLUSHALL on %s: %v", n.Addr(), err)
	}
}
