package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/leasecron/leasecron/backend"
	"github.com/leasecron/leasecron/bench/internal/stats"
	"github.com/leasecron/leasecron/bench/internal/storeproc"
)

// The other backends (issues 10 and 11): PostgreSQL, etcd and ZooKeeper,
// one server process each, measured with leasecron's backend package next
// to each store's floor (one trivial round trip) and to the lock users
// would otherwise pick.

// Store names.
const (
	storePG   = "PostgreSQL"
	storeEtcd = "etcd"
	storeZK   = "ZooKeeper"
)

// Operations of a store case.
const (
	opFloor  = "floor"  // one trivial round trip
	opWFloor = "wfloor" // one trivial durable write (one row/key/znode)
	opAR     = "ar"     // Acquire + Release
	opExtend = "extend" // Extend of a held lease
	opTick   = "tick"   // one TryAcquireBatch of cfg.batchKeys keys
	opRaw    = "raw"    // the tick's floor: one raw multi-row upsert
)

// Implementations (the lib of a store case).
const (
	implLease = "leasecron backend"
)

// storeCase is one measured setting of a store benchmark.
type storeCase struct {
	store, op, impl string
	conc            int
}

func (c storeCase) id() string {
	return fmt.Sprintf("store/%s/%s/c%d/%s", c.store, c.op, c.conc, c.impl)
}

// prepared is what a case runs: op is called in a loop by worker i;
// done closes what prepare opened.
type prepared struct {
	op   func(ctx context.Context, i int) error
	done func() error
}

// storeKit knows how to measure one store.
type storeKit struct {
	name  string
	proc  *storeproc.Proc
	open  func(ctx context.Context) (backend.Backend, error)
	cases []storeCase
	// prepare builds everything but the leasecron backend's cases.
	prepare func(ctx context.Context, c storeCase, prefix string) (prepared, error)
}

// startStores starts the three servers and builds their kits.
func (b *bench) startStores(ctx context.Context) error {
	starts := []struct {
		name  string
		start func(context.Context) (*storeproc.Proc, error)
		kit   func(*storeproc.Proc) *storeKit
	}{
		{storePG, storeproc.Postgres, b.pgKit},
		{storeEtcd, storeproc.Etcd, b.etcdKit},
		{storeZK, storeproc.ZooKeeper, b.zkKit},
	}
	for _, s := range starts {
		p, err := s.start(ctx)
		if err != nil {
			return fmt.Errorf("%s: %w", s.name, err)
		}
		b.mu.Lock()
		b.storeProcs = append(b.storeProcs, p)
		b.mu.Unlock()
		fmt.Fprintf(b.log, "%s pid %d on %s (%s)\n", s.name, p.PID(), p.Addr, p.Version)
		b.stores = append(b.stores, s.kit(p))
	}
	return nil
}

// commonCases are the leasecron backend's cases and the floor at c=1, 16.
func (b *bench) commonCases(store string, alts ...string) []storeCase {
	var cs []storeCase
	for _, conc := range []int{1, 16} {
		cs = append(cs, storeCase{store, opFloor, "", conc}, storeCase{store, opWFloor, "", conc}, storeCase{store, opAR, implLease, conc})
		for _, a := range alts {
			cs = append(cs, storeCase{store, opAR, a, conc})
		}
		cs = append(cs, storeCase{store, opExtend, implLease, conc})
	}
	return append(cs, storeCase{store, opTick, implLease, 1})
}

// runStores runs every store case cfg.reps times, interleaved.
func (b *bench) runStores(ctx context.Context) error {
	if err := b.startStores(ctx); err != nil {
		return err
	}
	type item struct {
		kit *storeKit
		c   storeCase
	}
	var sel []item
	for _, k := range b.stores {
		for _, c := range k.cases {
			if b.cfg.only == nil || b.cfg.only.MatchString(c.id()) {
				sel = append(sel, item{k, c})
			}
		}
	}
	for rep := 0; rep < b.cfg.reps; rep++ {
		for i, it := range sel {
			if err := ctx.Err(); err != nil {
				return err
			}
			s, err := b.runStoreCase(ctx, it.kit, it.c, fmt.Sprintf("r%d-s%d", rep, i))
			if err != nil {
				return fmt.Errorf("case %s: %w", it.c.id(), err)
			}
			b.results[it.c.id()] = append(b.results[it.c.id()], s)
			fmt.Fprintf(b.log, "rep %d/%d %-52s %9.0f ops/s  p50 %-9s p99 %-9s err %d %v\n", rep+1, b.cfg.reps, it.c.id(), s.Rate,
				s.P50.Round(time.Microsecond), s.P99.Round(time.Microsecond), s.Errors, s.Counts)
		}
	}
	return nil
}

