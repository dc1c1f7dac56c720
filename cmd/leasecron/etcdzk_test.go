package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/leasecron/leasecron/internal/testkit/etcdtest"
	"github.com/leasecron/leasecron/internal/testkit/zktest"
)

// fenceJob is a config whose backend section is section and whose one job
// writes its LEASECRON_FENCING_TOKEN to the returned file.
func fenceJob(t *testing.T, section string) (config, tokenFile string) {
	t.Helper()
	tokenFile = filepath.Join(t.TempDir(), "token")
	config = section + fmt.Sprintf(`lease:
  ttl: 10s
  renew: 2s
defaults:
  kill_grace: 1s
jobs:
  - name: fenced
    schedule: "@hourly"
    shell: 'printf %%s "$LEASECRON_FENCING_TOKEN" > %s'
`, tokenFile)
	return config, tokenFile
}

// triggerAndStatus runs check, trigger and status on the config at path:
// check names the servers and says how lease.ttl maps (wantCheck), the job
// runs under a lease (a fencing token > 0), and status shows the job's
// last run and every server, reachable; then pause, resume and history
// work on the backend (fleetCommands).
func triggerAndStatus(t *testing.T, path, tokenFile string, servers []string, wantCheck string) {
	t.Helper()
	code, out, errOut := cli(t, "check", "-c", path)
	if code != exitOK || !strings.Contains(out, strings.Join(servers, ",")) || !strings.Contains(out, wantCheck) {
		t.Errorf("check: exit %d; stdout:\n%s\nstderr:\n%s\nwant the servers and %q", code, out, errOut, wantCheck)
	}
	triggerFresh(t, func() (int, string, string) { return cli(t, "trigger", "fenced", "-c", path) })
	b, err := os.ReadFile(tokenFile)
	if err != nil {
		t.Fatalf("the job did not run: %v", err)
	}
	if tok, err := strconv.ParseInt(string(b), 10, 64); err != nil || tok <= 0 {
		t.Errorf("LEASECRON_FENCING_TOKEN = %q: the job did not run under a lease", b)
	}
	code, out, errOut = cli(t, "status", "-c", path, "--timeout", "20s")
	if code != exitOK {
		t.Errorf("status: exit %d; stdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	if !strings.Contains(out, "fenced") || !strings.Contains(out, "(exit 0)") {
		t.Errorf("status does not show the job's run:\n%s", out)
	}
	for _, s := range servers {
		if !strings.Contains(out, s) {
			t.Errorf("status does not show server %s:\n%s", s, out)
		}
	}
	t.Logf("status:\n%s", out)
	fleetCommands(t, path, "fenced")
}

// TestEtcdTriggerAndStatus: a config with an etcd section, against a real
// 3-member etcd cluster: check, trigger (the job gets a fencing token
// from etcd) and status.
func TestEtcdTriggerAndStatus(t *testing.T) {
	t.Parallel()
	cl := etcdtest.Start(t)
	eps := cl.Endpoints()
	var b strings.Builder
	b.WriteString("etcd:\n  endpoints:\n")
	for _, ep := range eps {
		fmt.Fprintf(&b, "    - %s\n", ep)
	}
	b.WriteString("  prefix: /e2e/\n")
	config, tokenFile := fenceJob(t, b.String())
	path := writeConfig(t, config)
	triggerAndStatus(t, path, tokenFile, eps, "lease.ttl 10s: etcd leases of 10s")
	keys, err := cl.Client("", "").Get(t.Context(), "/e2e/", clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil || keys.Count == 0 {
		t.Errorf("no key under the configured prefix /e2e/: %v", err)
	}
}

// TestZooKeeperTriggerAndStatus: a config with a zookeeper section
// (auth from an auth_file), against a real 3-server ensemble: check,
// trigger (the job gets a fencing token, the lock's czxid) and status;
// the auth is never printed.
func TestZooKeeperTriggerAndStatus(t *testing.T) {
	t.Parallel()
	ens := zktest.Start(t, 3)
	addrs := ens.Addrs()
	dir := t.TempDir()
	const auth = "lc:" + badInputPassword
	if err := os.WriteFile(filepath.Join(dir, "zk.auth"), []byte(auth+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	section := fmt.Sprintf("zookeeper:\n  servers: [%s]\n  root: /e2e\n  timeout: 500ms\n  auth_file: %s\n",
		strings.Join(addrs, ", "), filepath.Join(dir, "zk.auth"))
	config, tokenFile := fenceJob(t, section)
	path := writeConfig(t, config)
	triggerAndStatus(t, path, tokenFile, addrs, "lease.ttl 10s is the session timeout")
	_, out, errOut := cli(t, "check", "-c", path)
	if strings.Contains(out+errOut, badInputPassword) {
		t.Errorf("check shows the auth:\n%s%s", out, errOut)
	}
}

// TestRunZooKeeperAndEtcd: two daemons, one per new backend, each run a
// scheduled job under a lease of its backend (a fencing token > 0), and
// stop cleanly.
func TestRunZooKeeperAndEtcd(t *testing.T) {
	t.Parallel()
	ens := zktest.Start(t, 1)
	cl := etcdtest.Start(t)
	for _, tc := range []struct{ name, section string }{
		{"zookeeper", fmt.Sprintf("zookeeper:\n  servers: [%s]\n  timeout: 500ms\n", ens.Addrs()[0])},
		{"etcd", fmt.Sprintf("etcd:\n  endpoints: [%s]\n", strings.Join(cl.Endpoints(), ", "))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			config, tokenFile := fenceJob(t, tc.section)
			config = strings.Replace(config, `schedule: "@hourly"`, `schedule: "@every 1s"`, 1)
			d := startDaemon(t, "-c", writeConfig(t, config), "--id", tc.name+"-host")
			d.notes.await(t, "READY=1")
			var b []byte
			for end := time.Now().Add(30 * time.Second); len(b) == 0 && time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
				b, _ = os.ReadFile(tokenFile)
			}
			if tok, err := strconv.ParseInt(string(b), 10, 64); err != nil || tok <= 0 {
				t.Errorf("LEASECRON_FENCING_TOKEN = %q after 30s; log:\n%s", b, d.stderr)
			}
			if code := d.stop(t); code != 0 {
				t.Errorf("exit %d; log:\n%s", code, d.stderr)
			}
		})
	}
}

// TestZooKeeperShortSessionRefused: servers that cap sessions under
// lease.ttl (maxSessionTimeout 4s, ttl 10s) make status and trigger fail
// at start with an error naming the server and the setting, and check
// says that such servers are refused.
func TestZooKeeperShortSessionRefused(t *testing.T) {
	t.Parallel()
	ens := zktest.StartWith(t, 1, zktest.Options{MaxSessionTimeout: 4 * time.Second})
	addr := ens.Addrs()[0]
	config, _ := fenceJob(t, fmt.Sprintf("zookeeper:\n  servers: [%s]\n  root: /e2e\n  timeout: 500ms\n", addr))
	path := writeConfig(t, config)
	if code, out, errOut := cli(t, "check", "-c", path); code != exitOK || !strings.Contains(out, "maxSessionTimeout under it, are refused") {
		t.Errorf("check: exit %d; stdout:\n%s\nstderr:\n%s\nwant it to say that short sessions are refused", code, out, errOut)
	}
	for _, cmd := range [][]string{{"status", "-c", path, "--timeout", "20s"}, {"trigger", "fenced", "-c", path}} {
		code, out, errOut := cli(t, cmd...)
		if code == exitOK || !strings.Contains(errOut, "maxSessionTimeout") || !strings.Contains(errOut, addr) || !strings.Contains(errOut, "granted 4s") {
			t.Errorf("%s: exit %d; stdout:\n%s\nstderr:\n%s\nwant a failure naming %s and maxSessionTimeout", cmd[0], code, out, errOut, addr)
		}
		t.Logf("%s: %s", cmd[0], strings.TrimSpace(errOut))
	}
}
