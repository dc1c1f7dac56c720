package config

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"
)

// node1 is the smallest redis section.
const node1 = "redis:\n  nodes:\n    - redis://127.0.0.1:6379/0\n"

// job1 is the smallest jobs section.
const job1 = "jobs:\n  - name: a\n    schedule: \"@hourly\"\n    shell: \"true\"\n"

func parse(t *testing.T, text string) (*Config, error) {
	t.Helper()
	return Parse(strings.NewReader(text), "jobs.yaml")
}

func mustParse(t *testing.T, text string) *Config {
	t.Helper()
	c, err := parse(t, text)
	if err != nil {
		t.Fatalf("Parse:\n%v\nconfig:\n%s", err, text)
	}
	return c
}

// configErrors returns the *Error values joined in err.
func configErrors(t *testing.T, err error) []*Error {
	t.Helper()
	var out []*Error
	var walk func(error)
	walk = func(e error) {
		if j, ok := e.(interface{ Unwrap() []error }); ok {
			for _, e := range j.Unwrap() {
				walk(e)
			}
			return
		}
		var ce *Error
		if !errors.As(e, &ce) {
			t.Errorf("error %q (%T) is not a *Error", e, e)
			return
		}
		out = append(out, ce)
	}
	walk(err)
	return out
}

// TestDefaults pins every documented default: Default's, the sections', and what
// Parse gives a job that sets nothing but name, schedule and shell.
func TestDefaults(t *testing.T) {
	host, _ := os.Hostname()
	d := Default()
	want := &Config{
		ID:            host,
		Lease:         LeaseConfig{TTL: 30 * time.Second, Renew: 10 * time.Second, Drift: 0.01},
		ShutdownGrace: 30 * time.Second,
		Heartbeat:     5 * time.Second,
	}
	if !reflect.DeepEqual(d, want) {
		t.Errorf("Default() = %+v, want %+v", d, want)
	}
	for got, want := range map[Section]Section{
		NewRedis():      &RedisConfig{Prefix: "leasecron", Timeout: 50 * time.Millisecond},
		NewPostgres(""): &PostgresConfig{Table: "leasecron_leases", Timeout: 2 * time.Second},
		NewMySQL(""):    &MySQLConfig{Table: "leasecron_leases", Timeout: 2 * time.Second},
		NewEtcd():       &EtcdConfig{Prefix: "/leasecron/", Timeout: 500 * time.Millisecond},
		NewZooKeeper():  &ZooKeeperConfig{Root: "/leasecron", Timeout: time.Second},
	} {
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s defaults %+v, want %+v", got.Name(), got, want)
		}
	}

	c := mustParse(t, node1+job1)
	if c.ID != host || c.ID == "" {
		t.Errorf("ID = %q, want the hostname %q", c.ID, host)
	}
	if c.File != "jobs.yaml" {
		t.Errorf("File = %q", c.File)
	}
	if c.redis().Prefix != "leasecron" || c.redis().Timeout != 50*time.Millisecond {
		t.Errorf("Redis = %+v, want prefix leasecron, timeout 50ms", c.redis())
	}
	if c.Lease != (LeaseConfig{TTL: 30 * time.Second, Renew: 10 * time.Second, Drift: 0.01}) {
		t.Errorf("Lease = %+v, want ttl 30s, renew 10s, drift 0.01", c.Lease)
	}
	if c.ShutdownGrace != 30*time.Second {
		t.Errorf("ShutdownGrace = %s, want 30s", c.ShutdownGrace)
	}
	if len(c.Warnings) != 0 {
		t.Errorf("Warnings = %q", c.Warnings)
	}
	j := c.Job("a")
	if j == nil {
		t.Fatal("job a missing")
	}
	if j.KillGrace != 5*time.Second || j.Timezone != "UTC" || j.Overlap != OverlapSkip ||
		j.Timeout != 0 || j.Deadline != 0 || j.Env != nil || j.Dir != "" || j.Command != nil {
		t.Errorf("job defaults: %+v; want kill_grace 5s, timezone UTC, overlap skip, no timeout/deadline/env/dir", j)
	}
	if j.Line != 5 {
		t.Errorf("job Line = %d, want 5", j.Line)
	}

	// renew defaults to ttl/3 of the ttl in the file.
	c = mustParse(t, node1+job1+"lease:\n  ttl: 12s\n")
	if c.Lease.Renew != 4*time.Second {
		t.Errorf("renew with ttl 12s = %s, want 4s", c.Lease.Renew)
	}
	// id: "" is the hostname too.
	c = mustParse(t, node1+job1+"id: \"\"\n")
	if c.ID != host {
		t.Errorf("id \"\": ID = %q, want %q", c.ID, host)
	}
	// Overlap spells as in yaml.
	if OverlapSkip.String() != "skip" || OverlapWait.String() != "wait" || OverlapSkip != 0 {
		t.Errorf("Overlap strings: %s %s", OverlapSkip, OverlapWait)
	}
}

