package main

import (
	"fmt"
	"io"
	"sort"
	"time"

	"github.com/leasecron/leasecron/bench/internal/stats"
)

// storeAlt names, per store, the lock users would otherwise pick for
// Acquire+Release and for Extend ("" if none is measured).
var storeAlt = map[string][2]string{
	storePG:   {"", ""},
	storeEtcd: {implEtcdMutex, implEtcdKeep},
	storeZK:   {implZKLock, ""},
}

// storeWFloorName describes each store's write floor.
var storeWFloorName = map[string]string{
	storePG:   "one single-row `INSERT ... ON CONFLICT DO UPDATE` (its own committed transaction)",
	storeEtcd: "one `Put`",
	storeZK:   "one `Set` on an existing znode",
}

// storeFloorName describes each store's floor.
var storeFloorName = map[string]string{
	storePG:   "one `SELECT 1` (pgx pool, the backend's settings)",
	storeEtcd: "one linearizable `Get` (Range) of one key",
	storeZK:   "one `Exists(\"/\")`",
}

func (b *bench) storeSummaries(id string) ([]stats.Summary, bool) {
	ss, ok := b.results[id]
	return ss, ok && len(ss) > 0
}

func p50Of(ss []stats.Summary) time.Duration {
	return stats.MedianDur(ss, func(s stats.Summary) time.Duration { return s.P50 })
}

func rateOf(ss []stats.Summary) float64 {
	return stats.MedianOf(ss, func(s stats.Summary) float64 { return s.Rate })
}

