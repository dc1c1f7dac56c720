package redistest

import (
	"context"
	"fmt"
	"net/url"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

const (
	// clusterMasters is the number of masters StartRedisCluster creates.
	clusterMasters = 3
	// clusterTimeout bounds redis-cli --cluster create and the wait for
	// cluster_state:ok.
	clusterTimeout = 30 * time.Second
)

// RedisCluster is a real Redis Cluster of three masters (no replicas), each
// a Node on loopback with cluster-enabled yes, its own free cluster bus port
// and its own directory. The hash slots are split evenly by redis-cli.
type RedisCluster struct {
	// Nodes are the masters, in the order given to redis-cli.
	Nodes []*Node

	t      testing.TB
	mu     sync.Mutex
	client *redis.ClusterClient
}

// StartRedisCluster starts three cluster-enabled redis-server processes,
// joins them with `redis-cli --cluster create ... --cluster-replicas 0
// --cluster-yes` and waits until every node reports cluster_state:ok and
// knows the other two. It takes a few seconds (redis-cli waits for the
// cluster bus). Cleanup and failures are as for Start; redis-cli must be on
// PATH too.
func StartRedisCluster(t testing.TB) *RedisCluster {
	t.Helper()
	bin := lookPath(t, "redis-server")
	cli := lookPath(t, "redis-cli")
	nodes := make([]*Node, clusterMasters)
	for i := range nodes {
		nodes[i] = newNode(t, bin, config{}, true)
	}
	if err := startAll(nodes); err != nil {
		t.Fatalf("%v", err)
	}
	rc := &RedisCluster{Nodes: nodes, t: t}
	t.Cleanup(rc.closeClient)

	ctx, cancel := context.WithTimeout(context.Background(), clusterTimeout)
	defer cancel()
	args := append([]string{"--cluster", "create"}, rc.Addrs()...)
	args = append(args, "--cluster-replicas", "0", "--cluster-yes")
	cmd := exec.CommandContext(ctx, cli, args...)
	cmd.Env = append(cmd.Environ(), "NO_COLOR=1")
	cmd.WaitDelay = time.Second
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("redistest: %s %s: %v\n%s%s", cli, strings.Join(args, " "), err, out, rc.logTails())
	}
	if err := poll(clusterTimeout, rc.clusterOK); err != nil {
		t.Fatalf("redistest: Redis Cluster %v not ok: %v\n%s", rc.Addrs(), err, rc.logTails())
	}
	return rc
}

// clusterOK reports whether every node says cluster_state:ok with all
// masters known, and if not, what the first one that does not said.
func (rc *RedisCluster) clusterOK(ctx context.Context) (bool, string) {
	want := fmt.Sprintf("cluster_known_nodes:%d", clusterMasters)
	for _, n := range rc.Nodes {
		info, err := n.Client().ClusterInfo(ctx).Result()
		if err != nil {
			return false, fmt.Sprintf("%s: CLUSTER INFO: %v", n.Addr(), err)
		}
		if !strings.Contains(info, "cluster_state:ok") || !strings.Contains(info, want) {
			return false, fmt.Sprintf("%s: %s", n.Addr(), strings.Join(strings.Fields(info), " "))
		}
	}
	return true, ""
}

// Addrs returns the masters' "127.0.0.1:port" addresses: the seed list for
// a cluster client (redis.ClusterOptions.Addrs).
func (rc *RedisCluster) Addrs() []string {
	addrs := make([]string, len(rc.Nodes))
	for i, n := range rc.Nodes {
		addrs[i] = n.Addr()
	}
	return addrs
}

// URL returns the seed list as one URL in the form go-redis's
// redis.ParseClusterURL reads: "redis://127.0.0.1:p1?addr=127.0.0.1:p2&addr=127.0.0.1:p3".
// There is no standard URL for a Redis Cluster; a consumer that marks
// cluster nodes by scheme (such as "redis+cluster://") can swap the scheme
// and keep the rest.
func (rc *RedisCluster) URL() string {
	addrs := rc.Addrs()
	q := make([]string, 0, len(addrs)-1)
	for _, a := range addrs[1:] {
		q = append(q, "addr="+a)
	}
	u := url.URL{Scheme: "redis", Host: addrs[0], RawQuery: strings.Join(q, "&")}
	return u.String()
}

// Client returns a go-redis ClusterClient seeded with Addrs, for setting up
// and checking state in tests. It is the same client on every call and is
// closed at cleanup.
func (rc *RedisCluster) Client() *redis.ClusterClient {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if rc.client == nil {
		rc.client = redis.NewClusterClient(&redis.ClusterOptions{Addrs: rc.Addrs()})
	}
	return rc.client
}

// closeClient closes the ClusterClient, if one was made.
func (rc *RedisCluster) closeClient() {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if rc.client != nil {
		_ = rc.client.Close()
		rc.client = nil
	}
}

// logTails returns the end of every node's log.
func (rc *RedisCluster) logTails() string {
	var b strings.Builder
	for _, n := range rc.Nodes {
		b.WriteString(n.logTail())
	}
	return b.String()
}