func TestParseFull(t *testing.T) {
	c, err := Load(filepath.Join("testdata", "full.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if c.File != filepath.Join("testdata", "full.yaml") || c.ID != "host-a" {
		t.Errorf("File %q ID %q", c.File, c.ID)
	}
	if want := (RedisConfig{Nodes: []string{
		"redis://127.0.0.1:7001/0",
		"rediss://ops:s3cret@redis-2.example.net:6380/1",
		"redis+sentinel://10.0.0.3:26379?master_name=lease&addr=10.0.0.4:26379",
	}, Prefix: "lc", Timeout: 100 * time.Millisecond}); !reflect.DeepEqual(*c.redis(), want) {
		t.Errorf("Redis = %+v", c.redis())
	}
	if c.Lease != (LeaseConfig{TTL: 20 * time.Second, Renew: 5 * time.Second, Drift: 0.02}) {
		t.Errorf("Lease = %+v", c.Lease)
	}
	if c.ShutdownGrace != time.Minute {
		t.Errorf("ShutdownGrace = %s", c.ShutdownGrace)
	}
	if len(c.Jobs) != 5 || len(c.Warnings) != 0 {
		t.Fatalf("%d jobs, warnings %q", len(c.Jobs), c.Warnings)
	}
	// Every field set by the job itself.
	inv := c.Jobs[0]
	want := &Job{
		Name: "inventory-sync", Schedule: "*/5 * * * *",
		Command: []string{"/usr/local/bin/sync-inventory", "--full"},
		Timeout: 4 * time.Minute, Overlap: OverlapSkip, Deadline: 2 * time.Minute,
		KillGrace: 3 * time.Second, Timezone: "Europe/Berlin",
		Env: map[string]string{"REGION": "eu-2", "TIER": "batch"}, Dir: "/var/lib/inventory",
		Line: 25, RetryBackoff: 10 * time.Second, HistoryLimit: 50, Candidates: 3,
	}
	inv2 := *inv
	inv2.sched, inv2.path = nil, ""
	if !reflect.DeepEqual(&inv2, want) {
		t.Errorf("jobs[0] =\n%+v, want\n%+v", &inv2, want)
	}
	// Every default-able field from the defaults section.
	rep := c.Job("nightly.report")
	if rep.Shell != "/usr/local/bin/report --yesterday" || rep.KillGrace != 10*time.Second ||
		rep.Timezone != "Europe/Berlin" || rep.Timeout != 10*time.Minute || rep.Overlap != OverlapWait ||
		rep.Deadline != time.Minute || rep.Dir != "/var/lib/leasecron" ||
		!reflect.DeepEqual(rep.Env, map[string]string{"REGION": "eu-1", "TIER": "batch"}) {
		t.Errorf("nightly.report = %+v", rep)
	}
	// The defaults' env map is not shared between jobs.
	rep.Env["X"] = "1"
	if _, ok := c.Job("hourly").Env["X"]; ok {
		t.Error("jobs share the defaults' env map")
	}
	if hb := c.Job("heartbeat_1"); hb.Timezone != "UTC" {
		t.Errorf("heartbeat_1 timezone %q", hb.Timezone)
	}
	// Every job has a compiled schedule.
	now := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	for _, j := range c.Jobs {
		if j.Next(now).IsZero() {
			t.Errorf("%s: no next tick", j.Name)
		}
	}
	// CRON_TZ wins over the job's zone: 02:30 New York (EDT) is 06:30 UTC.
	if got, want := rep.Next(now), time.Date(2025, 6, 2, 6, 30, 0, 0, time.UTC); !got.Equal(want) {
		t.Errorf("nightly.report next = %s, want %s", got, want)
	}
	// The job's zone: */5 minutes is the same anywhere; the 6-field spec
	// fires at second 15 of every other minute.
	if got, want := c.Job("seconds").Next(now), now.Add(15*time.Second); !got.Equal(want) {
		t.Errorf("seconds next = %s, want %s", got, want)
	}
}

// TestOverrides: each default-able field, set in defaults only, in the job
// only, and in both (the job wins).
func TestOverrides(t *testing.T) {
	for _, tc := range []struct {
		key, def, job string
		get           func(*Job) any
		builtin, d, j any
	}{
		{"timezone", "Europe/Berlin", "Asia/Tokyo", func(j *Job) any { return j.Timezone }, "UTC", "Europe/Berlin", "Asia/Tokyo"},
		{"kill_grace", "2s", "7s", func(j *Job) any { return j.KillGrace }, 5 * time.Second, 2 * time.Second, 7 * time.Second},
		{"timeout", "1m", "0s", func(j *Job) any { return j.Timeout }, time.Duration(0), time.Minute, time.Duration(0)},
		{"overlap", "wait", "skip", func(j *Job) any { return j.Overlap }, OverlapSkip, OverlapWait, OverlapSkip},
		{"deadline", "30s", "2m", func(j *Job) any { return j.Deadline }, time.Duration(0), 30 * time.Second, 2 * time.Minute},
		{"dir", "/srv", "/tmp", func(j *Job) any { return j.Dir }, "", "/srv", "/tmp"},
		{"env", "{A: '1', B: '2'}", "{B: '3'}", func(j *Job) any { return j.Env }, map[string]string(nil),
			map[string]string{"A": "1", "B": "2"}, map[string]string{"A": "1", "B": "3"}},
	} {
		t.Run(tc.key, func(t *testing.T) {
			defs := "defaults:\n  " + tc.key + ": " + tc.def + "\n"
			jobs := "jobs:\n" +
				"  - {name: plain, schedule: '@hourly', shell: 'true'}\n" +
				"  - {name: own, schedule: '@hourly', shell: 'true', " + tc.key + ": " + tc.job + "}\n"
			c := mustParse(t, node1+jobs)
			if got := tc.get(c.Job("plain")); !reflect.DeepEqual(got, tc.builtin) {
				t.Errorf("built-in default %v, want %v", got, tc.builtin)
			}
			c = mustParse(t, node1+defs+jobs)
			if got := tc.get(c.Job("plain")); !reflect.DeepEqual(got, tc.d) {
				t.Errorf("from defaults %v, want %v", got, tc.d)
			}
			if got := tc.get(c.Job("own")); !reflect.DeepEqual(got, tc.j) {
				t.Errorf("job's own %v, want %v", got, tc.j)
			}
		})
	}
}

func TestParseGood(t *testing.T) {
	for _, tc := range []struct {
		name, config string
		check        func(t *testing.T, c *Config)
	}{
		{"empty jobs warns", node1, func(t *testing.T, c *Config) {
			if len(c.Jobs) != 0 || len(c.Warnings) != 1 || !strings.Contains(c.Warnings[0], "no jobs") {
				t.Errorf("jobs %d warnings %q", len(c.Jobs), c.Warnings)
			}
		}},
		{"even nodes warn", "redis:\n  nodes: [redis://a:1, redis://b:1, redis://c:1, redis://d:1]\n" + job1, func(t *testing.T, c *Config) {
			if len(c.Warnings) != 1 || !strings.HasPrefix(c.Warnings[0], "jobs.yaml:2: redis.nodes: 4 nodes") {
				t.Errorf("warnings %q", c.Warnings)
			}
		}},
		{"all node kinds", "redis:\n  nodes:\n" +
			"    - redis://h1:6379\n    - rediss://u:p@h2:6380/3\n    - REDIS://[::1]:7000\n" +
			"    - redis+sentinel://s1:26379/0?master_name=m&addr=s2:26379\n    - redis+cluster://c1:7000?addr=c2:7000\n" + job1,
			func(t *testing.T, c *Config) {
				if len(c.redis().Nodes) != 5 {
					t.Errorf("nodes %q", c.redis().Nodes)
				}
			}},
		{"same host, other sentinel master", "redis:\n  nodes:\n    - redis+sentinel://s:26379?master_name=a\n    - redis+sentinel://s:26379?master_name=b\n    - redis://x\n" + job1, nil},
		{"command exec form", node1 + "jobs:\n  - name: a\n    schedule: '@daily'\n    command:\n      - /bin/echo\n      - \"\"\n      - 42\n", func(t *testing.T, c *Config) {
			if got := c.Jobs[0].Command; !reflect.DeepEqual(got, []string{"/bin/echo", "", "42"}) {
				t.Errorf("command %q", got)
			}
		}},
		{"scalars as written", node1 + "jobs:\n  - name: 123\n    schedule: '@daily'\n    shell: true\n    env: {N: 1.50, Y: yes, E: }\n", func(t *testing.T, c *Config) {
			j := c.Jobs[0]
			if j.Name != "123" || j.Shell != "true" || !reflect.DeepEqual(j.Env, map[string]string{"N": "1.50", "Y": "yes", "E": ""}) {
				t.Errorf("job %+v", j)
			}
		}},
		{"nulls are unset", node1 + "id:\nlease:\n  ttl: 12s\n  renew: ~\nshutdown_grace:\ndefaults:\njobs:\n  - name: a\n    schedule: '@daily'\n    shell: x\n    timeout:\n    env:\n", func(t *testing.T, c *Config) {
			if c.Lease.Renew != 4*time.Second || c.ShutdownGrace != 30*time.Second || c.Jobs[0].Env != nil {
				t.Errorf("config %+v", c)
			}
		}},
		{"zero durations", node1 + "shutdown_grace: 0s\njobs:\n  - name: a\n    schedule: '@daily'\n    shell: x\n    timeout: 0\n    deadline: 0s\n    kill_grace: 0s\n", func(t *testing.T, c *Config) {
			j := c.Jobs[0]
			if c.ShutdownGrace != 0 || j.Timeout != 0 || j.Deadline != 0 || j.KillGrace != 0 {
				t.Errorf("config %+v job %+v", c, j)
			}
		}},
		{"merge keys", node1 + "jobs:\n  - &base {name: a, schedule: '@daily', shell: x, timeout: 1m, env: {K: v}}\n" +
			"  - <<: *base\n    name: b\n    timeout: 2m\n  - <<: [{name: c, timeout: 3m}, *base]\n", func(t *testing.T, c *Config) {
			if len(c.Jobs) != 3 {
				t.Fatalf("%d jobs", len(c.Jobs))
			}
			b, cc := c.Job("b"), c.Job("c")
			if b == nil || b.Timeout != 2*time.Minute || b.Shell != "x" || b.Env["K"] != "v" {
				t.Errorf("b = %+v", b)
			}
			if cc == nil || cc.Timeout != 3*time.Minute || cc.Schedule != "@daily" {
				t.Errorf("c = %+v", cc)
			}
		}},
		{"ttl rule within its limit", // 10s×0.99 = 9.9s >= 3.333s + 5s + (0.2s + 0.1s) + 0.1s = 8.733s
			node1 + job1 + "lease:\n  ttl: 10s\n", nil},
		{"local timezone warns", node1 + "jobs:\n  - {name: a, schedule: '0 3 * * *', shell: x, timezone: Local}\n", func(t *testing.T, c *Config) {
			if len(c.Warnings) != 1 || !strings.Contains(c.Warnings[0], "jobs[0].timezone") {
				t.Errorf("warnings %q", c.Warnings)
			}
		}},
		{"comments and document marker", "# leasecron\n---\n" + node1 + job1 + "...\n", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := mustParse(t, tc.config)
			if err := c.Validate(); err != nil {
				t.Errorf("re-Validate: %v", err)
			}
			if tc.check != nil {
				tc.check(t, c)
			}
		})
	}
}

