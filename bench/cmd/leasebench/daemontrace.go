package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"
	"time"

	"github.com/leasecron/leasecron/bench/internal/stats"
)

// The daemon's debug lines that trace a tick to its job starts (see
// scheduler/fire.go tryGroup and scheduler/run.go runLeased), and its info
// line once the supervisor reported the job's pid.
const (
	msgTrying   = "trying the tick"
	msgDecided  = "tick decided"
	msgStarting = "starting the job"
	msgStarted  = "job started"
)

// traceStep is one step of the way from a tick to its job's first
// instruction: how long after the tick it was reached, over the (job,
// tick) starts of the measured window that have it.
type traceStep struct {
	name     string
	p50, p99 time.Duration
	n        int
}

// tickTrace is the tick-to-start breakdown measured from the daemons'
// logs in the same run as the tick-to-start delays.
type tickTrace struct {
	note  string      // why there is no breakdown ("" when there is one)
	steps []traceStep // offsets after the tick, in the order of the way
	// daemonPart and procPart split each start at "starting the job": the
	// daemon's part (tick -> the job handed to the supervisor) and the
	// process part (-> the job's first instruction), per start; handoff
	// is the process part's first piece ("starting the job" -> "job
	// started": the supervisor reported the job's pid).
	daemonPart, procPart, handoff traceStep
	// daemonShare is the median over starts of the daemon's part's
	// share of the start's tick-to-start time (0..1).
	daemonShare float64
	// rounds are the lease rounds of the batches with a win in the
	// window, all daemons: "trying the tick" -> "tick decided".
	rounds traceStep
	// batches are the tick's batches by all daemons in the order they
	// were decided (1st, 2nd, ...): when, how many jobs each tried and
	// how many it won.
	batches []tickBatchRow
	// losers are when the batches that won nothing were decided: the
	// other candidates' looks at a tick whose jobs were taken (a rank
	// stagger later).
	losers traceStep
	// overlapped is how many of the starts with a "starting the job"
	// line (daemonPart.n) had such a batch of another daemon whose round
	// ([trying the tick, tick decided]) intersected the start's
	// [starting the job, the job's first instruction]: that round (and
	// the nodes' work for it) ran while the job was being started.
	overlapped int
}

// tickBatchRow is the k-th batch decided of a tick over the measured ticks.
type tickBatchRow struct {
	order     int // 1 for the tick's first batch decided
	p50, p99  time.Duration
	jobs, won int // median number of jobs tried, and won
	ticks     int // how many ticks had a k-th batch
}

// traceLine is the part of a daemon's JSON log line the trace reads.
type traceLine struct {
	Time time.Time       `json:"time"`
	Msg  string          `json:"msg"`
	Job  string          `json:"job"`
	Tick json.RawMessage `json:"tick"`
	Jobs int             `json:"jobs"`
	Won  int             `json:"won"`
}

// tickUnix reads a "tick" attribute: RFC 3339 text (as the scheduler
// logs it) or Unix seconds; false for anything else ("manual").
func tickUnix(raw json.RawMessage) (int64, bool) {
	if len(raw) == 0 {
		return 0, false
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		t, err := time.Parse(time.RFC3339, s)
		return t.Unix(), err == nil
	}
	n, err := strconv.ParseInt(string(raw), 10, 64)
	return n, err == nil
}

// jobTick names one tick of one job.
type jobTick struct {
	job  string
	tick int64
}

// batch is one "tick decided" line: by which daemon, when its round
// began ("trying the tick", zero when the log has no line to pair it
// with) and ended, how many jobs it tried and how many it won.
type batch struct {
	host      string
	tried, at time.Time
	jobs, won int
}

// overlaps reports whether the batch's round [tried, at] intersects [from,
// to]; a batch without its "trying the tick" line counts as the instant
// it was decided.
func (bt batch) overlaps(from, to time.Time) bool {
	tried := bt.tried
	if tried.IsZero() {
		tried = bt.at
	}
	return !tried.After(to) && !bt.at.Before(from)
}

// daemonLog is what one daemon's log says about the ticks.
type daemonLog struct {
	tried, decided    map[int64]time.Time   // earliest per tick (decided: with a win)
	starting, started map[jobTick]time.Time // earliest per (job, tick)
	batches           map[int64][]batch     // in the order decided, each paired with its "trying the tick"
}

