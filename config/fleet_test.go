package config

import (
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestFleetKeys: every key of "Operating a fleet" is read from a job and
// from the defaults section, with the documented defaults when unset.
func TestFleetKeys(t *testing.T) {
	c := mustParse(t, node1+`max_parallel: 4
heartbeat: 2s
defaults:
  retries: 1
  history_limit: 20
  run_on: {labels: {role: db}}
jobs:
  - name: a
    schedule: "@hourly"
    shell: "true"
  - name: b
    schedule: "*/5 * * * *"
    shell: "true"
    retries: 3
    retry_backoff: 2s
    retry_on_timeout: true
    history_limit: 7
    run_on:
      labels: {role: web, zone: eu-1}
      hosts: ["web-*", "db[12]"]
    candidates: 0
    standby_delay: 3s
    jitter: 90s
    deadline: 4m
`)
	if c.MaxParallel != 4 || c.Heartbeat != 2*time.Second {
		t.Errorf("max_parallel %d heartbeat %s, want 4, 2s", c.MaxParallel, c.Heartbeat)
	}
	a, b := c.Job("a"), c.Job("b")
	if a.Retries != 1 || a.RetryBackoff != 10*time.Second || a.RetryOnTimeout || a.HistoryLimit != 20 ||
		!reflect.DeepEqual(a.RunOn, RunOn{Labels: map[string]string{"role": "db"}}) || a.Candidates != 3 || a.StandbyDelay != 0 || a.Jitter != 0 {
		t.Errorf("job a (defaults): %+v", a)
	}
	want := RunOn{Labels: map[string]string{"role": "web", "zone": "eu-1"}, Hosts: []string{"web-*", "db[12]"}}
	if b.Retries != 3 || b.RetryBackoff != 2*time.Second || !b.RetryOnTimeout || b.HistoryLimit != 7 ||
		!reflect.DeepEqual(b.RunOn, want) || b.Candidates != 0 || b.StandbyDelay != 3*time.Second || b.Jitter != 90*time.Second {
		t.Errorf("job b: %+v", b)
	}
	d := mustParse(t, node1+job1)
	if j := d.Job("a"); j.Retries != 0 || j.RetryBackoff != 10*time.Second || j.HistoryLimit != 50 || j.Candidates != 3 ||
		j.StandbyDelay != 0 || j.Jitter != 0 || j.RetryOnTimeout || len(j.RunOn.Hosts) != 0 || len(j.RunOn.Labels) != 0 {
		t.Errorf("fleet defaults: %+v", j)
	}
	if d.MaxParallel != 0 || d.Heartbeat != 5*time.Second {
		t.Errorf("top-level defaults: max_parallel %d heartbeat %s", d.MaxParallel, d.Heartbeat)
	}
}

// TestFleetKeysBad: each bad fleet key is reported with its file, line
// and field.
func TestFleetKeysBad(t *testing.T) {
	job := func(extra string) string {
		return node1 + "jobs:\n  - name: a\n    schedule: \"@hourly\"\n    shell: \"true\"\n" + extra
	}
	for _, c := range []struct {
		name, text string
		line       int
		field      string
		mention    string
	}{
		{"negative retries", job("    retries: -1\n"), 8, "jobs[0].retries", "want 0 to 100"},
		{"retries not a number", job("    retries: many\n"), 8, "jobs[0].retries", "whole number"},
		{"negative backoff", job("    retry_backoff: -1s\n"), 8, "jobs[0].retry_backoff", "negative"},
		{"retry_on_timeout yes", job("    retry_on_timeout: yes\n"), 8, "jobs[0].retry_on_timeout", "true or false"},
		{"history_limit -1", job("    history_limit: -1\n"), 8, "jobs[0].history_limit", "want 1 to 10000"},
		{"history_limit too big", job("    history_limit: 10001\n"), 8, "jobs[0].history_limit", "want 1 to 10000"},
		{"negative candidates", job("    candidates: -2\n"), 8, "jobs[0].candidates", "want 0"},
		{"bad host pattern", job("    run_on:\n      hosts: [\"web-[\"]\n"), 8, "jobs[0].run_on", "bad host pattern"},
		{"bad label key", job("    run_on:\n      labels: {\"ro le\": db}\n"), 8, "jobs[0].run_on", "label key"},
		{"run_on unknown key", job("    run_on:\n      label: {role: db}\n"), 9, "jobs[0].run_on.label", "allowed: labels, hosts"},
		{"run_on hosts not a list", job("    run_on:\n      hosts: web-1\n"), 9, "jobs[0].run_on.hosts", "must be a list of host name patterns"},
		{"jitter past deadline", job("    jitter: 2h\n"), 8, "jobs[0].jitter", "shorter than the tick's deadline"},
		{"negative standby", job("    standby_delay: -1s\n"), 8, "jobs[0].standby_delay", "negative"},
		{"negative max_parallel", job("max_parallel: -1\n"), 8, "max_parallel", "negative"},
		{"zero heartbeat", job("heartbeat: 0s\n"), 8, "heartbeat", "at least 100ms"},
		{"defaults retries bad", node1 + "defaults:\n  retries: 101\n" + job1, 5, "defaults.retries", "want 0 to 100"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse(strings.NewReader(c.text), "jobs.yaml")
			if err == nil {
				t.Fatalf("no error for:\n%s", c.text)
			}
			prefix := "jobs.yaml:" + strconv.Itoa(c.line) + ": " + c.field + ": "
			for _, line := range strings.Split(err.Error(), "\n") {
				if strings.HasPrefix(line, prefix) && strings.Contains(line, c.mention) {
					return
				}
			}
			t.Errorf("no error starting %q and mentioning %q in:\n%v", prefix, c.mention, err)
		})
	}
}