func TestParseBad(t *testing.T) {
	for _, tc := range []struct {
		name, config string
		line         int
		field        string
		want         string // in the message
	}{
		{"not yaml", "redis: [\n", 1, "", "not valid YAML"},
		{"two documents", node1 + job1 + "---\nid: x\n", 8, "", "more than one YAML document"},
		{"not a mapping", "- a\n- b\n", 1, "", "must be a mapping"},
		{"unknown top key", node1 + job1 + "no_such_key: 1\n", 8, "no_such_key", "allowed: id, redis, postgres, mysql, etcd, zookeeper, lease, shutdown_grace, max_parallel, heartbeat, defaults, jobs"},
		{"unknown job key", node1 + job1 + "    comand: [x]\n", 8, "jobs[0].comand", `did you mean "command"?`},
		{"unknown redis key", "redis:\n  nodes: [redis://a]\n  pasword: x\n" + job1, 3, "redis.pasword", "allowed: nodes, prefix, timeout"},
		{"unknown lease key", node1 + job1 + "lease:\n  tll: 3s\n", 9, "lease.tll", `"ttl"`},
		{"unknown defaults key", node1 + job1 + "defaults:\n  name: x\n", 9, "defaults.name", "allowed: timezone, kill_grace"},
		{"duplicate key", node1 + job1 + "    shell: again\n", 8, "jobs[0].shell", "duplicate key \"shell\" (first at line 7)"},
		{"no backend section", job1, 0, "", "no backend section: add one of redis, postgres"},
		{"no nodes", "redis:\n" + job1, 1, "redis.nodes", "at least one Redis node"},
		{"empty nodes", "redis:\n  nodes: []\n" + job1, 2, "redis.nodes", "at least one"},
		{"nodes not a list", "redis:\n  nodes: redis://a\n" + job1, 2, "redis.nodes", "must be a list"},
		{"null node", "redis:\n  nodes:\n    -\n" + job1, 3, "redis.nodes[0]", "empty node URL"},
		{"bad scheme", "redis:\n  nodes:\n    - redis://a\n    - tcp://b:1\n" + job1, 4, "redis.nodes[1]", `unsupported scheme "tcp"`},
		{"no scheme", "redis:\n  nodes:\n    - 127.0.0.1:6379\n" + job1, 3, "redis.nodes[0]", "not a valid URL"},
		{"no host", "redis:\n  nodes:\n    - redis:///0\n" + job1, 3, "redis.nodes[0]", "missing host"},
		{"bad port", "redis:\n  nodes:\n    - redis://a:99999\n" + job1, 3, "redis.nodes[0]", `bad port "99999"`},
		{"bad db", "redis:\n  nodes:\n    - redis://a:1/x\n" + job1, 3, "redis.nodes[0]", "bad database number"},
		{"sentinel without master", "redis:\n  nodes:\n    - redis+sentinel://a:26379\n" + job1, 3, "redis.nodes[0]", "master_name"},
		{"unknown node option", "redis:\n  nodes:\n    - redis://a:1?dial_timout=1s\n" + job1, 3, "redis.nodes[0]", "unexpected option: dial_timout"},
		{"bad node option value", "redis:\n  nodes:\n    - redis://a:1?pool_size=many\n" + job1, 3, "redis.nodes[0]", "pool_size"},
		{"duplicate node", "redis:\n  nodes:\n    - redis://a:6379/0\n    - redis://b\n    - redis://A/1\n" + job1, 5, "redis.nodes[2]", "same server as redis.nodes[0] (line 3)"},
		{"empty prefix", "redis:\n  nodes: [redis://a]\n  prefix: ''\n" + job1, 3, "redis.prefix", "empty"},
		{"prefix with braces", "redis:\n  nodes: [redis://a]\n  prefix: '{x}'\n" + job1, 3, "redis.prefix", "braces"},
		{"zero timeout", "redis:\n  nodes: [redis://a]\n  timeout: 0s\n" + job1, 3, "redis.timeout", "must be positive"},
		{"timeout vs ttl", "redis:\n  nodes: [redis://a]\n  timeout: 3s\n" + job1, 3, "redis.timeout", "less than a tenth of lease.ttl (3s)"},
		{"bad ttl", node1 + job1 + "lease:\n  ttl: ten seconds\n", 9, "lease.ttl", `bad duration "ten seconds"`},
		{"number ttl", node1 + job1 + "lease:\n  ttl: 30\n", 9, "lease.ttl", "bad duration"},
		{"ttl is a list", node1 + job1 + "lease:\n  ttl: [1s]\n", 9, "lease.ttl", "must be a single value, not a list"},
		{"zero ttl", node1 + job1 + "lease:\n  ttl: 0s\n  renew: 1s\n", 9, "lease.ttl", "must be positive"},
		{"zero renew", node1 + job1 + "lease:\n  renew: 0s\n", 9, "lease.renew", "must be positive"},
		{"renew too long", node1 + job1 + "lease:\n  renew: 30s\n", 9, "lease.renew", "shorter than ttl"},
		{"bad drift", node1 + job1 + "lease:\n  drift: lots\n", 9, "lease.drift", "bad number"},
		{"drift too large", node1 + job1 + "lease:\n  drift: 0.1\n", 9, "lease.drift", "less than 0.1"},
		{"negative drift", node1 + job1 + "lease:\n  drift: -0.01\n", 9, "lease.drift", "at least 0"},
		{"ttl too short", node1 + job1 + "lease:\n  ttl: 8s\n", 9, "lease.ttl", "the minimum ttl is 8.224s (renew stays at its default ttl/3), or lower kill_grace"},
		{"ttl too short for a job's kill_grace", node1 + job1 + "    kill_grace: 40s\n", 8, "lease.ttl", `the largest kill_grace (40s, jobs[0] "a")`},
		{"ttl too short for defaults' kill_grace", node1 + "defaults:\n  kill_grace: 40s\n" + job1, 5, "lease.ttl", "40s"},
		{"negative shutdown_grace", node1 + job1 + "shutdown_grace: -1s\n", 8, "shutdown_grace", "negative"},
		{"id with spaces", node1 + job1 + "id: a b\n", 8, "id", "spaces"},
		{"jobs not a list", node1 + "jobs:\n  name: a\n", 4, "jobs", "must be a list of jobs"},
		{"job not a mapping", node1 + "jobs:\n  - a\n", 5, "jobs[0]", "must be a mapping"},
		{"missing name", node1 + "jobs:\n  - schedule: '@daily'\n    shell: x\n", 5, "jobs[0].name", "missing name"},
		{"bad name", node1 + "jobs:\n  - name: a/b\n    schedule: '@daily'\n    shell: x\n", 5, "jobs[0].name", `name "a/b" may only contain`},
		{"duplicate name", node1 + job1 + job1[len("jobs:\n"):], 8, "jobs[1].name", `duplicate job name "a" (first used by jobs[0] at line 5)`},
		{"missing schedule", node1 + "jobs:\n  - name: a\n    shell: x\n", 5, "jobs[0].schedule", "missing schedule"},
		{"cron fields", node1 + "jobs:\n  - name: a\n    schedule: '* *'\n    shell: x\n", 6, "jobs[0].schedule", `bad cron expression "* *": expected 5 or 6 fields`},
		{"cron range", node1 + "jobs:\n  - name: a\n    schedule: '61 * * * *'\n    shell: x\n", 6, "jobs[0].schedule", `bad cron expression "61 * * * *": `},
		{"cron never", node1 + "jobs:\n  - name: a\n    schedule: '0 0 30 2 *'\n    shell: x\n", 6, "jobs[0].schedule", "never fires"},
		{"descriptor", node1 + "jobs:\n  - name: a\n    schedule: '@fortnightly'\n    shell: x\n", 6, "jobs[0].schedule", "@fortnightly"},
		{"every fraction", node1 + "jobs:\n  - name: a\n    schedule: '@every 1.5s'\n    shell: x\n", 6, "jobs[0].schedule", "whole number of seconds"},
		{"every short", node1 + "jobs:\n  - name: a\n    schedule: '@every 500ms'\n    shell: x\n", 6, "jobs[0].schedule", "shorter than 1s"},
		{"every bad", node1 + "jobs:\n  - name: a\n    schedule: '@every soon'\n    shell: x\n", 6, "jobs[0].schedule", "not a Go duration"},
		{"every empty", node1 + "jobs:\n  - name: a\n    schedule: '@every'\n    shell: x\n", 6, "jobs[0].schedule", "needs an interval"},
		{"cron tz", node1 + "jobs:\n  - name: a\n    schedule: 'CRON_TZ=Nowhere/Land 0 3 * * *'\n    shell: x\n", 6, "jobs[0].schedule", `unknown time zone "Nowhere/Land"`},
		{"cron tz alone", node1 + "jobs:\n  - name: a\n    schedule: 'CRON_TZ=UTC'\n    shell: x\n", 6, "jobs[0].schedule", "followed by a space"},
		{"schedule is a list", node1 + "jobs:\n  - name: a\n    schedule: [1, 2]\n    shell: x\n", 6, "jobs[0].schedule", "must be a single value"},
		{"no command", node1 + "jobs:\n  - name: a\n    schedule: '@daily'\n", 5, "jobs[0].command", "missing command"},
		{"both", node1 + job1 + "    command: [x]\n", 8, "jobs[0].command", "not both"},
		{"command string", node1 + "jobs:\n  - name: a\n    schedule: '@daily'\n    command: /bin/backup --full\n", 7, "jobs[0].command", "use shell: for a command line"},
		{"command empty", node1 + "jobs:\n  - name: a\n    schedule: '@daily'\n    command: []\n", 7, "jobs[0].command", "empty list"},
		{"command empty program", node1 + "jobs:\n  - name: a\n    schedule: '@daily'\n    command: ['', x]\n", 7, "jobs[0].command[0]", "program to run is empty"},
		{"command null arg", node1 + "jobs:\n  - name: a\n    schedule: '@daily'\n    command:\n      - x\n      -\n", 9, "jobs[0].command[1]", "empty argument"},
		{"blank shell", node1 + "jobs:\n  - name: a\n    schedule: '@daily'\n    shell: '  '\n", 7, "jobs[0].shell", "blank"},
		{"bad overlap", node1 + job1 + "    overlap: sometimes\n", 8, "jobs[0].overlap", `skip or wait, not "sometimes"`},
		{"bad timeout", node1 + job1 + "    timeout: 5 minutes\n", 8, "jobs[0].timeout", `bad duration "5 minutes"`},
		{"negative timeout", node1 + job1 + "    timeout: -1m\n", 8, "jobs[0].timeout", "negative"},
		{"negative deadline", node1 + job1 + "    deadline: -1s\n", 8, "jobs[0].deadline", "negative"},
		{"negative kill_grace", node1 + job1 + "    kill_grace: -1s\n", 8, "jobs[0].kill_grace", "negative"},
		{"bad timezone", node1 + job1 + "    timezone: Mars/Base\n", 8, "jobs[0].timezone", `unknown time zone "Mars/Base"`},
		{"bad default timezone", node1 + "defaults:\n  timezone: Mars/Base\n" + job1, 5, "defaults.timezone", `unknown time zone "Mars/Base"`},
		{"negative default", node1 + "defaults:\n  timeout: -1s\n" + job1, 5, "defaults.timeout", "negative"},
		{"bad default overlap", node1 + "defaults:\n  overlap: never\n" + job1, 5, "defaults.overlap", `not "never"`},
		{"env not a mapping", node1 + job1 + "    env: [A=1]\n", 8, "jobs[0].env", "must be a mapping"},
		{"env value a list", node1 + job1 + "    env:\n      A: [1]\n", 9, "jobs[0].env.A", "must be a single value"},
		{"env bad name", node1 + job1 + "    env: {'A=B': x}\n", 8, "jobs[0].env", `bad environment variable name "A=B"`},
		{"bad default env", node1 + "defaults:\n  env: {'': x}\n" + job1 + "    env: {B: y}\n", 5, "defaults.env", `bad environment variable name ""`},
		{"merge of a scalar", node1 + job1 + "    <<: 1\n", 8, "jobs[0]", "merge key"},
		{"unknown key in a merged mapping", node1 + "jobs:\n  - <<: &x {nam: a}\n    name: a\n    schedule: '@daily'\n    shell: x\n", 5, "jobs[0].nam", "unknown key"},
		{"key is a list", node1 + job1 + "[a]: 1\n", 8, "", "a key must be a plain word"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parse(t, tc.config)
			if err == nil {
				t.Fatalf("no error for:\n%s", tc.config)
			}
			prefix := "jobs.yaml:" + strconv.Itoa(tc.line) + ": "
			if tc.line == 0 {
				prefix = "jobs.yaml: "
			}
			if tc.field != "" {
				prefix += tc.field + ": "
			}
			found := false
			for _, e := range configErrors(t, err) {
				if strings.HasPrefix(e.Error(), prefix) && strings.Contains(e.Msg, tc.want) {
					found = true
					if e.File != "jobs.yaml" || e.Line != tc.line || (tc.field != "" && e.Field != tc.field) {
						t.Errorf("fields of %q: %+v", e, e)
					}
				}
			}
			if !found {
				t.Errorf("no error starting %q and mentioning %q in:\n%v", prefix, tc.want, err)
			}
		})
	}
}

