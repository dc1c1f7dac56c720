package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/leasecron/leasecron/internal/testkit/redistest"
	"github.com/leasecron/leasecron/lease"
	"github.com/leasecron/leasecron/lease/redlock"
)

// Bad input that only shows when the nodes are contacted: a wrong
// password, a node that is a replica, a node nobody listens on. check
// cannot see these (it does not contact Redis); trigger and status must
// fail with exit code 1, say which node and why, never print the password,
// and run nothing; a daemon must run nothing and say why in its log.

const badInputPassword = "s3cretPW"

// markerJob is a config with one job that, if it ever ran, would create
// the returned marker file.
func markerJob(t *testing.T, nodes []string, every string) (config, marker string) {
	t.Helper()
	marker = filepath.Join(t.TempDir(), "ran")
	var b strings.Builder
	b.WriteString("redis:\n  nodes:\n")
	for _, n := range nodes {
		fmt.Fprintf(&b, "    - %q\n", n)
	}
	// A short TTL, so a restart guard would not be what stops the job.
	fmt.Fprintf(&b, "lease:\n  ttl: 3s\n  renew: 1s\ndefaults:\n  kill_grace: 500ms\njobs:\n  - name: marker\n    schedule: %q\n    command: [\"/bin/touch\", %q]\n", every, marker)
	return b.String(), marker
}

// badNodes are node lists that cannot give a lease, each with what the
// error must mention.
func badNodes(t *testing.T) []struct {
	name  string
	nodes []string
	want  string
	ready time.Time // when the case may run
} {
	t.Helper()
	pw := redistest.Start(t, 1, redistest.WithPassword(badInputPassword))
	addr := pw.Nodes[0].Addr()
	pair := redistest.Start(t, 2)
	host, port, _ := net.SplitHostPort(pair.Nodes[0].Addr())
	if err := pair.Nodes[1].Client().ReplicaOf(context.Background(), host, port).Err(); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := ln.Addr().String()
	ln.Close() // nothing listens there any more
	// The twice-listed server gets its data marker now, so that by the
	// time its case runs the marker is older than the config's TTL (3 s)
	// and the duplicate, not a young dataset, is why it gives no lease.
	if c, err := redlock.New(pair.URLs()[:1], redlock.WithTimeout(time.Second)); err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_, _ = c.Acquire(ctx, lease.Request{Key: "marker-warmup", TTL: time.Second})
		cancel()
		_ = c.Close()
	}
	pairReady := time.Now().Add(4 * time.Second)
	sentinel := redistest.StartSentinelGroup(t).Sentinel
	evicting := redistest.Start(t, 1, redistest.WithArgs("--maxmemory", "64mb", "--maxmemory-policy", "volatile-lru"))
	return []struct {
		name  string
		nodes []string
		want  string
		ready time.Time
	}{
		{"wrong password", []string{"redis://:wr0ng@" + addr + "/0"}, "WRONGPASS", time.Time{}},
		{"no password", []string{"redis://" + addr + "/0"}, addr, time.Time{}},
		{"replica", []string{pair.URLs()[1]}, "replica", time.Time{}},
		{"replicas are not a quorum", []string{pair.URLs()[1], "redis://:wr0ng@" + addr + "/0", "redis://" + dead + "/0"}, "replica", time.Time{}},
		{"unreachable", []string{"redis://" + dead + "/0"}, dead, time.Time{}},
		{"Sentinel listed as redis://", []string{sentinel.URL()}, "redis+sentinel://", time.Time{}},
		{"evicts keys", evicting.URLs(), "maxmemory-policy volatile-lru", time.Time{}},
		{"same server twice", []string{"redis://" + pair.Nodes[0].Addr(), "redis://localhost:" + port}, "same server", pairReady},
	}
}