// readDaemonTrace reads the trace lines of host's JSON log at path.
// Lines that are not JSON are skipped.
func readDaemonTrace(host, path string) (*daemonLog, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("daemon log of %s: %w", host, err)
	}
	defer f.Close()
	dl := &daemonLog{tried: map[int64]time.Time{}, decided: map[int64]time.Time{},
		starting: map[jobTick]time.Time{}, started: map[jobTick]time.Time{}, batches: map[int64][]batch{}}
	trying := map[int64][]time.Time{} // every "trying the tick" per tick
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		b := sc.Bytes()
		if len(b) == 0 || b[0] != '{' {
			continue
		}
		var l traceLine
		if json.Unmarshal(b, &l) != nil || l.Time.IsZero() {
			continue
		}
		tick, ok := tickUnix(l.Tick)
		if !ok {
			continue
		}
		switch l.Msg {
		case msgTrying:
			earliest(dl.tried, tick, l.Time)
			trying[tick] = append(trying[tick], l.Time)
		case msgDecided:
			dl.batches[tick] = append(dl.batches[tick], batch{host: host, at: l.Time, jobs: l.Jobs, won: l.Won})
			if l.Won > 0 {
				earliest(dl.decided, tick, l.Time)
			}
		case msgStarting:
			earliest(dl.starting, jobTick{l.Job, tick}, l.Time)
		case msgStarted:
			earliest(dl.started, jobTick{l.Job, tick}, l.Time)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("daemon log of %s: %w", host, err)
	}
	for tick, bs := range dl.batches {
		pairRounds(bs, trying[tick])
	}
	return dl, nil
}

// earliest keeps in m[k] the earliest of its time and t.
func earliest[K comparable](m map[K]time.Time, k K, t time.Time) {
	if old, ok := m[k]; !ok || t.Before(old) {
		m[k] = t
	}
}

// pairRounds sorts one daemon's batches of one tick by when they were
// decided and gives each its "trying the tick" time: a daemon tries a
// tick's batches one after the other (scheduler/fire.go tryGroup), so the
// k-th attempt is the k-th batch's. An attempt later than its batch's
// decision means the lines do not pair up (a log cut short); then the
// batches keep no attempt time.
func pairRounds(bs []batch, tried []time.Time) {
	slices.SortFunc(bs, func(a, b batch) int { return a.at.Compare(b.at) })
	slices.SortFunc(tried, func(a, b time.Time) int { return a.Compare(b) })
	for i := range min(len(bs), len(tried)) {
		if tried[i].After(bs[i].at) {
			for j := range bs {
				bs[j].tried = time.Time{}
			}
			return
		}
		bs[i].tried = tried[i]
	}
}

// jobStart is one (job, tick) start from the tickstamp file.
type jobStart struct {
	host  string
	first time.Time // the job's first instruction
}

// readStarts reads the first start of each (job, tick) in [from, to] (Unix
// seconds) from the tickstamp file, as parseStarts counts them (later
// duplicates are left out).
func readStarts(file string, from, to int64) (map[jobTick]jobStart, error) {
	starts := map[jobTick]jobStart{}
	err := eachStart(file, from, to, func(k jobTick, host string, ns int64) {
		if _, dup := starts[k]; !dup {
			starts[k] = jobStart{host: host, first: time.Unix(0, ns)}
		}
	})
	return starts, err
}