// TestOneErrorEach: a problem is reported once, not again by the checks
// that would trip over its consequences.
func TestOneErrorEach(t *testing.T) {
	for _, tc := range []struct{ name, config string }{
		{"bad command type", node1 + "jobs:\n  - name: a\n    schedule: '@daily'\n    command: {x: 1}\n"},
		{"bad shell type", node1 + "jobs:\n  - name: a\n    schedule: '@daily'\n    shell: [x]\n"},
		{"bad default timezone, two jobs", node1 + "defaults:\n  timezone: Mars/Base\n" + job1 + "  - {name: b, schedule: '0 3 * * *', shell: x}\n"},
		{"bad default kill_grace", node1 + "defaults:\n  kill_grace: -1s\n" + job1 + "  - {name: b, schedule: '0 3 * * *', shell: x}\n"},
		{"bad ttl", node1 + job1 + "lease:\n  ttl: soon\n  renew: 40s\n"},
		{"bad renew", node1 + job1 + "lease:\n  renew: x\n"},
		{"bad name type", node1 + "jobs:\n  - name: {a: 1}\n    schedule: '@daily'\n    shell: x\n"},
		{"bad schedule type", node1 + "jobs:\n  - name: a\n    schedule: {a: 1}\n    shell: x\n"},
		{"bad nodes type", "redis:\n  nodes: {a: 1}\n" + job1},
		{"bad env in defaults, job has env", node1 + "defaults:\n  env: {'': x}\n" + job1 + "    env: {B: y}\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parse(t, tc.config)
			if errs := configErrors(t, err); len(errs) != 1 {
				t.Errorf("%d errors, want 1:\n%v", len(errs), err)
			}
		})
	}
}