func TestBadNodesTriggerAndStatus(t *testing.T) {
	t.Parallel()
	for _, tc := range badNodes(t) {
		t.Run(tc.name, func(t *testing.T) {
			time.Sleep(time.Until(tc.ready))
			config, marker := markerJob(t, tc.nodes, "@hourly")
			path := writeConfig(t, config)

			if code, out, errOut := cli(t, "check", "-c", path); code != 0 {
				t.Fatalf("check: exit %d (the config itself is fine), stdout %q, stderr:\n%s", code, out, errOut)
			}

			start := time.Now()
			code, out, errOut := cli(t, "trigger", "marker", "-c", path)
			if code != exitFailure {
				t.Errorf("trigger: exit %d, want %d; stderr:\n%s", code, exitFailure, errOut)
			}
			if out != "" {
				t.Errorf("trigger printed a run record although the job cannot have run:\n%s", out)
			}
			if !strings.Contains(errOut, tc.want) {
				t.Errorf("trigger: stderr does not mention %q:\n%s", tc.want, errOut)
			}
			if strings.Contains(errOut, badInputPassword) || strings.Contains(errOut, "wr0ng") {
				t.Errorf("trigger: stderr shows a password:\n%s", errOut)
			}
			t.Logf("trigger failed after %s: %s", time.Since(start).Round(time.Millisecond), lastLine(errOut))

			code, out, errOut = cli(t, "status", "-c", path, "--timeout", "5s")
			if code != exitFailure {
				t.Errorf("status: exit %d, want %d; stderr:\n%s", code, exitFailure, errOut)
			}
			if !strings.Contains(out+errOut, tc.want) {
				t.Errorf("status does not mention %q:\nstdout:\n%s\nstderr:\n%s", tc.want, out, errOut)
			}
			if strings.Contains(out+errOut, badInputPassword) || strings.Contains(out+errOut, "wr0ng") {
				t.Errorf("status shows a password:\n%s%s", out, errOut)
			}

			if _, err := os.Stat(marker); err == nil {
				t.Errorf("the job ran")
			}
		})
	}
}

// TestBadNodesRunRunsNothing: a daemon whose nodes cannot give a lease
// keeps running (a node may be fixed without restarting the fleet) but
// runs no job, says why in its log, and stops cleanly. The cases run in
// parallel, a daemon each: none changes the servers.
func TestBadNodesRunRunsNothing(t *testing.T) {
	t.Parallel()
	for _, tc := range badNodes(t) {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			time.Sleep(time.Until(tc.ready))
			config, marker := markerJob(t, tc.nodes, "@every 1s")
			d := startDaemon(t, "-c", writeConfig(t, config), "--log-format", "json")
			d.notes.await(t, "READY=1")
			time.Sleep(3500 * time.Millisecond) // three ticks
			if code := d.stop(t); code != 0 {
				t.Errorf("exit %d after a clean stop; log:\n%s", code, d.stderr)
			}
			log := d.stderr.String()
			if _, err := os.Stat(marker); err == nil {
				t.Errorf("the job ran; log:\n%s", log)
			}
			if !strings.Contains(log, "no quorum") || !strings.Contains(log, tc.want) {
				t.Errorf("the log does not say there is no quorum because of %q:\n%s", tc.want, log)
			}
			if strings.Contains(log, badInputPassword) || strings.Contains(log, "wr0ng") {
				t.Errorf("the log shows a password")
			}
		})
	}
}