// parseTrace measures, for every (job, tick) started in [from, to] (the
// window of parseStarts), how long after the tick each step of its way
// was reached on the daemon that ran it: that daemon's first batch
// attempt of the tick, its first batch of the tick with a win, "starting
// the job", "job started" and the job's first instruction. logs maps each
// daemon's host name (LEASECRON_HOST) to its JSON log. It also sums up
// the batches of the ticks in the window by all daemons.
func parseTrace(logs map[string]string, startsFile string, from, to int64) (tickTrace, error) {
	starts, err := readStarts(startsFile, from, to)
	if err != nil {
		return tickTrace{}, fmt.Errorf("job starts: %w", err)
	}
	if len(starts) == 0 {
		return tickTrace{}, errors.New("no job started in the measured window")
	}
	dls := map[string]*daemonLog{}
	allBatches := map[int64][]batch{}
	tried := 0
	for _, host := range slices.Sorted(maps.Keys(logs)) {
		dl, err := readDaemonTrace(host, logs[host])
		if err != nil {
			return tickTrace{}, err
		}
		dls[host] = dl
		tried += len(dl.tried)
		for t, bs := range dl.batches {
			allBatches[t] = append(allBatches[t], bs...)
		}
	}
	names := []string{"first batch attempt of the tick (" + msgTrying + ")", "first batch with a win decided (" + msgDecided + ")",
		"job handed to a supervisor (" + msgStarting + ")", "supervisor reported the pid (" + msgStarted + ")", "job's first instruction"}
	offs := make([][]time.Duration, len(names))
	var daemonPart, procPart, handoff []time.Duration
	var shares []float64
	var tr tickTrace
	for k, st := range starts {
		dl := dls[st.host]
		if dl == nil {
			continue
		}
		at := time.Unix(k.tick, 0)
		for i, t := range []time.Time{dl.tried[k.tick], dl.decided[k.tick], dl.starting[k], dl.started[k], st.first} {
			if !t.IsZero() {
				offs[i] = append(offs[i], t.Sub(at))
			}
		}
		s := dl.starting[k]
		if s.IsZero() {
			continue
		}
		daemonPart = append(daemonPart, s.Sub(at))
		procPart = append(procPart, st.first.Sub(s))
		if total := st.first.Sub(at); total > 0 {
			shares = append(shares, float64(s.Sub(at))/float64(total))
		}
		if r := dl.started[k]; !r.IsZero() {
			handoff = append(handoff, r.Sub(s))
		}
		for _, bt := range allBatches[k.tick] {
			if bt.host != st.host && bt.won == 0 && bt.overlaps(s, st.first) {
				tr.overlapped++
				break
			}
		}
	}
	if tried == 0 {
		return tickTrace{}, fmt.Errorf("the daemons' logs have no %q line (not run with --log-format json --log-level debug?)", msgTrying)
	}
	for i, name := range names {
		tr.steps = append(tr.steps, stepOf(name, offs[i]))
	}
	tr.daemonPart = stepOf("tick → "+msgStarting, daemonPart)
	tr.procPart = stepOf(msgStarting+" → job's first instruction", procPart)
	tr.handoff = stepOf(msgStarting+" → "+msgStarted, handoff)
	if len(shares) > 0 {
		tr.daemonShare = stats.Median(shares)
	}
	tr.batches, tr.losers, tr.rounds = tickBatchRows(allBatches, from, to)
	return tr, nil
}

// stepOf summarizes the durations ds (unsorted) as a step.
func stepOf(name string, ds []time.Duration) traceStep {
	s := traceStep{name: name, n: len(ds)}
	if len(ds) == 0 {
		return s
	}
	slices.Sort(ds)
	s.p50, s.p99 = stats.Percentile(ds, 50), stats.Percentile(ds, 99)
	return s
}

// tickBatchRows summarizes the batches of the ticks in [from, to] by their
// order within the tick, when those that won nothing were decided, and
// how long the rounds of those with a win took (tried -> decided).
func tickBatchRows(all map[int64][]batch, from, to int64) ([]tickBatchRow, traceStep, traceStep) {
	var byOrder [][]time.Duration
	var jobs, won [][]float64
	var losers, rounds []time.Duration
	for t, bs := range all {
		if t < from || t > to {
			continue
		}
		slices.SortFunc(bs, func(a, b batch) int { return a.at.Compare(b.at) })
		for i, bt := range bs {
			if i == len(byOrder) {
				byOrder, jobs, won = append(byOrder, nil), append(jobs, nil), append(won, nil)
			}
			off := bt.at.Sub(time.Unix(t, 0))
			byOrder[i] = append(byOrder[i], off)
			jobs[i], won[i] = append(jobs[i], float64(bt.jobs)), append(won[i], float64(bt.won))
			if bt.won == 0 {
				losers = append(losers, off)
			} else if !bt.tried.IsZero() {
				rounds = append(rounds, bt.at.Sub(bt.tried))
			}
		}
	}
	rows := make([]tickBatchRow, len(byOrder))
	for i, ds := range byOrder {
		s := stepOf("", ds)
		rows[i] = tickBatchRow{order: i + 1, p50: s.p50, p99: s.p99, jobs: int(stats.Median(jobs[i])), won: int(stats.Median(won[i])), ticks: s.n}
	}
	return rows, stepOf("batches that won nothing", losers), stepOf("lease rounds of the batches with a win", rounds)
}
