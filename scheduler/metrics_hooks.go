package scheduler

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

// hookMetrics are the metrics of missed ticks and hooks:
//
//	leasecron_ticks_missed_total{job,reason}      ticks recorded as missed (or skipped: reason paused, overlap) by this host, once per tick across the fleet
//	leasecron_hooks_fired_total{job,event}        hooks delivered by this host
//	leasecron_hook_failures_total{job,event,reason} hooks that failed: failed (every try), queue_full, no_lease, not_running, shutdown
type hookMetrics struct {
	missed   *prometheus.CounterVec
	fired    *prometheus.CounterVec
	failures *prometheus.CounterVec
}

func newHookMetrics(f promauto.Factory, ns string) *hookMetrics {
	return &hookMetrics{
		missed: f.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "ticks_missed_total",
			Help: "Ticks whose deadline passed without a run, recorded by this host (once per tick across the fleet), by reason: no_quorum, no_eligible_host, all_full, data_younger, cannot_limit, other; paused and overlap are recorded as skipped."}, []string{"job", "reason"}),
		fired: f.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "hooks_fired_total",
			Help: "Hooks (on_start, on_success, on_failure, on_missed) delivered by this host, by event."}, []string{"job", "event"}),
		failures: f.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "hook_failures_total",
			Help: "Hooks that were not delivered, by event and reason: failed (every try failed), queue_full, no_lease (its lease could not be taken), not_running, shutdown."}, []string{"job", "event", "reason"}),
	}
}

// TickMissed counts a tick of job recorded as missed (or skipped) for
// reason.
func (m *Metrics) TickMissed(job, reason string) {
	if m == nil {
		return
	}
	m.hooks.missed.WithLabelValues(job, reason).Inc()
}

// HookFired counts a delivered hook of job's event.
func (m *Metrics) HookFired(job, event string) {
	if m == nil {
		return
	}
	m.hooks.fired.WithLabelValues(job, event).Inc()
}

// HookFailed counts a hook of job's event that was not delivered, for
// reason.
func (m *Metrics) HookFailed(job, event, reason string) {
	if m == nil {
		return
	}
	m.hooks.failures.WithLabelValues(job, event, reason).Inc()
}