// TestAllErrorsSorted: every problem is reported, sorted by line.
func TestAllErrorsSorted(t *testing.T) {
	config := `jobs:
  - name: a
    schedule: "61 * * * *"
    shell: "true"
  - name: a
    schedule: "@hourly"
    shell: "true"
    overlap: sometimes
lease:
  ttl: 1h
  renew: 2h
redis:
  nodes:
    - redis://:hunter2@127.0.0.1:6379/0
    - redis://:hunter2@127.0.0.1:6379/0
  tiemout: 1s
`
	_, err := parse(t, config)
	errs := configErrors(t, err)
	var got []string
	for _, e := range errs {
		got = append(got, fmt.Sprintf("%d %s", e.Line, e.Field))
	}
	want := []string{"3 jobs[0].schedule", "5 jobs[1].name", "8 jobs[1].overlap", "11 lease.renew", "15 redis.nodes[1]", "16 redis.tiemout"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("errors:\n%v\ngot  %q\nwant %q", err, got, want)
	}
	if lines := strings.Split(err.Error(), "\n"); len(lines) != len(want) {
		t.Errorf("err.Error() has %d lines, want one per error:\n%v", len(lines), err)
	}
	if strings.Contains(err.Error(), "hunter2") {
		t.Errorf("password in error:\n%v", err)
	}
}

