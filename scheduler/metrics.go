package scheduler

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

// Metrics is the scheduler's set of Prometheus metrics. Pass one in
// Options.Metrics; the Scheduler updates it as ticks fire, leases are
// acquired and renewed, jobs run and nodes answer.
//
// Every method is safe to call on a nil *Metrics (it does nothing), so
// code that updates metrics needs no nil checks, and safe for concurrent
// use.
//
// All metric names start with "leasecron_". Labels: job is a job name from
// the config, node is a Redis node URL with its password redacted (as
// lease.Client.Nodes returns it).
type Metrics struct {
	runs        *prometheus.CounterVec
	runDuration *prometheus.HistogramVec
	acquires    *prometheus.CounterVec
	renews      *prometheus.CounterVec
	renewTime   *prometheus.HistogramVec
	aborts      *prometheus.CounterVec
	requests    *prometheus.CounterVec
	nodeLatency *prometheus.HistogramVec
	nodeUp      *prometheus.GaugeVec
	nodePing    *prometheus.GaugeVec
	restarts    *prometheus.CounterVec
	tickDelay   *prometheus.HistogramVec
	running     *prometheus.GaugeVec
	quorum      prometheus.Gauge
	fleet       *fleetMetrics
	hooks       *hookMetrics
}

// latencyBuckets suit Redis round trips: 0.5 ms to 1 s (the per-node
// timeout is typically 50 ms).
var latencyBuckets = []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1}

// NewMetrics creates the scheduler's metrics and registers them on reg
// (a nil reg registers nothing, which is handy in tests). Like
// prometheus.MustRegister it panics if metrics of the same names are already
// registered on reg, so create one Metrics per registry.
//
// The metrics are:
//
//	leasecron_runs_total{job,result}              runs by result: ok, failed, timeout, aborted, shutdown, error, skipped
//	leasecron_run_duration_seconds{job}           histogram of run durations (skipped ticks are not observed)
//	leasecron_lease_acquire_total{job,outcome}    acquisition attempts: won, held, done, no_quorum, data_younger, error
//	leasecron_lease_renew_total{job,result}       lease renewals: ok, failed
//	leasecron_lease_renew_seconds{job}            histogram of renewal round times
//	leasecron_job_aborts_total{job,reason}        runs cut short, by the reason their result gives (see Abort)
//	leasecron_node_requests_total{node,op,vote}   per-node answers to acquire/extend/release/...
//	leasecron_node_latency_seconds{node}          histogram of per-node request latency
//	leasecron_node_up{node}                       1 if the node answered the last health ping
//	leasecron_node_ping_seconds{node}             latency of the last successful health ping
//	leasecron_node_restarts_total{node}           restarts (or failovers) detected
//	leasecron_tick_start_delay_seconds{job}       histogram of how late after its tick a run's lease was requested
//	leasecron_jobs_running{job}                   runs in progress on this host
//	leasecron_quorum_healthy                      1 if a quorum of nodes answered and votes
//
// and those of retries, pauses, heartbeats and history (see metrics_fleet.go),
// of missed ticks and hooks (see metrics_hooks.go).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	f := promauto.With(reg)
	const ns = "leasecron"
	return &Metrics{
		runs: f.NewCounterVec(prometheus.CounterOpts{
			Namespace: ns, Name: "runs_total",
			Help: "Job runs on this host by result (ok, failed, timeout, aborted, shutdown, error, skipped).",
		}, []string{"job", "result"}),
		runDuration: f.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: ns, Name: "run_duration_seconds",
			Help:    "Duration of job runs on this host.",
			Buckets: []float64{.1, .5, 1, 5, 10, 30, 60, 300, 900, 1800, 3600, 7200},
		}, []string{"job"}),
		acquires: f.NewCounterVec(prometheus.CounterOpts{
			Namespace: ns, Name: "lease_acquire_total",
			Help: "Lease acquisition attempts by outcome (won, held, done, no_quorum, data_younger: servers that lost their data since the tick do not vote for it, error).",
		}, []string{"job", "outcome"}),
		renews: f.NewCounterVec(prometheus.CounterOpts{
			Namespace: ns, Name: "lease_renew_total",
			Help: "Lease renewals by result (ok, failed).",
		}, []string{"job", "result"}),
		renewTime: f.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: ns, Name: "lease_renew_seconds",
			Help:    "Time taken by one lease renewal round.",
			Buckets: latencyBuckets,
		}, []string{"job"}),
		aborts: f.NewCounterVec(prometheus.CounterOpts{
			Namespace: ns, Name: "job_aborts_total",
			Help: "Runs cut short by the reason their result gives (lease_lost, timeout, shutdown, paused, supervisor_lost, suspended, limit_memory, limit_tasks, limit_cpu).",
		}, []string{"job", "reason"}),
		requests: f.NewCounterVec(prometheus.CounterOpts{
			Namespace: ns, Name: "node_requests_total",
			Help: "Requests to each Redis node by operation and the node's vote.",
		}, []string{"node", "op", "vote"}),
		nodeLatency: f.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: ns, Name: "node_latency_seconds",
			Help:    "Latency of requests to each server of the lease store.",
			Buckets: latencyBuckets,
		}, []string{"node"}),
		nodeUp: f.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: ns, Name: "node_up",
			Help: "1 if the lease store's server answered the last health check, else 0.",
		}, []string{"node"}),
		nodePing: f.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: ns, Name: "node_ping_seconds",
			Help: "Latency of the last successful health check of each server of the lease store.",
		}, []string{"node"}),
		restarts: f.NewCounterVec(prometheus.CounterOpts{
			Namespace: ns, Name: "node_restarts_total",
			Help: "Restarts or failovers of each server of the lease store detected by its client.",
		}, []string{"node"}),
		tickDelay: f.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: ns, Name: "tick_start_delay_seconds",
			Help:    "How late after its scheduled tick a run's lease was requested.",
			Buckets: []float64{.001, .005, .01, .05, .1, .5, 1, 5, 10, 30, 60},
		}, []string{"job"}),
		running: f.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: ns, Name: "jobs_running",
			Help: "Runs of each job in progress on this host.",
		}, []string{"job"}),
		quorum: f.NewGauge(prometheus.GaugeOpts{
			Namespace: ns, Name: "quorum_healthy",
			Help: "1 if a quorum of the lease store's servers answered the last health check and votes, else 0.",
		}),
		fleet: newFleetMetrics(f, ns),
		hooks: newHookMetrics(f, ns),
	}
}

