package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/leasecron/leasecron/backend"
)

// loadAvg returns the 1, 5 and 15 minute load averages, "?" if unknown.
func loadAvg() string {
	data, err := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(data)); err == nil && len(f) >= 3 {
		return strings.Join(f[:3], " / ")
	}
	return "?"
}

// statusKB reads a "Name: N kB" line of /proc/self/status, in bytes; -1 if
// unknown.
func statusKB(name string) int64 {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return -1
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, name+":"); ok {
			n, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				return -1
			}
			return n << 10
		}
	}
	return -1
}

// currentRSS is this process's resident set size in bytes.
func currentRSS() int64 { return statusKB("VmRSS") }

// floorResult is one client alone acquiring every job's key in one batch:
// the least the backend needs to decide a tick of that many jobs.
type floorResult struct {
	store    string
	keys     int
	took     time.Duration
	won      int
	requests int64
	work     int64 // Redis: every command executed, those of scripts included
	err      string
}

// floor opens one client on st and acquires n keys for one tick in one
// TryAcquireBatch, with nothing else running.
func (b *bench) floor(ctx context.Context, st store, space string, n int) (res floorResult) {
	res = floorResult{store: st.name(), keys: n}
	be, err := st.open(ctx, space, 0)
	if err != nil {
		res.err = err.Error()
		return res
	}
	defer be.Close()
	wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	_ = be.Warm(wctx)
	cancel()
	// The tick is now: the servers' data is older than the restart guard.
	tick := time.Now().Truncate(time.Millisecond)
	reqs := make([]backend.Request, n)
	for i := range reqs {
		reqs[i] = backend.Request{Key: fmt.Sprintf("j%05d", i), TTL: b.set.ttl, Epoch: tick.Unix(), EpochTime: tick,
			Owner: fmt.Sprintf("tick=%d host=floor", tick.Unix())}
	}
	w0 := mustWork(ctx, st)
	c0, _ := mustCount(ctx, st)
	start := time.Now()
	results := be.TryAcquireBatch(ctx, reqs)
	res.took = time.Since(start)
	for _, r := range results {
		if r.Err == nil {
			res.won++
		} else if res.err == "" {
			res.err = "first refusal: " + r.Err.Error()
		}
	}
	if !sleep(ctx, st.settle()) {
		res.err = ctx.Err().Error()
		return res
	}
	c1, _ := mustCount(ctx, st)
	res.work = -1
	if w1 := mustWork(ctx, st); w0 >= 0 && w1 >= 0 {
		res.work = w1 - w0
	}
	if c0 < 0 || c1 < 0 {
		res.err = "could not read the request counter"
	}
	res.requests = c1 - c0
	fmt.Fprintf(b.log, "%s floor: %d keys in one batch: %s, %d won, %d requests\n", st.name(), n, res.took.Round(time.Millisecond), res.won, res.requests)
	return res
}