func (b *bench) runStoreCase(ctx context.Context, k *storeKit, c storeCase, prefix string) (stats.Summary, error) {
	var p prepared
	var err error
	if c.impl == implLease {
		p, err = b.leaseCase(ctx, k, c, prefix)
	} else {
		p, err = k.prepare(ctx, c, prefix)
	}
	if err != nil {
		return stats.Summary{}, err
	}
	if c.op == opTick || c.op == opRaw {
		// One operation per repetition: its duration is the result.
		t0 := time.Now()
		err := p.op(ctx, 0)
		lat := time.Since(t0)
		derr := p.done()
		if err = errors.Join(err, derr); err != nil {
			return stats.Summary{}, err
		}
		return stats.Summarize(stats.Run{Ops: 1, Elapsed: lat, Lat: []time.Duration{lat}}), nil
	}
	// Twice the Redis cases' time: these stores wait for a disk flush on
	// every write, and a window of a few operations says little.
	now := time.Now()
	win := window{start: now.Add(b.cfg.warm), end: now.Add(b.cfg.warm + 2*b.cfg.dur)}
	ws := parallel(c.conc, func(i int, w *worker) {
		for {
			t0 := time.Now()
			if !t0.Before(win.end) || ctx.Err() != nil {
				return
			}
			octx, cancel := context.WithTimeout(ctx, opTimeout)
			err := p.op(octx, i)
			lat := time.Since(t0)
			cancel()
			if t0.Before(win.start) {
				continue
			}
			if err != nil {
				w.fail(err)
				time.Sleep(time.Millisecond)
				continue
			}
			w.lat = append(w.lat, lat)
		}
	})
	run := merge(win, ws)
	derr := p.done()
	if run.Ops == 0 && run.Errors > 0 {
		return stats.Summary{}, fmt.Errorf("every operation failed: %w", errors.Join(firstErr(ws), derr))
	}
	if derr != nil {
		return stats.Summary{}, derr
	}
	return stats.Summarize(run), nil
}

// leaseCase prepares a leasecron backend case on a fresh Backend.
func (b *bench) leaseCase(ctx context.Context, k *storeKit, c storeCase, prefix string) (prepared, error) {
	be, err := k.open(ctx)
	if err != nil {
		return prepared{}, fmt.Errorf("open: %w", err)
	}
	_ = be.Warm(ctx)
	closeBE := func() error { return be.Close() }
	key := func(i int) string { return fmt.Sprintf("%s-w%d", prefix, i) }
	req := func(key string) backend.Request {
		return backend.Request{Key: key, TTL: b.cfg.ttl, Owner: "leasebench " + key}
	}
	switch c.op {
	case opAR:
		return prepared{op: func(ctx context.Context, i int) error {
			l, err := be.Acquire(ctx, req(key(i)))
			if err != nil {
				return err
			}
			return l.Release(ctx)
		}, done: closeBE}, nil
	case opExtend:
		ls := make([]backend.Lease, c.conc)
		for i := range ls {
			actx, cancel := context.WithTimeout(ctx, opTimeout)
			l, err := be.Acquire(actx, req(key(i)))
			cancel()
			if err != nil {
				_ = be.Close()
				return prepared{}, fmt.Errorf("acquire before extend: %w", err)
			}
			ls[i] = l
		}
		return prepared{op: func(ctx context.Context, i int) error { return ls[i].Extend(ctx, 0) },
			done: func() error {
				var errs []error
				for _, l := range ls {
					rctx, cancel := context.WithTimeout(ctx, opTimeout)
					errs = append(errs, l.Release(rctx))
					cancel()
				}
				return errors.Join(append(errs, be.Close())...)
			}}, nil
	case opTick:
		n := b.cfg.batchKeys
		now := time.Now()
		reqs := make([]backend.Request, n)
		for i := range reqs {
			reqs[i] = backend.Request{Key: fmt.Sprintf("%s-j%d", prefix, i), TTL: 30 * time.Second,
				Epoch: now.Unix(), EpochTime: now, Owner: "leasebench tick"}
		}
		res := &tickResult{}
		b.tickRes[c.id()] = append(b.tickRes[c.id()], res)
		return prepared{op: func(ctx context.Context, _ int) error {
			tctx, cancel := context.WithTimeout(ctx, time.Minute)
			defer cancel()
			out := be.TryAcquireBatch(tctx, reqs)
			for _, r := range out {
				if r.Err == nil {
					res.won++
				} else if res.firstErr == nil {
					res.firstErr = r.Err
				}
			}
			res.keys = n
			return nil
		}, done: closeBE}, nil
	}
	_ = be.Close()
	return prepared{}, fmt.Errorf("unknown op %q", c.op)
}

// tickResult records what one tick case decided.
type tickResult struct {
	keys, won int
	firstErr  error
}