// RunFinished counts a finished run of job with its result (ok, failed,
// timeout, aborted, shutdown, error, or skipped for a tick given up because
// the previous run still held the lease) and observes its duration. Skipped
// ticks did not run, so their duration is not observed.
func (m *Metrics) RunFinished(job, result string, d time.Duration) {
	if m == nil {
		return
	}
	m.runs.WithLabelValues(job, result).Inc()
	if result != "skipped" {
		m.runDuration.WithLabelValues(job).Observe(d.Seconds())
	}
}

// Acquire counts one lease acquisition attempt for job by outcome: won,
// held (by another host or an older tick), done (tick already completed),
// no_quorum, data_younger (servers whose data is younger than the tick
// refused to vote for it) or error.
func (m *Metrics) Acquire(job, outcome string) {
	if m == nil {
		return
	}
	m.acquires.WithLabelValues(job, outcome).Inc()
}

// Renew counts one renewal of job's lease (result "ok" or "failed") and
// observes how long the round took.
func (m *Metrics) Renew(job string, ok bool, latency time.Duration) {
	if m == nil {
		return
	}
	result := "ok"
	if !ok {
		result = "failed"
	}
	m.renews.WithLabelValues(job, result).Inc()
	m.renewTime.WithLabelValues(job).Observe(latency.Seconds())
}

// Abort counts a run of job cut short, by the reason its result gives:
// lease_lost, timeout, shutdown or paused for a run stopped for that
// reason (result aborted, timeout, shutdown, stopped); supervisor_lost
// or suspended (result aborted); limit_memory, limit_tasks or limit_cpu
// for a run that ran into its job's limit (result oom or limit). The
// scheduler counts a run once, when its result is known, so not a run
// stopped for its timeout or a pause --stop whose job had ended on its
// own before the stop was decided (its result is its exit's), and a run
// with a limit's result under the limit alone.
func (m *Metrics) Abort(job, reason string) {
	if m == nil {
		return
	}
	m.aborts.WithLabelValues(job, reason).Inc()
}

// Vote counts one answer of node to operation op (acquire, fence, extend,
// release, complete) with the node's vote as lease.Vote.String reports it
// (granted, refused, failed, not_voting) and observes the request's latency
// (for a failed request: the time until the error or the timeout).
func (m *Metrics) Vote(node, op, vote string, latency time.Duration) {
	if m == nil {
		return
	}
	m.requests.WithLabelValues(node, op, vote).Inc()
	m.nodeLatency.WithLabelValues(node).Observe(latency.Seconds())
}

// NodeUp records the result of a health ping of node. The ping latency is
// recorded only when the node answered.
func (m *Metrics) NodeUp(node string, up bool, latency time.Duration) {
	if m == nil {
		return
	}
	m.nodeUp.WithLabelValues(node).Set(boolFloat(up))
	if up {
		m.nodePing.WithLabelValues(node).Set(latency.Seconds())
	}
}

// NodeRestart counts a detected restart (or failover) of node.
func (m *Metrics) NodeRestart(node string) {
	if m == nil {
		return
	}
	m.restarts.WithLabelValues(node).Inc()
}

// TickDelay observes how late after its tick a run of job requested its
// lease. A negative d (a host whose clock leads fires early) counts as 0.
func (m *Metrics) TickDelay(job string, d time.Duration) {
	if m == nil {
		return
	}
	m.tickDelay.WithLabelValues(job).Observe(max(d, 0).Seconds())
}

// Running adds delta (+1 when a run starts, -1 when it ends) to the number
// of runs of job in progress on this host.
func (m *Metrics) Running(job string, delta int) {
	if m == nil {
		return
	}
	m.running.WithLabelValues(job).Add(float64(delta))
}

// QuorumHealthy records whether a quorum of nodes answered the last health
// check and votes.
func (m *Metrics) QuorumHealthy(ok bool) {
	if m == nil {
		return
	}
	m.quorum.Set(boolFloat(ok))
}

func boolFloat(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
