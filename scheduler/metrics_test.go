package scheduler

import (
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// gathered is one sample of a gathered metric: its labels ("k=v,k=v",
// sorted) and its value (counter/gauge value, or histogram sample count).
type gathered map[string]map[string]float64

func gather(t *testing.T, reg *prometheus.Registry) gathered {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	out := gathered{}
	for _, mf := range mfs {
		series := map[string]float64{}
		for _, m := range mf.GetMetric() {
			var labels []string
			for _, lp := range m.GetLabel() {
				labels = append(labels, lp.GetName()+"="+lp.GetValue())
			}
			sort.Strings(labels)
			var v float64
			switch {
			case m.GetCounter() != nil:
				v = m.GetCounter().GetValue()
			case m.GetGauge() != nil:
				v = m.GetGauge().GetValue()
			case m.GetHistogram() != nil:
				v = float64(m.GetHistogram().GetSampleCount())
			}
			series[strings.Join(labels, ",")] = v
		}
		out[mf.GetName()] = series
	}
	return out
}

func TestMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg)
	node := "redis://127.0.0.1:7001/0"

	m.RunFinished("a", "ok", 2*time.Second)
	m.RunFinished("a", "ok", time.Second)
	m.RunFinished("a", "skipped", 0)
	m.Acquire("a", "won")
	m.Acquire("a", "held")
	m.Acquire("a", "held")
	m.Renew("a", true, 3*time.Millisecond)
	m.Renew("a", false, 50*time.Millisecond)
	m.Abort("a", "lease_lost")
	m.Vote(node, "acquire", "granted", time.Millisecond)
	m.NodeUp(node, true, 2*time.Millisecond)
	m.NodeUp("redis://127.0.0.1:7002/0", false, 0)
	m.NodeRestart(node)
	m.TickDelay("a", -time.Second) // early: counted as 0
	m.Running("a", 1)
	m.Running("a", 1)
	m.Running("a", -1)
	m.QuorumHealthy(true)

	got := gather(t, reg)
	want := []struct {
		name, labels string
		value        float64
	}{
		{"leasecron_runs_total", "job=a,result=ok", 2},
		{"leasecron_runs_total", "job=a,result=skipped", 1},
		{"leasecron_run_duration_seconds", "job=a", 2}, // skipped not observed
		{"leasecron_lease_acquire_total", "job=a,outcome=won", 1},
		{"leasecron_lease_acquire_total", "job=a,outcome=held", 2},
		{"leasecron_lease_renew_total", "job=a,result=ok", 1},
		{"leasecron_lease_renew_total", "job=a,result=failed", 1},
		{"leasecron_lease_renew_seconds", "job=a", 2},
		{"leasecron_job_aborts_total", "job=a,reason=lease_lost", 1},
		{"leasecron_node_requests_total", "node=" + node + ",op=acquire,vote=granted", 1},
		{"leasecron_node_latency_seconds", "node=" + node, 1},
		{"leasecron_node_up", "node=" + node, 1},
		{"leasecron_node_up", "node=redis://127.0.0.1:7002/0", 0},
		{"leasecron_node_ping_seconds", "node=" + node, 0.002},
		{"leasecron_node_restarts_total", "node=" + node, 1},
		{"leasecron_tick_start_delay_seconds", "job=a", 1},
		{"leasecron_jobs_running", "job=a", 1},
		{"leasecron_quorum_healthy", "", 1},
	}
	for _, w := range want {
		series, ok := got[w.name]
		if !ok {
			t.Errorf("metric %s not registered", w.name)
			continue
		}
		v, ok := series[w.labels]
		if !ok {
			t.Errorf("%s{%s} missing; have %v", w.name, w.labels, series)
			continue
		}
		if v != w.value {
			t.Errorf("%s{%s} = %v, want %v", w.name, w.labels, v, w.value)
		}
	}
	if _, ok := got["leasecron_node_ping_seconds"]["node=redis://127.0.0.1:7002/0"]; ok {
		t.Errorf("ping latency recorded for a node that did not answer")
	}

	// The early tick was observed as 0 (in the lowest bucket, sum 0).
	mfs, _ := reg.Gather()
	for _, mf := range mfs {
		if mf.GetName() == "leasecron_tick_start_delay_seconds" {
			if s := mf.GetMetric()[0].GetHistogram().GetSampleSum(); s != 0 {
				t.Errorf("tick delay sum = %v, want 0 (negative delays count as 0)", s)
			}
		}
	}
}

// TestMetricsNil pins the documented nil-receiver safety.
func TestMetricsNil(t *testing.T) {
	var m *Metrics
	m.RunFinished("a", "ok", time.Second)
	m.Acquire("a", "won")
	m.Renew("a", true, time.Millisecond)
	m.Abort("a", "timeout")
	m.Vote("n", "acquire", "granted", time.Millisecond)
	m.NodeUp("n", true, time.Millisecond)
	m.NodeRestart("n")
	m.TickDelay("a", time.Second)
	m.Running("a", 1)
	m.QuorumHealthy(true)
}

// TestMetricsNilRegisterer: a nil Registerer registers nothing and the
// metrics still work.
func TestMetricsNilRegisterer(t *testing.T) {
	m := NewMetrics(nil)
	m.RunFinished("a", "ok", time.Second)
	m.QuorumHealthy(true)
}

// TestMetricsDoubleRegister: a second Metrics on the same registry panics,
// as documented.
func TestMetricsDoubleRegister(t *testing.T) {
	reg := prometheus.NewRegistry()
	NewMetrics(reg)
	defer func() {
		if recover() == nil {
			t.Errorf("second NewMetrics on the same registry did not panic")
		}
	}()
	NewMetrics(reg)
}