// TestPasswordRedacted: a password in a node URL never appears in an error
// or a warning, whatever is wrong with the URL.
func TestPasswordRedacted(t *testing.T) {
	const pw = "hunter2"
	for _, node := range []string{
		"tcp://admin:hunter2@db:6379",
		"redis://admin:hunter2@db:notaport/0",
		"redis://admin:hunter2@db:99999/0",
		"redis://admin:hunter2@db:6379/x",
		"redis://:hunter2@/0",
		"redis://admin:hunter2%zz@db:6379",
		"redis://admin:hunter2@db:6379 /0",
		"redis+sentinel://admin:hunter2@db:26379",
		"redis+sentinel://db:26379?sentinel_password=hunter2",
		"redis+sentinel://db:26379?master_name=m&sentinel_password=hunter2",
		"redis://db:6379?password=hunter2",
		"redis+sentinel://db:26379?master_name=m&password=hunter2&bogus=1",
		"admin:hunter2@db:6379",
		"//admin:hunter2@db",
		"redis://admin:hunter2@db:6379?addr=bad",
	} {
		t.Run(node, func(t *testing.T) {
			config := "redis:\n  nodes:\n    - " + strconv.Quote(node) + "\n" + job1
			_, err := parse(t, config)
			if err == nil {
				t.Fatal("no error")
			}
			if strings.Contains(err.Error(), pw) {
				t.Errorf("password in error: %v", err)
			}
			if !strings.Contains(err.Error(), "jobs.yaml:3: redis.nodes[0]: ") {
				t.Errorf("error does not name file, line and field: %v", err)
			}
		})
	}
	// Duplicates and warnings too.
	c, err := parse(t, "redis:\n  nodes:\n    - redis://u:hunter2@a:1\n    - redis://u:hunter2@a:1\n"+job1)
	if err == nil || strings.Contains(err.Error(), pw) || !strings.Contains(err.Error(), "redis://u:xxxxx@a:1") {
		t.Errorf("duplicate: %v", err)
	}
	c, err = parse(t, "redis:\n  nodes:\n    - redis://u:hunter2@a:1\n    - redis://u:hunter2@b:1\n"+job1)
	if err != nil || strings.Contains(strings.Join(c.Warnings, "\n"), pw) {
		t.Errorf("warnings %v, err %v", c, err)
	}
}