// TestRunOnEligible: labels must all match, hosts patterns any.
func TestRunOnEligible(t *testing.T) {
	r := RunOn{Labels: map[string]string{"role": "db"}, Hosts: []string{"web-*", "db[12]"}}
	for _, c := range []struct {
		host   string
		labels map[string]string
		want   bool
	}{
		{"web-3", map[string]string{"role": "db"}, true},
		{"db2", map[string]string{"role": "db", "zone": "x"}, true},
		{"db3", map[string]string{"role": "db"}, false},
		{"web-3", map[string]string{"role": "web"}, false},
		{"web-3", nil, false},
	} {
		if got := r.Eligible(c.host, c.labels); got != c.want {
			t.Errorf("Eligible(%s, %v) = %v, want %v", c.host, c.labels, got, c.want)
		}
	}
	if !(RunOn{}).Eligible("any", nil) {
		t.Errorf("the zero RunOn refuses a host")
	}
}

// TestParseLabels: "k=v,k2=v2", spaces trimmed, bad items named.
func TestParseLabels(t *testing.T) {
	m := map[string]string{}
	if err := ParseLabels(m, " role=db, zone=eu-1 ,,topology.io/rack=r7"); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(m, map[string]string{"role": "db", "zone": "eu-1", "topology.io/rack": "r7"}) {
		t.Errorf("labels %v", m)
	}
	for _, bad := range []string{"role", "=db", "ro le=db", "role=d=b"} {
		if err := ParseLabels(map[string]string{}, bad); err == nil {
			t.Errorf("ParseLabels(%q) accepted it", bad)
		}
	}
}

// TestJitterStandbyRetryWait: the jitter is the same for every host and
// within [0, jitter); standby delay defaults to a tenth of the deadline
// within [1s, 1m]; the retry backoff doubles up to its cap.
func TestJitterStandbyRetryWait(t *testing.T) {
	c := mustParse(t, node1+"jobs:\n  - {name: a, schedule: \"@every 10m\", shell: \"true\", jitter: 1m}\n  - {name: b, schedule: \"@every 10m\", shell: \"true\", jitter: 1m}\n")
	a, b := c.Job("a"), c.Job("b")
	tick := time.Unix(1_800_000_000, 0)
	seen := map[time.Duration]bool{}
	for i := range 50 {
		tk := tick.Add(time.Duration(i) * 10 * time.Minute)
		d := a.JitterFor(tk)
		if d < 0 || d >= time.Minute || d != a.JitterFor(tk) {
			t.Fatalf("JitterFor(%s) = %s", tk, d)
		}
		seen[d] = true
	}
	if len(seen) < 40 || a.JitterFor(tick) == b.JitterFor(tick) {
		t.Errorf("jitter does not spread: %d distinct of 50; a %s b %s", len(seen), a.JitterFor(tick), b.JitterFor(tick))
	}
	if got := a.StandbyAfter(tick); got != time.Minute {
		t.Errorf("standby after for a 10m deadline = %s, want 1m", got)
	}
	short := mustParse(t, node1+"jobs:\n  - {name: s, schedule: \"@every 5s\", shell: \"true\"}\n").Job("s")
	if got := short.StandbyAfter(tick); got != time.Second {
		t.Errorf("standby after for a 5s deadline = %s, want 1s", got)
	}
	// A cron spec whose ticks are closer than its jitter: the delay
	// leaves a second of each tick's window.
	close := mustParse(t, node1+"jobs:\n  - {name: c, schedule: \"0 1,23 * * *\", shell: \"true\", jitter: 3h}\n").Job("c")
	for d := range 60 {
		tk := time.Date(2026, 1, 1+d, 23, 0, 0, 0, time.UTC)
		if got := close.JitterFor(tk); got >= 2*time.Hour-time.Second {
			t.Fatalf("JitterFor(%s) = %s, past the tick's 2h window minus 1s", tk, got)
		}
	}
	j := &Job{RetryBackoff: 10 * time.Second}
	for n, want := range map[int]time.Duration{1: 10 * time.Second, 2: 20 * time.Second, 3: 40 * time.Second, 12: 10 * time.Minute} {
		if got := j.RetryWait(n); got != want {
			t.Errorf("RetryWait(%d) = %s, want %s", n, got, want)
		}
	}
}
