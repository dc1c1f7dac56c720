package redistest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

const (
	// SentinelMasterName is the name StartSentinelGroup's Sentinel monitors
	// its master under (the master_name of a Sentinel URL).
	SentinelMasterName = "leasecron"
	// sentinelTimeout bounds the group's start-up and each Failover.
	sentinelTimeout = 30 * time.Second
)

// SentinelGroup is a Sentinel-managed master: two redis-server data nodes,
// one replicating the other, and one Sentinel process that monitors them
// under SentinelMasterName with a quorum of 1. Every process is a Node on
// loopback, cleaned up like the others. Master and Replica name the
// current roles and are swapped by Failover.
type SentinelGroup struct {
	Master   *Node
	Replica  *Node
	Sentinel *Node

	t testing.TB
}

// StartSentinelGroup starts the master, then the replica (--replicaof the
// master), then the Sentinel, and returns once the replica's link to the
// master is up and the Sentinel knows both, so that a Failover can promote
// the replica at once. Failures are as for Start.
func StartSentinelGroup(t testing.TB) *SentinelGroup {
	t.Helper()
	bin := lookPath(t, "redis-server")
	// No 5 s wait before a full sync, on either side of a failover.
	fast := []string{"--repl-diskless-sync-delay", "0"}
	master := newNode(t, bin, config{extra: fast}, false)
	if err := master.firstStart(); err != nil {
		t.Fatalf("%v", err)
	}
	replica := newNode(t, bin, config{extra: append(fast, "--replicaof", "127.0.0.1", strconv.Itoa(master.port))}, false)
	if err := replica.firstStart(); err != nil {
		t.Fatalf("%v", err)
	}
	sentinel := newNode(t, bin, config{}, false)
	sentinel.sentinelConf = filepath.Join(sentinel.dir, "sentinel.conf")
	conf := fmt.Sprintf("sentinel monitor %[1]s 127.0.0.1 %[2]d 1\n"+
		"sentinel down-after-milliseconds %[1]s 1000\n"+
		"sentinel failover-timeout %[1]s 10000\n", SentinelMasterName, master.port)
	if err := os.WriteFile(sentinel.sentinelConf, []byte(conf), 0o644); err != nil {
		t.Fatalf("redistest: writing %s: %v", sentinel.sentinelConf, err)
	}
	if err := sentinel.firstStart(); err != nil {
		t.Fatalf("%v", err)
	}
	g := &SentinelGroup{Master: master, Replica: replica, Sentinel: sentinel, t: t}
	if err := poll(sentinelTimeout, g.replicaReady); err != nil {
		t.Fatalf("redistest: Sentinel group: replica %s not ready: %v\n%s", replica.Addr(), err, g.logTails())
	}
	return g
}

// replicaReady reports whether the replica is in sync and known to the
// Sentinel, and if not, what was seen.
func (g *SentinelGroup) replicaReady(ctx context.Context) (bool, string) {
	if ok, seen := replicationHas(ctx, g.Replica, "master_link_status:up"); !ok {
		return false, seen
	}
	replicas, err := g.Sentinel.Client().Do(ctx, "SENTINEL", "REPLICAS", SentinelMasterName).Slice()
	if err != nil {
		return false, fmt.Sprintf("SENTINEL REPLICAS on %s: %v", g.Sentinel.Addr(), err)
	}
	want := "127.0.0.1:" + strconv.Itoa(g.Replica.port)
	for _, r := range replicas {
		s := fmt.Sprint(r)
		if strings.Contains(s, want) && !strings.Contains(s, "s_down") && !strings.Contains(s, "disconnected") {
			return true, ""
		}
	}
	return false, fmt.Sprintf("SENTINEL REPLICAS %s: %v", SentinelMasterName, replicas)
}

// MasterAddr asks the Sentinel for the current master's address
// (SENTINEL GET-MASTER-ADDR-BY-NAME). A failure fails the test.
func (g *SentinelGroup) MasterAddr() string {
	g.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	addr, err := g.masterAddr(ctx)
	if err != nil {
		g.t.Fatalf("redistest: %v", err)
	}
	return addr
}

func (g *SentinelGroup) masterAddr(ctx context.Context) (string, error) {
	hp, err := g.Sentinel.Client().Do(ctx, "SENTINEL", "GET-MASTER-ADDR-BY-NAME", SentinelMasterName).StringSlice()
	if err != nil {
		return "", fmt.Errorf("SENTINEL GET-MASTER-ADDR-BY-NAME on %s: %w", g.Sentinel.Addr(), err)
	}
	if len(hp) != 2 {
		return "", fmt.Errorf("SENTINEL GET-MASTER-ADDR-BY-NAME on %s: %q", g.Sentinel.Addr(), hp)
	}
	return hp[0] + ":" + hp[1], nil
}

// Failover makes the Sentinel promote the replica (SENTINEL FAILOVER, a
// planned failover that does not wait for the master to be seen down) and
// returns once the Sentinel names the replica as master and the replica
// says role:master. Master and Replica are swapped. The old master still
// takes writes until the Sentinel makes it a replica of the new one, up to
// about 10 s later (the Sentinel's INFO period); WaitDemoted waits for
// that. A failover that does not finish within 30 s fails the test.
func (g *SentinelGroup) Failover() {
	g.t.Helper()
	want := g.Replica.Addr()
	asked := false
	err := poll(sentinelTimeout, func(ctx context.Context) (bool, string) {
		if !asked {
			// NOGOODSLAVE while the Sentinel has not refreshed the
			// replica's state yet: ask again.
			err := g.Sentinel.Client().Do(ctx, "SENTINEL", "FAILOVER", SentinelMasterName).Err()
			asked = err == nil || strings.Contains(err.Error(), "INPROG")
			if !asked {
				return false, fmt.Sprintf("SENTINEL FAILOVER: %v", err)
			}
		}
		if addr, err := g.masterAddr(ctx); err != nil {
			return false, err.Error()
		} else if addr != want {
			return false, "the Sentinel still names " + addr
		}
		return replicationHas(ctx, g.Replica, "role:master")
	})
	if err != nil {
		g.t.Fatalf("redistest: failover to %s: %v\n%s", want, err, g.logTails())
	}
	g.Master, g.Replica = g.Replica, g.Master
}

// WaitDemoted waits until the Replica (the old master after a Failover)
// reports role:slave, that is, until it no longer takes writes. A wait
// longer than 30 s fails the test.
func (g *SentinelGroup) WaitDemoted() {
	g.t.Helper()
	err := poll(sentinelTimeout, func(ctx context.Context) (bool, string) { return replicationHas(ctx, g.Replica, "role:slave") })
	if err != nil {
		g.t.Fatalf("redistest: %s not made a replica: %v\n%s", g.Replica.Addr(), err, g.logTails())
	}
}

// replicationHas reports whether n's INFO replication contains field (such
// as "role:master"), and if not, what it said.
func replicationHas(ctx context.Context, n *Node, field string) (bool, string) {
	info, err := n.Client().Info(ctx, "replication").Result()
	if err == nil && strings.Contains(info, field) {
		return true, ""
	}
	return false, fmt.Sprintf("INFO replication on %s: %v %s", n.Addr(), err, strings.Join(strings.Fields(info), " "))
}

// logTails returns the end of every process's log.
func (g *SentinelGroup) logTails() string {
	return g.Master.logTail() + g.Replica.logTail() + g.Sentinel.logTail()
}