// TestBadConfigNothingRuns: every invalid config of the scheduler's
// testdata, and a few more, make run and trigger fail at once with exit
// code 2, naming the file, before anything starts.
func TestBadConfigNothingRuns(t *testing.T) {
	files, _ := filepath.Glob("../../config/testdata/bad_*.yaml")
	more := map[string]string{
		"zero ttl":          unreachable + "lease:\n  ttl: 0s\njobs:\n  - {name: a, schedule: '@hourly', shell: 'true'}\n",
		"negative timeout":  unreachable + "jobs:\n  - {name: a, schedule: '@hourly', shell: 'true', timeout: -5s}\n",
		"zero renew":        unreachable + "lease:\n  renew: 0s\njobs:\n  - {name: a, schedule: '@hourly', shell: 'true'}\n",
		"malformed node":    "redis:\n  nodes: ['redis://127.0.0.1:99999/0']\njobs:\n  - {name: a, schedule: '@hourly', shell: 'true'}\n",
		"node without host": "redis:\n  nodes: ['redis:///0']\njobs:\n  - {name: a, schedule: '@hourly', shell: 'true'}\n",
		"no jobs key value": unreachable + "jobs: 3\n",
		"tabs in yaml":      "redis:\n\tnodes: []\n",
		"empty file":        "",
		"two backends":      unreachable + "postgres:\n  url: postgres://u@127.0.0.1:1/ops\njobs:\n  - {name: a, schedule: '@hourly', shell: 'true'}\n",
		"no backend":        "jobs:\n  - {name: a, schedule: '@hourly', shell: 'true'}\n",
		"bad postgres url":  "postgres:\n  url: postgres://u:" + badInputPassword + "@127.0.0.1:99999/ops\njobs:\n  - {name: a, schedule: '@hourly', shell: 'true'}\n",
		"no password file":  unreachable + "  password_file: /nonexistent/redis.pass\njobs:\n  - {name: a, schedule: '@hourly', shell: 'true'}\n",
		// Hooks: the secret of a good one (hook.key holds the password)
		// is never shown beside the bad one's error.
		"bad hook url":     unreachable + "jobs:\n  - {name: a, schedule: '@hourly', shell: 'true', on_failure: {url: 'ftp://x/'}, on_success: {url: 'https://x/', secret_file: hook.key}}\n",
		"no hook secret":   unreachable + "jobs:\n  - {name: a, schedule: '@hourly', shell: 'true', on_failure: {url: 'https://x/', secret_file: /nonexistent/hook.key}}\n",
		"unknown hook key": unreachable + "defaults:\n  on_missed: {url: 'https://x/', secret_file: hook.key, retires: 1}\njobs:\n  - {name: a, schedule: '@hourly', shell: 'true'}\n",
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "hook.key"), []byte(badInputPassword+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for name, text := range more {
		p := filepath.Join(dir, strings.ReplaceAll(name, " ", "_")+".yaml")
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		files = append(files, p)
	}
	if len(files) < len(more)+5 {
		t.Fatalf("only %d bad configs found", len(files))
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			for _, args := range [][]string{{"check", "-c", f}, {"run", "-c", f}, {"trigger", "-c", f, "a"}} {
				start := time.Now()
				code, out, errOut := cli(t, args...)
				if code != exitUsage || !strings.Contains(errOut, f) {
					t.Errorf("%s: exit %d, want %d, and the file named; stdout %q, stderr:\n%s", args[0], code, exitUsage, out, errOut)
				}
				if strings.Contains(out+errOut, badInputPassword) {
					t.Errorf("%s: a password is shown:\n%s%s", args[0], out, errOut)
				}
				if took := time.Since(start); took > 5*time.Second {
					t.Errorf("%s: took %s to reject the config", args[0], took)
				}
			}
		})
	}
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

// TestTriggerThroughSentinel: a Sentinel-managed master is a node like any
// other. With one of two plain nodes down, trigger needs its vote, gets
// it, and runs the job; status shows the node.
func TestTriggerThroughSentinel(t *testing.T) {
	t.Parallel()
	g := redistest.StartSentinelGroup(t)
	plain := redistest.Start(t, 2)
	plain.Nodes[1].Kill()
	sentinelURL := "redis+sentinel://" + g.Sentinel.Addr() + "?master_name=" + redistest.SentinelMasterName
	config, marker := markerJob(t, []string{sentinelURL, plain.Nodes[0].URL(), plain.Nodes[1].URL()}, "@hourly")
	path := writeConfig(t, config)

	triggerFresh(t, func() (int, string, string) { return cli(t, "trigger", "marker", "-c", path) })
	if _, err := os.Stat(marker); err != nil {
		t.Errorf("the job did not run: %v", err)
	}
	if keys := g.Master.Keys("*marker*"); len(keys) == 0 {
		t.Error("no key of the job on the Sentinel's master")
	}
	_, out, errOut := cli(t, "status", "-c", path, "--timeout", "5s")
	if !strings.Contains(out, sentinelURL) {
		t.Errorf("status does not show the Sentinel node:\nstdout:\n%s\nstderr:\n%s", out, errOut)
	}
}

