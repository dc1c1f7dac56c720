package etcd_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leasecron/leasecron/internal/testkit/etcdtest"
	"github.com/leasecron/leasecron/lease/etcd"
)

// unorderedDialEnv makes TestProbesWhileEndpointsChange switch the
// ordering of probes and endpoint changes off: its negative control runs
// it so in a child process, whose race detector must object.
const unorderedDialEnv = "LEASECRON_TEST_UNORDERED_DIAL"

// TestProbesWhileEndpointsChange: while a follower is frozen twice and
// resumed, one goroutine probes every member (Health) every 100 ms, so
// each freeze takes the member out of the client's endpoints and each
// resume puts it back (SetEndpoints, also from the reprobe loop), and two
// more probe without noting the result (a Health whose caller gave up, as
// at shutdown: it still dials every member). Under the race detector
// this was the frozen-leader fleet's daemon exit 66: the etcd client's
// Dial reads its endpoints without its lock.
func TestProbesWhileEndpointsChange(t *testing.T) {
	t.Parallel()
	c := etcdtest.Start(t)
	b := openT(t, c.Endpoints(), "/t/"+filepath.Base(t.TempDir())+"/", testTimeout)
	if os.Getenv(unorderedDialEnv) != "" {
		etcd.SetUnsafeUnorderedDial(b)
	}
	frozen := (c.Leader() + 1) % etcdtest.Members
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	var mu sync.Mutex
	seen := map[bool]int{} // the frozen member's last status: up or down
	var wg sync.WaitGroup
	wg.Go(func() {
		for ctx.Err() == nil {
			sts := b.Health(context.Background())
			mu.Lock()
			seen[sts[frozen].Err == nil]++
			mu.Unlock()
			time.Sleep(100 * time.Millisecond) // paced like a daemon's health loop
		}
	})
	gaveUp, cancel := context.WithCancel(context.Background())
	cancel()
	for range 2 {
		wg.Go(func() {
			for ctx.Err() == nil {
				b.Health(gaveUp)
				time.Sleep(10 * time.Millisecond)
			}
		})
	}
	defer wg.Wait()
	defer stop()
	waitSeen := func(up bool) {
		t.Helper()
		mu.Lock()
		clear(seen)
		mu.Unlock()
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			mu.Lock()
			n := seen[up]
			mu.Unlock()
			if n > 0 {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("member %d never probed as up=%v", frozen, up)
			}
		}
	}
	for range 2 {
		c.Pause(frozen)
		waitSeen(false)
		time.Sleep(3 * reprobeEvery) // reprobes of the frozen member
		c.Resume(frozen)
		waitSeen(true)
	}
}

// reprobeEvery is the backend's reprobe period (endpoints.go).
const reprobeEvery = time.Second

// TestNegativeControlUnorderedDialRaces runs TestProbesWhileEndpointsChange
// in a child process of this (race-enabled) test binary with the ordering
// switched off: its race detector must report a data race between the
// client's Dial and SetEndpoints.
func TestNegativeControlUnorderedDialRaces(t *testing.T) {
	t.Parallel()
	if !raceEnabled {
		t.Skip("needs the race detector (go test -race)")
	}
	cmd := exec.Command(os.Args[0], "-test.run", "^TestProbesWhileEndpointsChange$", "-test.count", "1")
	cmd.Env = append(os.Environ(), unorderedDialEnv+"=1", "GORACE=atexit_sleep_ms=0")
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "WARNING: DATA RACE") ||
		!strings.Contains(string(out), "maintenance).Status") {
		t.Fatalf("without the ordering, the race detector must report Dial against SetEndpoints; err %v, output:\n%s", err, out)
	}
	t.Logf("the child reported the race, as it must (%v)", err)
}
