package main

import (
	"encoding/json"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leasecron/leasecron/internal/testkit/redistest"
	"github.com/leasecron/leasecron/lease"
	"github.com/leasecron/leasecron/scheduler"
)

// heapPeak samples the heap in use every 50ms while run runs and returns
// its growth over the heap in use before (after a GC), at its peak.
func heapPeak(run func()) uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	base := ms.HeapInuse
	var peak uint64
	var mu sync.Mutex
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(50 * time.Millisecond)
		defer t.Stop()
		for {
			var s runtime.MemStats
			runtime.ReadMemStats(&s)
			mu.Lock()
			peak = max(peak, s.HeapInuse)
			mu.Unlock()
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	}()
	run()
	close(done)
	wg.Wait()
	if peak < base {
		return 0
	}
	return peak - base
}

// TestOutputGigabyteCostsTheLimit: a job that prints 1 GiB (lines of 1 KB
// on stdout) costs its run's record the output_limit (64KiB) and no more,
// the record says how much was printed and cut, and the heap of the
// process running it (trigger, in this test's process) grows by far less
// than what went through it. The same measurement with the bound lifted
// is TestOutputTailMemoryBound's negative control (scheduler). The job
// takes 14 s on a quiet 2-core machine (a million lines through the race
// detector) and more than 50 s at load 30: its timeout is far beyond
// either (and so is the command's), as the test is of memory, not speed.
func TestOutputGigabyteCostsTheLimit(t *testing.T) {
	cl := redistest.Start(t, 1)
	path := writeConfig(t, fleetConfig(cl.URLs(), `  - name: flood
    schedule: "@yearly"
    timeout: 5m
    shell: 'yes "$(printf "%01000d" 7)" | head -c 1073741824'
`))
	waitVoting(t, path)
	var code int
	var errOut string
	growth := heapPeak(func() {
		code, _, errOut = cliWithin(t, 6*time.Minute, "trigger", "flood", "-c", path, "--log-level", "warn")
	})
	if code != 0 {
		t.Fatalf("trigger: exit %d:\n%s", code, errOut)
	}
	const bound = 64 << 20
	t.Logf("heap growth while 1 GiB went through: %d MiB", growth>>20)
	if growth > bound {
		t.Errorf("the heap grew by %d MiB while the job printed 1 GiB; want at most %d MiB", growth>>20, bound>>20)
	}
	code, out, errOut := cli(t, "logs", "-c", path, "flood", "--json")
	var recs []scheduler.RunRecord
	if code != 0 || json.Unmarshal([]byte(out), &recs) != nil || len(recs) != 1 || recs[0].Output == nil {
		t.Fatalf("logs --json: exit %d:\n%.2000s\n%s", code, out, errOut)
	}
	o := recs[0].Output
	kept := o.Bytes - o.CutBytes
	if o.Bytes < 1<<30 || kept > 64<<10 || kept < 60<<10 || o.Limit != 64<<10 {
		t.Errorf("output: %d bytes printed, %d kept (limit %d); want 1 GiB printed and at most 64KiB kept", o.Bytes, kept, o.Limit)
	}
	if o.First != o.CutLines+1 || o.CutLines < 1<<20 {
		t.Errorf("cut: first line %d, %d lines cut", o.First, o.CutLines)
	}
	for _, l := range o.Lines[:len(o.Lines)-1] { // the last one, cut by head -c, is shorter
		if l.Stream != "out" || len(l.Text) != 1000 || !strings.HasSuffix(l.Text, "7") {
			t.Fatalf("a kept line is not a whole line of the job's: %q (%d bytes)", l.Text[:min(40, len(l.Text))], len(l.Text))
		}
	}
	if len(out) > lease.MaxRecordSize {
		t.Errorf("the record is %d bytes, beyond lease.MaxRecordSize", len(out))
	}
}
