package scheduler

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

// fleetMetrics are the metrics of "Operating a fleet":
//
//	leasecron_run_attempts_total{job,attempt}     attempts started on this host: attempt "1" is the tick's first run, "retry" any later one
//	leasecron_retries_exhausted_total{job}        ticks completed after a failure because no retry was left (or could start in time)
//	leasecron_ticks_skipped_total{job,reason}     ticks this host did not try: paused, host_full (max_parallel), data_younger
//	leasecron_job_paused{job}                     1 while the job is paused fleet-wide (as last read)
//	leasecron_fleet_hosts                         live hosts seen in the heartbeats
//	leasecron_standby_attempts_total              jobs tried by this host as a standby (not a candidate)
//	leasecron_history_lost_total{job}             run records that could not be written to the history
type fleetMetrics struct {
	attempts  *prometheus.CounterVec
	exhausted *prometheus.CounterVec
	skipped   *prometheus.CounterVec
	paused    *prometheus.GaugeVec
	hosts     prometheus.Gauge
	standby   prometheus.Counter
	history   *prometheus.CounterVec
}

func newFleetMetrics(f promauto.Factory, ns string) *fleetMetrics {
	return &fleetMetrics{
		attempts: f.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "run_attempts_total",
			Help: "Run attempts started on this host: attempt=\"1\" for a tick's first run, \"retry\" for a retry."}, []string{"job", "attempt"}),
		exhausted: f.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "retries_exhausted_total",
			Help: "Ticks completed after a failed run with no retry left (or none that could start before the deadline)."}, []string{"job"}),
		skipped: f.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "ticks_skipped_total",
			Help: "Ticks this host did not try, by reason: paused (fleet-wide pause), host_full (max_parallel), data_younger (no quorum will ever vote for the tick)."}, []string{"job", "reason"}),
		paused: f.NewGaugeVec(prometheus.GaugeOpts{Namespace: ns, Name: "job_paused",
			Help: "1 while the job is paused fleet-wide, as last read from the backend."}, []string{"job"}),
		hosts: f.NewGauge(prometheus.GaugeOpts{Namespace: ns, Name: "fleet_hosts",
			Help: "Live hosts in the heartbeats last read from the backend."}),
		standby: f.NewCounter(prometheus.CounterOpts{Namespace: ns, Name: "standby_attempts_total",
			Help: "Jobs this host tried as a standby host, at their standby time."}),
		history: f.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "history_lost_total",
			Help: "Run records that could not be written to the job's history in the backend."}, []string{"job"}),
	}
}

// Attempt counts a run attempt of job starting on this host (attempt
// from 1).
func (m *Metrics) Attempt(job string, attempt int) {
	if m == nil {
		return
	}
	a := "retry"
	if attempt <= 1 {
		a = strconv.Itoa(1)
	}
	m.fleet.attempts.WithLabelValues(job, a).Inc()
}

// RetriesExhausted counts a tick of job completed after a failure with no
// retry left.
func (m *Metrics) RetriesExhausted(job string) {
	if m == nil {
		return
	}
	m.fleet.exhausted.WithLabelValues(job).Inc()
}

// Skipped counts a tick of job this host did not try, by reason: paused,
// host_full or data_younger.
func (m *Metrics) Skipped(job, reason string) {
	if m == nil {
		return
	}
	m.fleet.skipped.WithLabelValues(job, reason).Inc()
}

// Paused records whether job is paused fleet-wide.
func (m *Metrics) Paused(job string, paused bool) {
	if m == nil {
		return
	}
	m.fleet.paused.WithLabelValues(job).Set(boolFloat(paused))
}

// LiveHosts records how many live hosts the heartbeats show.
func (m *Metrics) LiveHosts(n int) {
	if m == nil {
		return
	}
	m.fleet.hosts.Set(float64(n))
}

// Standby counts n jobs tried by this host as a standby.
func (m *Metrics) Standby(n int) {
	if m == nil {
		return
	}
	m.fleet.standby.Add(float64(n))
}

// HistoryLost counts a run record of job that could not be written.
func (m *Metrics) HistoryLost(job string) {
	if m == nil {
		return
	}
	m.fleet.history.WithLabelValues(job).Inc()
}