// TestTTLMinimum: the minimum ttl the error names is enough, and 1ms less
// is not; with renew set, and with renew at its default ttl/3.
func TestTTLMinimum(t *testing.T) {
	for _, tc := range []struct {
		renew, drift, killGrace string
	}{
		{"2s", "0.05", "8s"},
		{"100ms", "0", "1m"},
		{"", "0.01", "5s"},
		{"", "0.09", "1h"},
	} {
		config := func(ttl string) string {
			s := "redis:\n  nodes: [redis://a]\n  timeout: 20ms\nlease:\n  ttl: " + ttl + "\n  drift: " + tc.drift + "\n"
			if tc.renew != "" {
				s += "  renew: " + tc.renew + "\n"
			}
			return s + "defaults:\n  kill_grace: " + tc.killGrace + "\n" + job1
		}
		_, err := parse(t, config("3s"))
		if err == nil {
			t.Fatalf("%+v: no error", tc)
		}
		const after = "the minimum ttl is "
		msg := err.Error()
		i := strings.Index(msg, after)
		if i < 0 {
			t.Fatalf("no %q in %v", after, err)
		}
		minTTL, perr := time.ParseDuration(strings.TrimRight(strings.Fields(msg[i+len(after):])[0], ",;"))
		if perr != nil {
			t.Fatalf("%v in %v", perr, err)
		}
		if _, err := parse(t, config(minTTL.String())); err != nil {
			t.Errorf("%+v: ttl %s (the minimum) fails: %v", tc, minTTL, err)
		}
		if _, err := parse(t, config((minTTL - time.Millisecond).String())); err == nil {
			t.Errorf("%+v: ttl %s (below the minimum) passes", tc, minTTL-time.Millisecond)
		}
	}
}

// TestTestdata loads every file in testdata. Each names what to expect in
// its first line: "# want: LINE [FIELD]" (one error, there), "# warn:
// LINE FIELD" (valid, one warning) or nothing (valid, no warnings).
func TestTestdata(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "*.yaml"))
	if err != nil || len(files) < 8 {
		t.Fatalf("testdata: %v %q", err, files)
	}
	for _, path := range files {
		t.Run(filepath.Base(path), func(t *testing.T) {
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			first, _, _ := strings.Cut(string(data), "\n")
			c, err := Load(path)
			switch {
			case strings.HasPrefix(first, "# want: "):
				spec := strings.Fields(strings.TrimPrefix(first, "# want: "))
				if err == nil {
					t.Fatal("loads without error")
				}
				errs := configErrors(t, err)
				if len(errs) != 1 {
					t.Fatalf("%d errors, want 1:\n%v", len(errs), err)
				}
				prefix := path + ":" + spec[0] + ": "
				if len(spec) > 1 {
					prefix += spec[1] + ": "
				}
				if !strings.HasPrefix(errs[0].Error(), prefix) {
					t.Errorf("error %q does not start with %q", errs[0], prefix)
				}
				if strings.Contains(err.Error(), "hunter2") || strings.Contains(err.Error(), "s3cret") {
					t.Errorf("password in error: %v", err)
				}
			case strings.HasPrefix(first, "# warn: "):
				spec := strings.Fields(strings.TrimPrefix(first, "# warn: "))
				if err != nil {
					t.Fatal(err)
				}
				if len(c.Warnings) != 1 || !strings.HasPrefix(c.Warnings[0], path+":"+spec[0]+": "+spec[1]+": ") {
					t.Errorf("warnings %q, want one at line %s for %s", c.Warnings, spec[0], spec[1])
				}
			default:
				if err != nil {
					t.Fatal(err)
				}
				if len(c.Warnings) != 0 {
					t.Errorf("warnings %q", c.Warnings)
				}
			}
		})
	}
}

