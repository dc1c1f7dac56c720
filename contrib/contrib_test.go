package contrib

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/leasecron/leasecron/scheduler"
)

// promtool returns Prometheus's rule checker, failing the test when it is
// missing (make deps installs Debian's prometheus package).
func promtool(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("promtool")
	if err != nil {
		t.Fatal("no promtool: install it (apt-get install prometheus, or make deps)")
	}
	return p
}

func run(t *testing.T, name string, args ...string) (string, error) {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	return string(out), err
}

// recorder is a prometheus.Registerer that notes the names of the metrics
// registered through it.
type recorder struct{ names map[string]bool }

func (r *recorder) Register(c prometheus.Collector) error {
	ch := make(chan *prometheus.Desc, 64)
	go func() { c.Describe(ch); close(ch) }()
	re := regexp.MustCompile(`fqName: "([^"]+)"`)
	for d := range ch {
		if m := re.FindStringSubmatch(d.String()); m != nil {
			r.names[m[1]] = true
		}
	}
	return nil
}

func (r *recorder) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		_ = r.Register(c)
	}
}

func (r *recorder) Unregister(prometheus.Collector) bool { return true }

// knownMetrics are the names the daemon exports: everything
// scheduler.NewMetrics registers, plus cmd/leasecron's build info.
func knownMetrics(t *testing.T) map[string]bool {
	r := &recorder{names: map[string]bool{"leasecron_build_info": true}}
	scheduler.NewMetrics(r)
	if len(r.names) < 10 {
		t.Fatalf("only %d metrics registered: %v", len(r.names), r.names)
	}
	return r.names
}

// checkMetricNames fails for every leasecron_* name in text that the
// daemon does not export (histogram series may end in _bucket, _sum or
// _count), and returns the names used.
func checkMetricNames(t *testing.T, where, text string, known map[string]bool) map[string]bool {
	t.Helper()
	used := map[string]bool{}
	for _, n := range regexp.MustCompile(`leasecron_[a-z_]+`).FindAllString(text, -1) {
		base := n
		for _, suf := range []string{"_bucket", "_sum", "_count"} {
			if !known[base] && strings.HasSuffix(base, suf) {
				base = strings.TrimSuffix(base, suf)
			}
		}
		if !known[base] {
			t.Errorf("%s uses %s, which leasecron does not export", where, n)
		}
		used[base] = true
	}
	return used
}