// triggerFresh runs trigger until it succeeds. Nodes that just started do
// not vote for one TTL (they might have restarted empty), and a loaded
// machine may not open a trigger's cold connections within the 50 ms node
// timeout: it retries for those reasons only, for up to 20 s.
func triggerFresh(t *testing.T, trigger func() (code int, stdout, stderr string)) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		code, out, errOut := trigger()
		if code == exitOK {
			t.Logf("trigger: %s", strings.TrimSpace(out))
			return
		}
		transient := strings.Contains(errOut, "restarted") || strings.Contains(errOut, "no answer within")
		if !transient || time.Now().After(deadline) {
			t.Fatalf("trigger: exit %d; stderr:\n%s", code, errOut)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// TestTriggerOverTLS: rediss:// nodes whose certificate a private CA
// signed, trusted the way an operator trusts it for the daemon:
// SSL_CERT_FILE in its environment (Environment= in the systemd unit).
// Without it trigger fails, saying it is the certificate, and runs
// nothing. The CLI runs as its own process: Go reads SSL_CERT_FILE once.
func TestTriggerOverTLS(t *testing.T) {
	t.Parallel()
	ca := redistest.NewCA(t)
	cl := redistest.Start(t, 3, redistest.WithTLS(ca), redistest.WithPassword(badInputPassword))
	config, marker := markerJob(t, cl.TLSURLs(), "@hourly")
	// A TLS handshake refused for its certificate must fail as such, not
	// as a node that did not answer within the 50 ms default: on a loaded
	// machine the handshake alone takes longer (250 ms: the most a 3 s
	// TTL allows).
	config = strings.Replace(config, "redis:\n", "redis:\n  timeout: 250ms\n", 1)
	path := writeConfig(t, config)
	trigger := func(env ...string) func() (int, string, string) {
		return func() (int, string, string) {
			cmd := exec.Command(os.Args[0], "trigger", "marker", "-c", path)
			cmd.Env = append(os.Environ(), append([]string{cliEnv + "=1"}, env...)...)
			var out, errOut bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &errOut
			err := cmd.Run()
			var ee *exec.ExitError
			if err != nil && !errors.As(err, &ee) {
				t.Fatalf("running %s: %v", cmd, err)
			}
			return cmd.ProcessState.ExitCode(), out.String(), errOut.String()
		}
	}
	code, _, errOut := trigger()()
	if code != exitFailure || !strings.Contains(errOut, "certificate") {
		t.Errorf("trigger without trusting the CA: exit %d, want %d with a certificate error; stderr:\n%s", code, exitFailure, errOut)
	}
	if strings.Contains(errOut, badInputPassword) {
		t.Errorf("trigger shows the password:\n%s", errOut)
	}
	t.Logf("without the CA: %s", lastLine(errOut))
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("the job ran without a trusted connection")
	}
	triggerFresh(t, trigger("SSL_CERT_FILE="+ca.CAFile))
	if _, err := os.Stat(marker); err != nil {
		t.Errorf("the job did not run: %v", err)
	}
}

