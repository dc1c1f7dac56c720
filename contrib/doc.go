// Package contrib holds no Go code: it is the home of the Grafana
// dashboard (grafana/leasecron.json) and the Prometheus alerting rules
// (prometheus/alerts.yaml, with promtool test cases in
// prometheus/alerts_test.yaml) for leasecron's metrics. Its tests check
// both with promtool and against the metrics the daemon registers.
package contrib