// writeStores writes the PostgreSQL, etcd and ZooKeeper section.
func (b *bench) writeStores(w io.Writer) {
	if len(b.stores) == 0 {
		return
	}
	fmt.Fprintf(w, "## Other backends: PostgreSQL, etcd, ZooKeeper (issues 10 and 11)\n\n")
	fmt.Fprintf(w, "The same run started one server of each store on 127.0.0.1 (one process each, not a cluster; versions in the table at the top) and measured leasecron's `backend` implementations (`backend/postgres`, `backend/etcd`, `backend/zookeeper`, default options, lease TTL %s) through the `backend.Backend` interface: the cases below are repeated %d times, interleaved with each other, %s measured after %s warm-up, medians reported; each case opens a fresh client.\n\n",
		b.cfg.ttl, b.cfg.reps, 2*b.cfg.dur, b.cfg.warm)
	fmt.Fprintf(w, "- **Floor**: PostgreSQL %s; etcd %s; ZooKeeper %s. Every leasecron operation is at least one such round trip. **Write floor**: PostgreSQL %s; etcd %s; ZooKeeper %s (each worker its own row/key/znode). Every acquire, extend and release is at least one such durable write.\n", storeFloorName[storePG], storeFloorName[storeEtcd], storeFloorName[storeZK], storeWFloorName[storePG], storeWFloorName[storeEtcd], storeWFloorName[storeZK])
	fmt.Fprintf(w, "- **Acquire+Release**: `Acquire` then `Release` of the worker's own key (no contention). **Extend**: each worker holds its lease and calls `Extend` in a loop. c workers share one client.\n")
	fmt.Fprintf(w, "- **Alternatives**: etcd's `client/v3/concurrency` `Mutex` (one `Session` per case, `Lock` + `Unlock` on the worker's own key) and `KeepAliveOnce` on an etcd lease (what renewing a session's lease costs as a request); go-zookeeper's `zk.Lock` (`Lock` + `Unlock`, one lock path per worker). PostgreSQL has no lock library in the comparison.\n")
	fmt.Fprintf(w, "- **Tick**: one `TryAcquireBatch` of %d fresh keys (epoch = now, TTL 30 s) on a fresh client, once per repetition; for PostgreSQL also its floor, one raw `INSERT ... SELECT FROM unnest($1) ON CONFLICT (key) DO UPDATE` of %d fresh rows into a two-column table, without the lease logic. PostgreSQL runs with its default durability (fsync and synchronous_commit on): every acquire, extend and release is a committed write.\n\n",
		b.cfg.batchKeys, b.cfg.batchKeys)

	// Summary.
	fmt.Fprintf(w, "### Summary: Acquire+Release, c=1\n\n")
	t := mdTable{head: []string{"backend", "acquire+release p50", "ops/s", "floor p50", "p50 / floor", "write floor p50", "p50 / write floor", "vs alternative (ops/s)"}}
	for _, k := range []int{1, 5} {
		ar, ok1 := b.storeSummaries(kase{kind: kindAR, lib: libLease, k: k, conc: 1}.id())
		fl, ok2 := b.storeSummaries(kase{kind: kindPing, k: k, conc: 1}.id())
		rs, ok3 := b.storeSummaries(kase{kind: kindAR, lib: libRedsync, k: k, conc: 1}.id())
		if !ok1 || !ok2 {
			continue
		}
		alt := "–"
		if ok3 {
			alt = fmt.Sprintf("redsync: %s, %s → **%.2f×**", fmtDur(p50Of(rs)), fmtRate(rateOf(rs)), ratio(rateOf(ar), rateOf(rs)))
		}
		t.add(fmt.Sprintf("Redis, K=%d (lease/)", k), fmtDur(p50Of(ar)), fmtRate(rateOf(ar)), fmtDur(p50Of(fl)),
			fmt.Sprintf("%.2f×", ratio(float64(p50Of(ar)), float64(p50Of(fl)))), "–", "–", alt)
	}
	for _, kit := range b.stores {
		s := kit.name
		ar, ok1 := b.storeSummaries(storeCase{s, opAR, implLease, 1}.id())
		fl, ok2 := b.storeSummaries(storeCase{s, opFloor, "", 1}.id())
		if !ok1 || !ok2 {
			continue
		}
		alt := "–"
		if a := storeAlt[s][0]; a != "" {
			if as, ok := b.storeSummaries(storeCase{s, opAR, a, 1}.id()); ok {
				alt = fmt.Sprintf("%s: %s, %s → **%.2f×**", a, fmtDur(p50Of(as)), fmtRate(rateOf(as)), ratio(rateOf(ar), rateOf(as)))
			}
		}
		wf, wfr := "–", "–"
		if wfs, ok := b.storeSummaries(storeCase{s, opWFloor, "", 1}.id()); ok {
			wf = fmtDur(p50Of(wfs))
			wfr = fmt.Sprintf("%.2f×", ratio(float64(p50Of(ar)), float64(p50Of(wfs))))
		}
		t.add(s, fmtDur(p50Of(ar)), fmtRate(rateOf(ar)), fmtDur(p50Of(fl)),
			fmt.Sprintf("%.2f×", ratio(float64(p50Of(ar)), float64(p50Of(fl)))), wf, wfr, alt)
	}
	t.write(w)
	fmt.Fprintf(w, "\"vs alternative\" is leasecron's ops/s divided by the alternative's (above 1: leasecron is faster). The Redis rows repeat the K=1 and K=5 rows of the tables above (floor: PING to a quorum).\n\n")

	// One table per store.
	for _, kit := range b.stores {
		s := kit.name
		fmt.Fprintf(w, "### %s\n\n", s)
		t := mdTable{head: []string{"operation", "c", "implementation", "ops/s", "p50", "p90", "p99", "spread", "p50 / floor p50", "errors"}}
		for _, conc := range []int{1, 16} {
			fl, okf := b.storeSummaries(storeCase{s, opFloor, "", conc}.id())
			row := func(op, label string, c storeCase) {
				ss, ok := b.storeSummaries(c.id())
				if !ok {
					return
				}
				fr := "–"
				if okf && c.op != opFloor && c.op != opWFloor {
					fr = fmt.Sprintf("%.2f×", ratio(float64(p50Of(ss)), float64(p50Of(fl))))
				}
				t.add(op, fmt.Sprint(conc), label, fmtRate(rateOf(ss)),
					fmtDur(p50Of(ss)),
					fmtDur(stats.MedianDur(ss, func(x stats.Summary) time.Duration { return x.P90 })),
					fmtDur(stats.MedianDur(ss, func(x stats.Summary) time.Duration { return x.P99 })),
					fmt.Sprintf("%.0f%%", 100*stats.Spread(ss, func(x stats.Summary) float64 { return x.Rate })),
					fr, fmt.Sprint(stats.MedianOf(ss, func(x stats.Summary) float64 { return float64(x.Errors) })))
			}
			row("floor", storeFloorLabel(s), storeCase{s, opFloor, "", conc})
			row("write floor", storeWFloorLabel(s), storeCase{s, opWFloor, "", conc})
			row("Acquire+Release", "leasecron", storeCase{s, opAR, implLease, conc})
			if a := storeAlt[s][0]; a != "" {
				row("Acquire+Release", a, storeCase{s, opAR, a, conc})
			}
			row("Extend", "leasecron", storeCase{s, opExtend, implLease, conc})
			if a := storeAlt[s][1]; a != "" {
				row("Extend", a, storeCase{s, opExtend, a, conc})
			}
		}
		t.write(w)
	}

	// Ticks.
	fmt.Fprintf(w, "### One tick: TryAcquireBatch of %d keys\n\n", b.cfg.batchKeys)
	t = mdTable{head: []string{"backend", "keys", "decided (median)", "decided (min – max)", "per key", "keys won (min)", "floor", "decided / floor"}}
	for _, kit := range b.stores {
		s := kit.name
		c := storeCase{s, opTick, implLease, 1}
		ss, ok := b.storeSummaries(c.id())
		if !ok {
			continue
		}
		lat := make([]time.Duration, len(ss))
		for i, x := range ss {
			lat[i] = x.P50
		}
		sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
		won, keys := -1, 0
		var ferr error
		for _, r := range b.tickRes[c.id()] {
			if won < 0 || r.won < won {
				won = r.won
			}
			keys = r.keys
			if ferr == nil {
				ferr = r.firstErr
			}
		}
		d := p50Of(ss)
		floor, fr := "–", "–"
		if raw, ok := b.storeSummaries(storeCase{s, opRaw, implRawUpsert, 1}.id()); ok {
			floor = fmt.Sprintf("raw upsert of %d rows: %s", b.cfg.batchKeys, fmtDur(p50Of(raw)))
			fr = fmt.Sprintf("%.2f×", ratio(float64(d), float64(p50Of(raw))))
		}
		wonS := fmt.Sprint(won)
		if ferr != nil && won < keys {
			wonS += fmt.Sprintf(" (first failure: %.120s)", ferr.Error())
		}
		t.add(s, fmt.Sprint(keys), fmtDur(d), fmtDur(lat[0])+" – "+fmtDur(lat[len(lat)-1]),
			fmtDur(d/time.Duration(max(keys, 1))), wonS, floor, fr)
	}
	t.write(w)
	b.writeStoreFindings(w)
}