// TestAlertRules: prometheus/alerts.yaml passes `promtool check rules`,
// its cases in alerts_test.yaml pass `promtool test rules` (every alert
// fires on a failing fleet and stays quiet on a healthy one), and it uses
// only metrics the daemon exports. Negative control: with the quorum
// alert's condition inverted, the same cases fail.
func TestAlertRules(t *testing.T) {
	pt := promtool(t)
	if out, err := run(t, pt, "check", "rules", "prometheus/alerts.yaml"); err != nil {
		t.Fatalf("promtool check rules: %v\n%s", err, out)
	}
	if out, err := run(t, pt, "test", "rules", "prometheus/alerts_test.yaml"); err != nil {
		t.Fatalf("promtool test rules: %v\n%s", err, out)
	}
	rules, err := os.ReadFile("prometheus/alerts.yaml")
	if err != nil {
		t.Fatal(err)
	}
	used := checkMetricNames(t, "alerts.yaml", string(rules), knownMetrics(t))
	for _, want := range []string{"leasecron_quorum_healthy", "leasecron_runs_total", "leasecron_lease_acquire_total", "leasecron_job_aborts_total", "leasecron_lease_renew_total",
		"leasecron_ticks_missed_total", "leasecron_hook_failures_total"} {
		if !used[want] {
			t.Errorf("no alert uses %s", want)
		}
	}

	// Negative control: a broken rule is caught by the test cases.
	dir := t.TempDir()
	broken := strings.Replace(string(rules), "expr: leasecron_quorum_healthy == 0", "expr: leasecron_quorum_healthy == 1", 1)
	if broken == string(rules) {
		t.Fatal("negative control: the quorum rule's expression was not found")
	}
	tests, err := os.ReadFile("prometheus/alerts_test.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for name, text := range map[string]string{"alerts.yaml": broken, "alerts_test.yaml": string(tests)} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	out, err := run(t, pt, "test", "rules", filepath.Join(dir, "alerts_test.yaml"))
	if err == nil || !strings.Contains(out, "LeasecronQuorumLost") {
		t.Errorf("negative control: promtool test rules passed an inverted quorum alert: %v\n%s", err, out)
	}
}

// dashboard is the part of a Grafana dashboard the test reads.
type dashboard struct {
	UID        string `json:"uid"`
	Title      string `json:"title"`
	Schema     int    `json:"schemaVersion"`
	Templating struct {
		List []struct {
			Name string `json:"name"`
		} `json:"list"`
	} `json:"templating"`
	Panels []struct {
		ID      int    `json:"id"`
		Type    string `json:"type"`
		Title   string `json:"title"`
		GridPos struct {
			H, W, X, Y int
		} `json:"gridPos"`
		Datasource *struct {
			UID string `json:"uid"`
		} `json:"datasource"`
		Targets []struct {
			Expr string `json:"expr"`
		} `json:"targets"`
	} `json:"panels"`
}

// TestGrafanaDashboard: grafana/leasecron.json is a dashboard whose
// panels each query the selected data source with PromQL that promtool
// parses (Grafana's variables substituted), using only metrics leasecron
// exports, and that covers runs and failures per job, lease outcomes,
// renew latency, node health and votes, abort reasons and tick delay.
func TestGrafanaDashboard(t *testing.T) {
	b, err := os.ReadFile("grafana/leasecron.json")
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("grafana/leasecron.json: %v", err)
	}
	if d.UID == "" || d.Title == "" || d.Schema < 30 {
		t.Errorf("uid %q, title %q, schemaVersion %d", d.UID, d.Title, d.Schema)
	}
	vars := map[string]bool{}
	for _, v := range d.Templating.List {
		vars[v.Name] = true
	}
	for _, v := range []string{"datasource", "instance", "job"} {
		if !vars[v] {
			t.Errorf("no $%s variable", v)
		}
	}
	known := knownMetrics(t)
	used := map[string]bool{}
	ids := map[int]bool{}
	var rules strings.Builder
	rules.WriteString("groups:\n  - name: dashboard\n    rules:\n")
	subst := strings.NewReplacer("$__rate_interval", "5m", "$instance", ".*", "$job", ".*")
	n := 0
	for _, p := range d.Panels {
		if ids[p.ID] {
			t.Errorf("panel id %d twice", p.ID)
		}
		ids[p.ID] = true
		if p.Type == "row" {
			continue
		}
		if p.Title == "" || p.GridPos.W == 0 || p.GridPos.H == 0 || p.GridPos.X+p.GridPos.W > 24 {
			t.Errorf("panel %d %q: bad title or position %+v", p.ID, p.Title, p.GridPos)
		}
		if p.Datasource == nil || p.Datasource.UID != "${datasource}" {
			t.Errorf("panel %q does not use the $datasource variable", p.Title)
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			for k := range checkMetricNames(t, "panel "+p.Title, tg.Expr, known) {
				used[k] = true
			}
			if strings.Contains(subst.Replace(tg.Expr), "$") {
				t.Errorf("panel %q: unknown variable in %s", p.Title, tg.Expr)
			}
			n++
			fmt.Fprintf(&rules, "      - record: dashboard:expr%d\n        expr: %q\n", n, subst.Replace(tg.Expr))
		}
	}
	for _, want := range []string{
		"leasecron_runs_total", "leasecron_lease_acquire_total", "leasecron_lease_renew_seconds",
		"leasecron_node_up", "leasecron_node_requests_total", "leasecron_job_aborts_total",
		"leasecron_tick_start_delay_seconds", "leasecron_quorum_healthy",
		"leasecron_ticks_missed_total", "leasecron_hooks_fired_total", "leasecron_hook_failures_total",
	} {
		if !used[want] {
			t.Errorf("no panel shows %s", want)
		}
	}
	if t.Failed() {
		names := make([]string, 0, len(used))
		for k := range used {
			names = append(names, k)
		}
		sort.Strings(names)
		t.Logf("metrics used: %v", names)
	}
	// Every query parses: promtool checks them as recording rules.
	path := filepath.Join(t.TempDir(), "dashboard-rules.yaml")
	if err := os.WriteFile(path, []byte(rules.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := run(t, promtool(t), "check", "rules", path); err != nil {
		t.Errorf("the dashboard's queries do not parse: %v\n%s", err, out)
	}
}