// TestCheckBackends: check reports the backend it validated, or each
// problem of the backend sections on its own line with file, line and
// field, and never shows a password (from a URL or a password_file).
func TestCheckBackends(t *testing.T) {
	dir := t.TempDir()
	secret := filepath.Join(dir, "pg.pass")
	if err := os.WriteFile(secret, []byte(badInputPassword+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	zkAuth := filepath.Join(dir, "zk.auth")
	if err := os.WriteFile(zkAuth, []byte("lc:"+badInputPassword+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	job := "jobs:\n  - {name: a, schedule: '@hourly', shell: 'true'}\n"
	for _, tc := range []struct {
		name, config string
		code         int
		stdout       string   // exactly, when code is 0
		stderr       []string // each in stderr; "FILE" is the config's path
	}{
		{"postgres", "postgres:\n  url: postgres://lc:" + badInputPassword + "@127.0.0.1:5432/ops?sslmode=disable\n" + job,
			0, "ok: 1 job, postgres postgres://lc:xxxxx@127.0.0.1:5432/ops?sslmode=disable\n", nil},
		{"postgres with password_file", "postgres:\n  url: postgres://lc@127.0.0.1:5432/ops\n  password_file: " + secret + "\n" + job,
			0, "ok: 1 job, postgres postgres://lc@127.0.0.1:5432/ops\n", nil},
		{"mysql", "mysql:\n  dsn: \"lc:" + badInputPassword + "@tcp(127.0.0.1:3306)/ops\"\n" + job,
			0, "ok: 1 job, mysql lc@tcp(127.0.0.1:3306)/ops\n", nil},
		{"mysql with password_file", "mysql:\n  dsn: \"lc@tcp(127.0.0.1:3306)/ops?tls=true\"\n  password_file: " + secret + "\n" + job,
			0, "ok: 1 job, mysql lc@tcp(127.0.0.1:3306)/ops\n", nil},
		{"every mysql problem", "mysql:\n  dsn: \"lc:" + badInputPassword + "@tcp(db1:3306)/ops?multiStatements=true\"\n  table: Bad-Name\n  password_file: " + filepath.Join(dir, "nope") + "\n" + job,
			exitUsage, "", []string{
				"FILE:2: mysql.dsn: lc@tcp(db1:3306)/ops: unknown or unsupported parameter \"multiStatements\"",
				"FILE:3: mysql.table: ",
				"FILE:4: mysql.password_file: cannot read " + filepath.Join(dir, "nope"),
			}},
		{"redis with password_file", unreachable + "  password_file: " + secret + "\n" + job,
			0, "ok: 1 job, 3 nodes\n", nil},
		{"two backend sections", unreachable + "postgres:\n  url: postgres://lc@127.0.0.1/ops\n" + job,
			exitUsage, "", []string{"FILE:6: postgres: a second backend section: the file chose redis at line 1"}},
		{"no backend section", job, exitUsage, "", []string{"FILE: no backend section"}},
		{"etcd", "etcd:\n  endpoints: [http://127.0.0.1:2379, http://127.0.0.1:2380]\n  username: root\n  password_file: " + secret + "\n  timeout: 100ms\nlease: {ttl: 2500ms, renew: 500ms}\ndefaults: {kill_grace: 0s}\n" + job,
			0, "ok: 1 job, etcd http://127.0.0.1:2379,http://127.0.0.1:2380; lease.ttl 2.5s: etcd leases of 3s (whole seconds, or the cluster's minimum TTL if larger); validity counts 2.5s\n", nil},
		{"zookeeper with auth_file", "zookeeper:\n  servers: [127.0.0.1:2181]\n  auth_file: " + zkAuth + "\nlease: {ttl: 20s}\n" + job,
			0, "ok: 1 job, zookeeper 127.0.0.1:2181 (digest auth); lease.ttl 20s is the session timeout asked for (servers granting less, their maxSessionTimeout under it, are refused at start; a longer one only delays takeovers)\n", nil},
		{"every etcd problem", "etcd:\n  endpoints: ['http://root:" + badInputPassword + "@e1:2379', 'root:" + badInputPassword + "@e2:2379']\n  prefix: leasecron\n  password_file: " + secret + "\n  timeout: 4s\n" + job,
			exitUsage, "", []string{
				"FILE:2: etcd.endpoints[0]: http://e1:2379: credentials belong in etcd.username",
				"FILE:2: etcd.endpoints[1]: ",
				"FILE:3: etcd.prefix: \"leasecron\": must start with '/'",
				"FILE:4: etcd.password_file: username and password_file: give both or neither",
				"FILE:5: etcd.timeout: timeout 4s must be less than a tenth of lease.ttl (3s)",
			}},
		{"every zookeeper problem", "zookeeper:\n  servers: [zk1]\n  root: leasecron\n  auth: " + badInputPassword + "\n" + job,
			exitUsage, "", []string{
				"FILE:2: zookeeper.servers[0]: server \"zk1\": want host:port",
				"FILE:3: zookeeper.root: root \"leasecron\": want an absolute path like /leasecron",
				"FILE:4: zookeeper.auth: auth: want user:password",
			}},
		{"every postgres problem", "postgres:\n  url: postgres://lc:" + badInputPassword + "@db1/ops?sslmode=maybe\n  table: Bad-Name\n  password_file: " + filepath.Join(dir, "nope") + "\n" + job,
			exitUsage, "", []string{
				"FILE:2: postgres.url: postgres://lc:xxxxx@db1/ops?sslmode=maybe: bad sslmode \"maybe\"",
				"FILE:3: postgres.table: ",
				"FILE:4: postgres.password_file: cannot read " + filepath.Join(dir, "nope"),
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := writeConfig(t, tc.config)
			code, out, errOut := cli(t, "check", "-c", path)
			if code != tc.code || (code == 0 && out != tc.stdout) {
				t.Errorf("exit %d, want %d; stdout %q, want %q; stderr:\n%s", code, tc.code, out, tc.stdout, errOut)
			}
			for _, w := range tc.stderr {
				if w = strings.ReplaceAll(w, "FILE", path); !strings.Contains(errOut, w) {
					t.Errorf("stderr does not have %q:\n%s", w, errOut)
				}
			}
			if n := len(tc.stderr); n > 0 && strings.Count(errOut, "\n") != n {
				t.Errorf("%d lines on stderr, want one per problem (%d):\n%s", strings.Count(errOut, "\n"), n, errOut)
			}
			if strings.Contains(out+errOut, badInputPassword) {
				t.Errorf("a password is shown:\n%s%s", out, errOut)
			}
		})
	}
}

// TestFleetBadInput: bad host labels, max_parallel overrides, pause,
// resume, history and status --runs arguments are refused with exit code 2
// before any server is contacted (the config's nodes are unreachable), and
// each message names the culprit.
func TestFleetBadInput(t *testing.T) {
	good := writeConfig(t, goodConfig)
	for _, tc := range []struct {
		name string
		env  map[string]string
		args []string
		want []string // each in stderr
	}{
		{"label key with a space", nil, []string{"run", "-c", good, "--label", "bad key=1"}, []string{`"bad key"`}},
		{"label without value", nil, []string{"run", "-c", good, "--label", "novalue"}, []string{`"novalue"`, "key=value"}},
		{"label with a comma", nil, []string{"check", "-c", good, "--label", "a=b,c=d"}, []string{`"a=b,c=d"`}},
		{"label value with =", nil, []string{"check", "-c", good, "--label", "a=b=c"}, []string{`"b=c"`}},
		{"bad LEASECRON_LABELS", map[string]string{envLabels: "zone=eu,role"}, []string{"run", "-c", good}, []string{envLabels, `"role"`}},
		{"negative --max-parallel", nil, []string{"run", "-c", good, "--max-parallel", "-1"}, []string{"--max-parallel -1"}},
		{"--max-parallel not a number", nil, []string{"run", "-c", good, "--max-parallel", "lots"}, []string{"max-parallel", `"lots"`}},
		{"bad LEASECRON_MAX_PARALLEL", map[string]string{envMaxParallel: "-3"}, []string{"run", "-c", good}, []string{envMaxParallel, `"-3"`}},
		{"pause of an unknown job", nil, []string{"pause", "-c", good, "a", "nope"}, []string{`"nope"`, good, "nothing paused"}},
		{"resume of an unknown job", nil, []string{"resume", "-c", good, "nope"}, []string{`"nope"`, good}},
		{"pause without a job", nil, []string{"pause", "-c", good, "--reason", "x"}, []string{"--all"}},
		{"pause of jobs and --all", nil, []string{"pause", "-c", good, "a", "--all"}, []string{"--all", `"a"`}},
		{"resume without a job", nil, []string{"resume", "-c", good}, []string{"--all"}},
		{"resume --stop", nil, []string{"resume", "-c", good, "--all", "--stop"}, []string{"-stop"}},
		{"history -n 0", nil, []string{"history", "-c", good, "a", "-n", "0"}, []string{"-n 0"}},
		{"history -n 100000", nil, []string{"history", "-c", good, "a", "-n", "100000"}, []string{"-n 100000", "10000"}},
		{"history of a bad job name", nil, []string{"history", "-c", good, "no pe"}, []string{`"no pe"`}},
		{"exec without --name", nil, []string{"exec", "-c", good, "--", "touch", "/tmp/leasecron-exec-must-not-run"}, []string{"--name"}},
		{"exec without a command", nil, []string{"exec", "-c", good, "--name", "x"}, []string{"missing the command"}},
		{"exec with a bad name", nil, []string{"exec", "-c", good, "--name", "a b", "--", "true"}, []string{`"a b"`}},
		{"exec --overlap", nil, []string{"exec", "-c", good, "--name", "x", "--overlap", "never", "--", "true"}, []string{"--overlap", `"never"`}},
		{"exec --grace without --schedule", nil, []string{"exec", "-c", good, "--name", "x", "--grace", "1s", "--", "true"}, []string{"--grace and --timezone need --schedule"}},
		{"exec --deadline 0 with --schedule", nil, []string{"exec", "-c", good, "--name", "x", "--schedule", "@hourly", "--deadline", "0s", "--", "true"}, []string{"--deadline 0"}},
		{"exec negative --grace", nil, []string{"exec", "-c", good, "--name", "x", "--schedule", "@hourly", "--grace", "-5s", "--", "true"}, []string{"must not be negative"}},
		{"exec grace over the period", nil, []string{"exec", "-c", good, "--name", "x", "--schedule", "@every 10s", "--grace", "10s", "--", "touch", "/tmp/leasecron-exec-must-not-run"}, []string{"--grace 10s", "period 10s"}},
		{"exec bad schedule", nil, []string{"exec", "-c", good, "--name", "x", "--schedule", "61 * * * *", "--", "true"}, []string{`"61 * * * *"`}},
		{"exec --skipped-exit", nil, []string{"exec", "-c", good, "--name", "x", "--skipped-exit", "256", "--", "true"}, []string{"--skipped-exit 256"}},
		{"history without a job", nil, []string{"history", "-c", good}, []string{"missing the job"}},
		{"history of two jobs", nil, []string{"history", "-c", good, "a", "b"}, []string{"one job at a time"}},
		{"status --runs -1", nil, []string{"status", "-c", good, "--runs", "-1"}, []string{"--runs -1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			start := time.Now()
			code, out, errOut := cli(t, tc.args...)
			if code != exitUsage {
				t.Errorf("exit %d, want %d; stderr:\n%s", code, exitUsage, errOut)
			}
			if out != "" {
				t.Errorf("stdout %q, want nothing", out)
			}
			for _, w := range tc.want {
				if !strings.Contains(errOut, w) {
					t.Errorf("stderr does not name %q:\n%s", w, errOut)
				}
			}
			if took := time.Since(start); took > 5*time.Second {
				t.Errorf("took %s: it did more than check its arguments", took)
			}
		})
	}
}