// TestExampleConfig: the repository's example loads cleanly.
func TestExampleConfig(t *testing.T) {
	c, err := Load(filepath.Join("..", "jobs.example.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Jobs) == 0 || len(c.Warnings) != 0 {
		t.Errorf("%d jobs, warnings %q", len(c.Jobs), c.Warnings)
	}
}

func TestLoadMissing(t *testing.T) {
	path := filepath.Join(t.TempDir(), "nope.yaml")
	_, err := Load(path)
	if err == nil || !strings.Contains(err.Error(), path) || !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Load(missing) = %v", err)
	}
}

// TestValidateInCode: a Config built in code is validated and compiled by
// Validate; errors fall back to the job's Line.
func TestValidateInCode(t *testing.T) {
	c := Default()
	c.ID = "h1"
	c.Backend = NewRedis("redis://127.0.0.1:6379/0")
	j := &Job{Name: "tick", Schedule: "@every 1m", Shell: "true", KillGrace: time.Second}
	c.Jobs = []*Job{j}
	if !j.Next(time.Unix(0, 0)).IsZero() {
		t.Error("Next before Validate is not zero")
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if got := j.Next(time.Unix(30, 0)); !got.Equal(time.Unix(60, 0)) {
		t.Errorf("Next = %s", got)
	}
	j.Schedule, j.Line = "bad", 7
	c.Jobs = append(c.Jobs, &Job{Name: "tick", Schedule: "@daily"})
	err := c.Validate()
	errs := configErrors(t, err)
	var got []string
	for _, e := range errs {
		got = append(got, e.Error())
	}
	want := []string{
		"jobs[1].name: duplicate job name \"tick\" (first used by jobs[0] at line 7)",
		"jobs[1].command: missing command (exec form, a list) or shell (a command line for /bin/sh -c)",
		"line 7: jobs[0].schedule: bad cron expression \"bad\": expected 5 or 6 fields, found 1 (an optional seconds field, then minute hour day-of-month month day-of-week)",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("errors\n%q\nwant\n%q", got, want)
	}
	if j.Next(time.Unix(30, 0)) != (time.Time{}) {
		t.Error("a job whose schedule failed still has the old one")
	}
}

func TestError(t *testing.T) {
	inner := errors.New("inner")
	for _, tc := range []struct {
		e    Error
		want string
	}{
		{Error{File: "jobs.yaml", Line: 12, Field: "jobs[2].schedule", Msg: "bad"}, "jobs.yaml:12: jobs[2].schedule: bad"},
		{Error{File: "jobs.yaml", Field: "redis.nodes", Msg: "none"}, "jobs.yaml: redis.nodes: none"},
		{Error{Line: 3, Msg: "x"}, "line 3: x"},
		{Error{File: "f", Err: inner}, "f: inner"},
	} {
		if got := tc.e.Error(); got != tc.want {
			t.Errorf("%+v: %q, want %q", tc.e, got, tc.want)
		}
	}
	e := &Error{Msg: "m", Err: inner}
	if !errors.Is(e, inner) {
		t.Error("Unwrap")
	}
	_, err := parse(t, node1+"jobs:\n  - name: a\n    schedule: '61 * * * *'\n    shell: x\n")
	var ce *Error
	if !errors.As(err, &ce) || ce.Err == nil || ce.Line != 6 {
		t.Errorf("errors.As: %+v", ce)
	}
}

func TestJobLookup(t *testing.T) {
	c := mustParse(t, node1+job1+"  - {name: b, schedule: '@daily', shell: x}\n")
	if c.Job("b") != c.Jobs[1] || c.Job("a") != c.Jobs[0] || c.Job("c") != nil {
		t.Error("Job lookup")
	}
}

// TestAliasBomb: a small file cannot make Parse walk a huge tree.
func TestAliasBomb(t *testing.T) {
	var b strings.Builder
	b.WriteString(node1 + "x0: &a0 {name: a}\n")
	for i := 1; i < 40; i++ {
		fmt.Fprintf(&b, "x%d: &a%d {<<: [*a%d, *a%d]}\n", i, i, i-1, i-1)
	}
	b.WriteString("jobs:\n")
	for range 100 {
		b.WriteString("  - *a39\n")
	}
	done := make(chan error, 1)
	go func() { _, err := parse(t, b.String()); done <- err }()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "too large") {
			t.Errorf("err = %v", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("Parse did not return within a minute")
	}
}

func ExampleParse() {
	const text = `
redis:
  nodes: [redis://10.0.0.1:6379, redis://10.0.0.2:6379, redis://10.0.0.3:6379]
jobs:
  - name: report
    schedule: "CRON_TZ=Europe/Berlin 0 6 * * 1-5"
    command: ["/usr/local/bin/report"]
  - name: sync
    schedule: "@every 30s"
    shell: sync-inventory --full
    overlap: wait
`
	c, err := Parse(strings.NewReader(text), "jobs.yaml")
	if err != nil {
		fmt.Println(err)
		return
	}
	now := time.Date(2025, 3, 7, 12, 0, 10, 0, time.UTC) // a Friday
	for _, j := range c.Jobs {
		fmt.Println(j.Name, j.Overlap, j.Next(now).Format(time.RFC3339))
	}

	_, err = Parse(strings.NewReader(text+"    tiemout: 5m\n"), "jobs.yaml")
	fmt.Println(err)
	// Output:
	// report skip 2025-03-10T05:00:00Z
	// sync wait 2025-03-07T12:00:30Z
	// jobs.yaml:12: jobs[1].tiemout: unknown key "tiemout" (allowed: name, schedule, command, shell, timeout, overlap, deadline, kill_grace, timezone, env, dir, retries, retry_backoff, retry_on_timeout, history_limit, run_on, candidates, standby_delay, jitter, memory_max, cpu_max, tasks_max, output_limit, redact, secret_env, on_start, on_success, on_failure, on_missed); did you mean "timeout"?
}
