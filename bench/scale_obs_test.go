package bench

import (
	"context"
	"log/slog"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// captureReg is a prometheus.Registerer that keeps each collector by its
// metric name instead of exposing it, so that the bench reads the few
// series it needs (runs_total, fleet_hosts, ...) of a host directly,
// without gathering every series of 10,000 jobs.
type captureReg struct {
	mu     sync.Mutex
	byName map[string]prometheus.Collector
}

func newCaptureReg() *captureReg { return &captureReg{byName: map[string]prometheus.Collector{}} }

var fqName = regexp.MustCompile(`fqName: "([^"]+)"`)

// Register keeps c under its metric name.
func (r *captureReg) Register(c prometheus.Collector) error {
	ch := make(chan *prometheus.Desc, 16)
	c.Describe(ch)
	close(ch)
	r.mu.Lock()
	defer r.mu.Unlock()
	for d := range ch {
		if m := fqName.FindStringSubmatch(d.String()); m != nil {
			r.byName[m[1]] = c
		}
	}
	return nil
}

// MustRegister registers each of cs.
func (r *captureReg) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		_ = r.Register(c)
	}
}

// Unregister does nothing.
func (r *captureReg) Unregister(prometheus.Collector) bool { return false }

// each calls f with the labels and value of every series of metric name
// (counters and gauges).
func (r *captureReg) each(name string, f func(labels map[string]string, v float64)) {
	r.mu.Lock()
	c := r.byName[name]
	r.mu.Unlock()
	if c == nil {
		return
	}
	ch := make(chan prometheus.Metric, 1024)
	go func() { c.Collect(ch); close(ch) }()
	for m := range ch {
		var d dto.Metric
		if m.Write(&d) != nil {
			continue
		}
		labels := map[string]string{}
		for _, lp := range d.GetLabel() {
			labels[lp.GetName()] = lp.GetValue()
		}
		switch {
		case d.GetCounter() != nil:
			f(labels, d.GetCounter().GetValue())
		case d.GetGauge() != nil:
			f(labels, d.GetGauge().GetValue())
		}
	}
}

// value is the sum of every series of metric name.
func (r *captureReg) value(name string) float64 {
	var t float64
	r.each(name, func(_ map[string]string, v float64) { t += v })
	return t
}

// The scheduler's log messages the bench counts (scheduler/run.go).
const (
	msgWon      = "dry run: won the tick; not starting the job"
	msgFinished = "job finished"
)

// tally counts, over every host of a scenario, the ticks won and the run
// records finished, from the schedulers' own log records: the moment the
// last of n arrives is when every tick was decided (won) and recorded
// (lease completed, history written, runs_total counted).
type tally struct {
	n             int64
	won, finished atomic.Int64
	finishedAll   chan time.Time // the time of the n-th record
}

func newTally(n int) *tally {
	return &tally{n: int64(n), finishedAll: make(chan time.Time, 1)}
}

// handler is one host's slog.Handler feeding the tally.
type handler struct{ t *tally }

func (h handler) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelInfo }

func (h handler) Handle(_ context.Context, r slog.Record) error {
	t := h.t
	switch {
	case r.Message == msgWon:
		t.won.Add(1)
	case r.Message == msgFinished:
		dry := false
		r.Attrs(func(a slog.Attr) bool {
			if a.Key == "result" {
				dry = a.Value.String() == "dry_run"
				return false
			}
			return true
		})
		if dry && t.finished.Add(1) == t.n {
			t.finishedAll <- r.Time
		}
	}
	return nil
}

func (h handler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h handler) WithGroup(string) slog.Handler      { return h }

// rssBytes is this process's resident set size.
func rssBytes() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10
		}
	}
	return 0
}
