package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/leasecron/leasecron/bench/internal/stats"
)

// Counters reported by lock cases.
const (
	cntWins      = "wins"
	cntRefused   = "refused"
	cntLeft      = "lock keys left"
	cntFences    = "fence counters"
	cntOps       = "ops" // all operations including warm-up (for the leftover table)
	cntCPUClient = "client CPU ns/op"
	cntCPURedis  = "redis CPU ns/op"
)

// runLock runs one Acquire+Release, Extend or contention case with a fresh
// client (or 16 fresh clients for contention), then counts the lock keys
// the library left on the nodes.
func (b *bench) runLock(ctx context.Context, c kase, addrs []string, prefix string) (stats.Run, error) {
	nl := 1
	if c.kind == kindContend {
		nl = contenders
	}
	lks := make([]locker, nl)
	for i := range lks {
		lk, err := newLocker(c.lib, addrs, b.cfg.ttl)
		if err != nil {
			for _, prev := range lks[:i] {
				_ = prev.close()
			}
			return stats.Run{}, err
		}
		lks[i] = lk
	}
	closeAll := func() error {
		var errs []error
		for _, lk := range lks {
			errs = append(errs, lk.close())
		}
		return errors.Join(errs...)
	}
	key := func(w int) string {
		if c.kind == kindContend {
			return prefix + "-one"
		}
		return fmt.Sprintf("%s-w%d", prefix, w)
	}

	record := profiled(c) && !strings.HasPrefix(prefix, "prof-") // not in the CPU profiling runs
	if record {
		if err := b.resetCommandStats(ctx, c.k); err != nil {
			_ = closeAll()
			return stats.Run{}, err
		}
	}
	cpu0 := cpuSelf()
	rcpu0, err := b.redisCPUAll(ctx, c.k)
	if err != nil {
		_ = closeAll()
		return stats.Run{}, err
	}
	win := b.newWindow()
	var ws []*worker
	switch c.kind {
	case kindAR:
		ws = parallel(c.conc, func(i int, w *worker) { arLoop(ctx, lks[0], key(i), win, w) })
	case kindExtend:
		ws = parallel(c.conc, func(i int, w *worker) { extendLoop(ctx, lks[0], key(i), win, w) })
	case kindContend:
		ws = parallel(c.conc, func(i int, w *worker) { contendLoop(ctx, lks[i], key(i), win, w) })
	}
	cpu1 := cpuSelf()
	rcpu1, err := b.redisCPUAll(ctx, c.k)
	if err != nil {
		_ = closeAll()
		return stats.Run{}, err
	}
	run := merge(win, ws)
	// CPU per operation over warm-up and measurement (ns, as counters).
	if n := run.Counts[cntOps]; n > 0 {
		run.Counts[cntCPUClient] = int((cpu1 - cpu0) / time.Duration(n))
		run.Counts[cntCPURedis] = int((rcpu1 - rcpu0) / time.Duration(n))
		if record {
			p, err := b.readCommandStats(ctx, c.k, n)
			if err != nil {
				_ = closeAll()
				return run, err
			}
			p.redis = (rcpu1 - rcpu0) / time.Duration(n)
			b.cmdStats[c.id()] = append(b.cmdStats[c.id()], p)
		}
	}
	if run.Ops == 0 && run.Errors > 0 {
		_ = closeAll()
		return run, fmt.Errorf("every operation failed: %w", firstErr(ws))
	}
	if c.kind == kindContend {
		// Latency of an attempt; the rate column reports wins.
		run.Ops = run.Counts[cntWins]
	}

	// Keys left behind: everything was released; wait for stragglers
	// (the slowed node) and count what is still there, on every node.
	settle := 100*time.Millisecond + 4*c.delay
	time.Sleep(settle)
	lock, fence := 0, 0
	for _, cl := range b.admin[:c.k] {
		n, err := scanCount(ctx, cl, "*"+prefix+"-*", func(k string) bool { return !strings.HasSuffix(k, ":fence") })
		if err != nil {
			_ = closeAll()
			return run, err
		}
		lock += n
		f, err := scanCount(ctx, cl, "*"+prefix+"-*:fence", nil)
		if err != nil {
			_ = closeAll()
			return run, err
		}
		fence += f
	}
	run.Counts[cntLeft] = lock
	run.Counts[cntFences] = fence
	if err := closeAll(); err != nil {
		return run, fmt.Errorf("close: %w", err)
	}
	return run, nil
}

func arLoop(ctx context.Context, lk locker, key string, win window, w *worker) {
	for {
		t0 := time.Now()
		if !t0.Before(win.end) || ctx.Err() != nil {
			return
		}
		octx, cancel := context.WithTimeout(ctx, opTimeout)
		h, err := lk.lock(octx, key)
		if err == nil {
			err = h.unlock(octx)
		}
		lat := time.Since(t0)
		cancel()
		w.counts[cntOps]++
		if err != nil {
			if !t0.Before(win.start) {
				w.fail(err)
			}
			time.Sleep(time.Millisecond) // no hot loop on a broken setup
			continue
		}
		if !t0.Before(win.start) {
			w.lat = append(w.lat, lat)
		}
	}
}

func extendLoop(ctx context.Context, lk locker, key string, win window, w *worker) {
	var h held
	for h == nil {
		if !time.Now().Before(win.end) || ctx.Err() != nil {
			return
		}
		octx, cancel := context.WithTimeout(ctx, opTimeout)
		var err error
		h, err = lk.lock(octx, key)
		cancel()
		if err != nil {
			w.fail(err)
			time.Sleep(10 * time.Millisecond)
		}
	}
	w.errs, w.first = 0, nil // failures before the window are not counted
	for {
		t0 := time.Now()
		if !t0.Before(win.end) || ctx.Err() != nil {
			break
		}
		octx, cancel := context.WithTimeout(ctx, opTimeout)
		err := h.extend(octx)
		lat := time.Since(t0)
		cancel()
		w.counts[cntOps]++
		if t0.Before(win.start) {
			continue
		}
		if err != nil {
			w.fail(err)
			continue
		}
		w.lat = append(w.lat, lat)
	}
	octx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	if err := h.unlock(octx); err != nil {
		w.fail(err)
	}
}

// contendLoop tries to take the shared key once per iteration; a winner
// releases at once. The latency recorded is that of the attempt.
func contendLoop(ctx context.Context, lk locker, key string, win window, w *worker) {
	for {
		t0 := time.Now()
		if !t0.Before(win.end) || ctx.Err() != nil {
			return
		}
		octx, cancel := context.WithTimeout(ctx, opTimeout)
		h, err := lk.lock(octx, key)
		lat := time.Since(t0)
		measured := !t0.Before(win.start)
		w.counts[cntOps]++
		switch {
		case err == nil:
			uerr := h.unlock(octx)
			if measured {
				w.counts[cntWins]++
				if uerr != nil {
					w.fail(uerr)
				}
			}
		case lk.refused(err):
			if measured {
				w.counts[cntRefused]++
			}
		default:
			if measured {
				w.fail(err)
			}
		}
		cancel()
		if measured {
			w.lat = append(w.lat, lat)
		}
	}
}