// writeStoreFindings explains the store tables with this run's numbers.
func (b *bench) writeStoreFindings(w io.Writer) {
	get := func(s, op, impl string, conc int) time.Duration {
		ss, ok := b.storeSummaries(storeCase{s, op, impl, conc}.id())
		if !ok {
			return 0
		}
		return p50Of(ss)
	}
	rate := func(s, op, impl string, conc int) float64 {
		ss, ok := b.storeSummaries(storeCase{s, op, impl, conc}.id())
		if !ok {
			return 0
		}
		return rateOf(ss)
	}
	x := func(a, b time.Duration) string { return fmt.Sprintf("%.1f×", ratio(float64(a), float64(b))) }
	fmt.Fprintf(w, "**What the numbers say.** ")
	if ar, wf, fl, ex := get(storePG, opAR, implLease, 1), get(storePG, opWFloor, "", 1), get(storePG, opFloor, "", 1), get(storePG, opExtend, implLease, 1); ar > 0 && wf > 0 {
		fmt.Fprintf(w, "*PostgreSQL*: Acquire+Release is two committed statements (acquire.sql's INSERT ... ON CONFLICT, release.sql's UPDATE), each waiting for its WAL flush: %s at c=1, %s the 1-row write floor (%s) and %s `SELECT 1` (%s); Extend, one committed UPDATE, takes %s (%s the write floor). At c=16 the 16 workers share the pool's connections (pgx's default, max(4, cores) = 4 here, the same for the floors): %s Acquire+Release/s against %s write-floor upserts/s. ",
			fmtDur(ar), x(ar, wf), fmtDur(wf), x(ar, fl), fmtDur(fl), fmtDur(ex), x(ex, wf),
			fmtRate(rate(storePG, opAR, implLease, 16)), fmtRate(rate(storePG, opWFloor, "", 16)))
		if tk, raw := get(storePG, opTick, implLease, 1), get(storePG, opRaw, implRawUpsert, 1); tk > 0 && raw > 0 {
			fmt.Fprintf(w, "A tick of %d keys is one statement: %s, %s the raw upsert of as many rows (%s), the rest being the lease conditions and the rows it returns. ", b.cfg.batchKeys, fmtDur(tk), x(tk, raw), fmtDur(raw))
		}
	}
	if ar, wf, mx := get(storeEtcd, opAR, implLease, 1), get(storeEtcd, opWFloor, "", 1), get(storeEtcd, opAR, implEtcdMutex, 1); ar > 0 && wf > 0 && mx > 0 {
		fmt.Fprintf(w, "*etcd*: leasecron's Acquire+Release is four writes through raft, each fsynced by the one member: the Grant of the acquisition's own etcd lease, the acquire transaction, the release transaction and the Revoke; %s at c=1 = %s one Put (%s). concurrency.Mutex makes two writes (its put-if-absent transaction, the Delete) and one read (the Get of older waiters), because its Session's lease was granted once beforehand: %s, so leasecron does %s of its Acquire+Release/s at c=1 and %s at c=16. The per-acquisition lease is what gives every acquisition its own TTL and lets a lost holder's key expire on its own; sharing one etcd lease between the acquisitions of a client with the same TTL (as TryAcquireBatch already does within a batch) would remove the Grant and the Revoke from the common case. Extend is one KeepAliveOnce: %s, KeepAliveOnce called directly %s. ",
			fmtDur(ar), x(ar, wf), fmtDur(wf), fmtDur(mx),
			fmt.Sprintf("%.2f×", ratio(rate(storeEtcd, opAR, implLease, 1), rate(storeEtcd, opAR, implEtcdMutex, 1))),
			fmt.Sprintf("%.2f×", ratio(rate(storeEtcd, opAR, implLease, 16), rate(storeEtcd, opAR, implEtcdMutex, 16))),
			fmtDur(get(storeEtcd, opExtend, implLease, 1)), fmtDur(get(storeEtcd, opExtend, implEtcdKeep, 1)))
	}
	if ar, wf, lk := get(storeZK, opAR, implLease, 1), get(storeZK, opWFloor, "", 1), get(storeZK, opAR, implZKLock, 1); ar > 0 && wf > 0 && lk > 0 {
		fmt.Fprintf(w, "*ZooKeeper*: Acquire+Release is two writes (the multi that checks the done node, creates the ephemeral lock and sets its data; the multi that deletes it): %s at c=1 = %s one Set (%s); zk.Lock makes two writes too (a protected ephemeral sequential create, the Delete) plus a GetChildren: %s, so leasecron does %s of its ops/s at c=1 and %s at c=16. Extend is one write (a multi with SetData, which also touches the session): %s. ",
			fmtDur(ar), x(ar, wf), fmtDur(wf), fmtDur(lk),
			fmt.Sprintf("%.2f×", ratio(rate(storeZK, opAR, implLease, 1), rate(storeZK, opAR, implZKLock, 1))),
			fmt.Sprintf("%.2f×", ratio(rate(storeZK, opAR, implLease, 16), rate(storeZK, opAR, implZKLock, 16))),
			fmtDur(get(storeZK, opExtend, implLease, 1)))
	}
	fmt.Fprintf(w, "Each store here is one server process sharing the 2 cores with the benchmark; a real etcd or ZooKeeper ensemble adds a replication round trip to every write, and a PostgreSQL on its own disk a different fsync time.\n\n")
}

func storeFloorLabel(s string) string {
	switch s {
	case storePG:
		return implSelect1
	case storeEtcd:
		return implEtcdGet
	}
	return implZKExists
}

func storeWFloorLabel(s string) string {
	switch s {
	case storePG:
		return "1-row upsert"
	case storeEtcd:
		return "Put"
	}
	return "Set"
}
