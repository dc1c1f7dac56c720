package config

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// etcd1 and zk1 are the smallest etcd and zookeeper sections.
const (
	etcd1 = "etcd:\n  endpoints:\n    - http://127.0.0.1:2379\n"
	zk1   = "zookeeper:\n  servers:\n    - 127.0.0.1:2181\n"
)

// loadIn writes text as dir/jobs.yaml and loads it; errors are returned
// as their lines, after checking that secret appears in none of them.
func loadIn(t *testing.T, dir, text, secret string) (*Config, error) {
	t.Helper()
	path := filepath.Join(dir, "jobs.yaml")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := Load(path)
	if err != nil && secret != "" && strings.Contains(err.Error(), secret) {
		t.Errorf("secret in error: %v", err)
	}
	if c != nil && secret != "" {
		for _, s := range []string{fmt.Sprintf("%v", c), fmt.Sprintf("%+v", c), fmt.Sprintf("%#v", c),
			fmt.Sprintf("%+v %#v", c.etcd(), c.zookeeper()), strings.Join(c.Warnings, "\n")} {
			if strings.Contains(s, secret) {
				t.Errorf("secret printed: %s", s)
			}
		}
	}
	return c, err
}

// TestEtcdSection: defaults, every key, the password_file and TLS files
// resolved against the config's directory, and never the password shown.
func TestEtcdSection(t *testing.T) {
	c := mustParse(t, etcd1+job1)
	if c.backendName() != "etcd" || c.Timeout() != 500*time.Millisecond || c.etcd().Prefix != "/leasecron/" || len(c.Warnings) != 0 {
		t.Errorf("Backend %q Timeout %s Etcd %+v warnings %q", c.backendName(), c.Timeout(), c.etcd(), c.Warnings)
	}
	const pw = "etcd-hunter2"
	dir := t.TempDir()
	writeSecret(t, dir, "etcd.pass", pw+"\n", 0o600)
	c, err := loadIn(t, dir, "etcd:\n  endpoints: [http://10.0.0.1:2379, http://10.0.0.2:2379]\n  prefix: /ops/cron\n  timeout: 200ms\n"+
		"  username: lc\n  password_file: etcd.pass\n"+job1, pw)
	if err != nil {
		t.Fatal(err)
	}
	bc := c.etcd().BackendConfig()
	if bc.Password != pw || bc.Username != "lc" || bc.Prefix != "/ops/cron" || bc.Timeout != 200*time.Millisecond || len(bc.Endpoints) != 2 {
		t.Errorf("BackendConfig: %q %q %s %q", bc.Username, bc.Prefix, bc.Timeout, bc.Endpoints)
	}
	// reload: the same file is the same backend, a new password is not.
	c2, _ := loadIn(t, dir, "etcd:\n  endpoints: [http://10.0.0.1:2379, http://10.0.0.2:2379]\n  prefix: /ops/cron\n  timeout: 200ms\n"+
		"  username: lc\n  password_file: etcd.pass\n"+job1, pw)
	if !sameBackend(c, c2) {
		t.Error("the same etcd section is not the same backend")
	}
	writeSecret(t, dir, "etcd.pass", "other\n", 0o600)
	c3, _ := loadIn(t, dir, "etcd:\n  endpoints: [http://10.0.0.1:2379, http://10.0.0.2:2379]\n  prefix: /ops/cron\n  timeout: 200ms\n"+
		"  username: lc\n  password_file: etcd.pass\n"+job1, pw)
	if sameBackend(c, c3) || sameBackend(c, mustParse(t, etcd1+job1)) || sameBackend(c, mustParse(t, zk1+job1)) {
		t.Error("a changed etcd section is the same backend")
	}
}

// TestEtcdBad: every rule of the etcd section at its line and field,
// never the password.
func TestEtcdBad(t *testing.T) {
	const pw = "etcd-hunter2"
	dir := t.TempDir()
	writeSecret(t, dir, "etcd.pass", pw, 0o600)
	writeSecret(t, dir, "notpem", "not a certificate "+pw, 0o600)
	ep := func(more ...string) string { return etcd1 + strings.Join(more, "") + job1 }
	https := "etcd:\n  endpoints:\n    - https://127.0.0.1:2379\n"
	for _, tc := range []struct {
		name, config string
		line         int
		field, want  string
	}{
		{"no endpoints", "etcd:\n  prefix: /x/\n" + job1, 1, "etcd.endpoints", "at least one endpoint"},
		{"endpoints a string", "etcd:\n  endpoints: http://a:2379\n" + job1, 2, "etcd.endpoints", "must be a list of URLs"},
		{"bad scheme", "etcd:\n  endpoints:\n    - http://a:2379\n    - grpc://b:2379\n" + job1, 4, "etcd.endpoints[1]", "want http://host:port"},
		{"no port", "etcd:\n  endpoints:\n    - http://a\n" + job1, 3, "etcd.endpoints[0]", "want host:port"},
		{"credentials in URL", "etcd:\n  endpoints:\n    - http://u:" + pw + "@a:2379\n" + job1, 3, "etcd.endpoints[0]", "etcd.username"},
		{"mixed http and https", "etcd:\n  endpoints: [http://a:1, https://b:2]\n" + job1, 2, "etcd.endpoints", "mixes http and https"},
		{"relative prefix", ep("  prefix: leasecron/\n"), 4, "etcd.prefix", "must start with '/'"},
		{"empty prefix", ep("  prefix: ''\n"), 4, "etcd.prefix", "empty key prefix"},
		{"bad timeout", ep("  timeout: soon\n"), 4, "etcd.timeout", `bad duration "soon"`},
		{"zero timeout", ep("  timeout: 0s\n"), 4, "etcd.timeout", "must be positive"},
		{"timeout vs ttl", ep("  timeout: 3s\n"), 4, "etcd.timeout", "less than a tenth of lease.ttl (3s)"},
		{"ttl margin counts etcd.timeout", ep("  timeout: 1s\nlease:\n  ttl: 12s\n"), 6, "lease.ttl", "2×etcd.timeout"},
		{"username without password", ep("  username: lc\n"), 4, "etcd.username", "give both or neither"},
		{"password_file without username", ep("  password_file: etcd.pass\n"), 4, "etcd.password_file", "give both or neither"},
		{"missing password_file", ep("  username: lc\n  password_file: nope.pass\n"), 5, "etcd.password_file", "cannot read"},
		{"password key", ep("  password: " + pw + "\n"), 4, "etcd.password", "password_file"},
		{"unknown key", ep("  endpoint: x\n"), 4, "etcd.endpoint", `did you mean "endpoints"?`},
		{"cert without key", https + "  cert_file: c.pem\n" + job1, 4, "etcd.cert_file", "give both or neither"},
		{"tls with http", ep("  ca_file: ca.pem\n"), 4, "etcd.ca_file", "endpoints are http://"},
		{"missing ca_file", https + "  ca_file: ca.pem\n" + job1, 4, "etcd.ca_file", "no such file"},
		{"ca_file not PEM", https + "  ca_file: notpem\n" + job1, 4, "etcd.ca_file", "no PEM certificate"},
		{"second section", etcd1 + zk1 + job1, 4, "zookeeper", "a second backend section: the file chose etcd at line 1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := loadIn(t, dir, tc.config, pw)
			if err == nil {
				t.Fatalf("no error; want %d %s: %q", tc.line, tc.field, tc.want)
			}
			for _, e := range configErrors(t, err) {
				if e.Line == tc.line && e.Field == tc.field && strings.Contains(e.Msg, tc.want) && strings.HasSuffix(e.File, "jobs.yaml") {
					return
				}
			}
			t.Errorf("no error at line %d for %q mentioning %q in:\n%v", tc.line, tc.field, tc.want, err)
		})
	}
}

// TestZooKeeperSection: defaults, every key, auth and auth_file (read
// relative to the config, never shown), the session timeout from
// lease.ttl.
func TestZooKeeperSection(t *testing.T) {
	c := mustParse(t, zk1+job1)
	if c.backendName() != "zookeeper" || c.Timeout() != time.Second || c.zookeeper().Root != "/leasecron" || c.zookeeper().HasAuth() || len(c.Warnings) != 0 {
		t.Errorf("Backend %q Timeout %s ZooKeeper %+v warnings %q", c.backendName(), c.Timeout(), c.zookeeper(), c.Warnings)
	}
	if bc := c.zookeeper().BackendConfig(c.Lease.TTL, c.Lease.Drift); bc.SessionTimeout != 30*time.Second || bc.Drift != 0.01 || bc.Auth != "" {
		t.Errorf("BackendConfig %+v", bc)
	}
	const auth = "lc:zk-hunter2"
	dir := t.TempDir()
	writeSecret(t, dir, "zk.auth", auth+"\n", 0o600)
	for _, text := range []string{
		"zookeeper:\n  servers: [10.0.0.1:2181, 10.0.0.2:2181]\n  root: /ops/cron\n  timeout: 300ms\n  auth_file: zk.auth\n" + job1,
		"zookeeper:\n  servers: [10.0.0.1:2181, 10.0.0.2:2181]\n  root: /ops/cron\n  timeout: 300ms\n  auth: " + auth + "\n" + job1,
	} {
		c, err := loadIn(t, dir, text, "zk-hunter2")
		if err != nil {
			t.Fatal(err)
		}
		bc := c.zookeeper().BackendConfig(c.Lease.TTL, c.Lease.Drift)
		if bc.Auth != auth || bc.Root != "/ops/cron" || bc.Timeout != 300*time.Millisecond || len(bc.Servers) != 2 || !c.zookeeper().HasAuth() {
			t.Errorf("BackendConfig: %q %s %q", bc.Root, bc.Timeout, bc.Servers)
		}
		if !sameBackend(c, c) || sameBackend(c, mustParse(t, zk1+job1)) {
			t.Error("sameBackend")
		}
	}
}

// TestZooKeeperBad: every rule of the zookeeper section at its line and
// field, never the auth.
func TestZooKeeperBad(t *testing.T) {
	const secret = "zk-hunter2"
	dir := t.TempDir()
	writeSecret(t, dir, "nocolon.auth", secret, 0o600)
	writeSecret(t, dir, "good.auth", "lc:"+secret, 0o600)
	zk := func(more ...string) string { return zk1 + strings.Join(more, "") + job1 }
	for _, tc := range []struct {
		name, config string
		line         int
		field, want  string
	}{
		{"no servers", "zookeeper:\n  root: /x\n" + job1, 1, "zookeeper.servers", "at least one server"},
		{"servers a string", "zookeeper:\n  servers: a:2181\n" + job1, 2, "zookeeper.servers", "must be a list of host:port"},
		{"no port", "zookeeper:\n  servers:\n    - a:2181\n    - b\n" + job1, 4, "zookeeper.servers[1]", "want host:port"},
		{"bad port", "zookeeper:\n  servers:\n    - a:99999\n" + job1, 3, "zookeeper.servers[0]", "bad port"},
		{"relative root", zk("  root: leasecron\n"), 4, "zookeeper.root", "want an absolute path"},
		{"root with a trailing slash", zk("  root: /leasecron/\n"), 4, "zookeeper.root", "want an absolute path"},
		{"empty root", zk("  root: ''\n"), 4, "zookeeper.root", "empty root"},
		{"zero timeout", zk("  timeout: 0s\n"), 4, "zookeeper.timeout", "must be positive"},
		{"timeout vs ttl", zk("  timeout: 3s\n"), 4, "zookeeper.timeout", "less than a tenth of lease.ttl (3s)"},
		{"default timeout vs ttl", zk("lease:\n  ttl: 8s\n  renew: 1s\ndefaults:\n  kill_grace: 1s\n"), 1, "zookeeper.timeout", "timeout 1s (the default) must be less than a tenth"},
		{"ttl margin counts zookeeper.timeout", zk("  timeout: 1s\nlease:\n  ttl: 12s\n"), 6, "lease.ttl", "2×zookeeper.timeout"},
		{"auth without colon", zk("  auth: " + secret + "\n"), 4, "zookeeper.auth", "want user:password"},
		{"auth_file without colon", zk("  auth_file: nocolon.auth\n"), 4, "zookeeper.auth_file", "want user:password"},
		{"missing auth_file", zk("  auth_file: nope.auth\n"), 4, "zookeeper.auth_file", "cannot read"},
		{"auth and auth_file", zk("  auth: lc:" + secret + "\n  auth_file: good.auth\n"), 5, "zookeeper.auth_file", "not both"},
		{"unknown key", zk("  server: x\n"), 4, "zookeeper.server", `did you mean "servers"?`},
		{"session_timeout key", zk("  session_timeout: 10s\n"), 4, "zookeeper.session_timeout", "unknown key"},
		{"second section", zk1 + etcd1 + job1, 4, "etcd", "a second backend section: the file chose zookeeper at line 1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := loadIn(t, dir, tc.config, secret)
			if err == nil {
				t.Fatalf("no error; want %d %s: %q", tc.line, tc.field, tc.want)
			}
			for _, e := range configErrors(t, err) {
				if e.Line == tc.line && e.Field == tc.field && strings.Contains(e.Msg, tc.want) && strings.HasSuffix(e.File, "jobs.yaml") {
					return
				}
			}
			t.Errorf("no error at line %d for %q mentioning %q in:\n%v", tc.line, tc.field, tc.want, err)
		})
	}
}

// exampleWith returns jobs.example.yaml with its redis section replaced by
// the commented section starting at "# NAME:", uncommented.
func exampleWith(t *testing.T, name string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "jobs.example.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	text := string(data)
	start := strings.Index(text, "\nredis:\n")
	end := start + 1 + strings.Index(text[start+1:], "\n\n")
	sStart := strings.Index(text, "# "+name+":\n")
	sEnd := sStart + strings.Index(text[sStart:], "\n\n")
	if start < 0 || end <= start || sStart < 0 || sEnd <= sStart {
		t.Fatalf("jobs.example.yaml has no redis section and commented %s section", name)
	}
	var lines []string
	for _, line := range strings.Split(text[sStart:sEnd], "\n") {
		lines = append(lines, strings.TrimPrefix(strings.TrimPrefix(line, "#"), " "))
	}
	return text[:start+1] + strings.Join(lines, "\n") + text[end:]
}

// selfSigned writes a self-signed certificate and its key in dir.
func selfSigned(t *testing.T, dir string) (certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "leasecron test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile = writeSecret(t, dir, "cert.pem", string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})), 0o644)
	keyFile = writeSecret(t, dir, "key.pem", string(pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})), 0o600)
	return certFile, keyFile
}

// TestExampleEtcd: the commented etcd section of jobs.example.yaml, in
// place of its redis section, loads cleanly (its files replaced by real
// ones), and its TLS files are checked.
func TestExampleEtcd(t *testing.T) {
	text := exampleWith(t, "etcd")
	dir := t.TempDir()
	cert, key := selfSigned(t, dir)
	r := strings.NewReplacer("/etc/leasecron/etcd.pass", writeSecret(t, dir, "etcd.pass", "pw", 0o600),
		"/etc/leasecron/etcd-ca.pem", cert, "/etc/leasecron/etcd-client.pem", cert, "/etc/leasecron/etcd-client.key", key)
	c, err := Parse(strings.NewReader(r.Replace(text)), "jobs.example.yaml")
	if err != nil {
		t.Fatalf("%v\n%s", err, text)
	}
	if c.backendName() != "etcd" || len(c.etcd().Endpoints) != 3 || c.etcd().Username != "leasecron" || len(c.Jobs) == 0 || len(c.Warnings) != 0 {
		t.Errorf("backend %q, %+v, %d jobs, warnings %q", c.backendName(), c.etcd(), len(c.Jobs), c.Warnings)
	}
	if bc := c.etcd().BackendConfig(); bc.Password != "pw" || bc.CAFile != cert || bc.KeyFile != key {
		t.Errorf("BackendConfig: CA %q key %q", bc.CAFile, bc.KeyFile)
	}
	// As written (no such files), the TLS files are reported.
	_, err = Parse(strings.NewReader(strings.ReplaceAll(text, "/etc/leasecron/etcd.pass", writeSecret(t, dir, "p2", "pw", 0o600))), "jobs.yaml")
	wantError(t, err, lineOf(t, text, "ca_file:"), "etcd.ca_file", "no such file")
}

// TestExampleZooKeeper: the commented zookeeper section of
// jobs.example.yaml, in place of its redis section, loads cleanly.
func TestExampleZooKeeper(t *testing.T) {
	text := exampleWith(t, "zookeeper")
	dir := t.TempDir()
	text = strings.ReplaceAll(text, "/etc/leasecron/zookeeper.auth", writeSecret(t, dir, "zk.auth", "lc:pw\n", 0o600))
	c, err := Parse(strings.NewReader(text), "jobs.example.yaml")
	if err != nil {
		t.Fatalf("%v\n%s", err, text)
	}
	if c.backendName() != "zookeeper" || len(c.zookeeper().Servers) != 3 || !c.zookeeper().HasAuth() || len(c.Jobs) == 0 || len(c.Warnings) != 0 {
		t.Errorf("backend %q, %+v, %d jobs, warnings %q", c.backendName(), c.zookeeper(), len(c.Jobs), c.Warnings)
	}
	if bc := c.zookeeper().BackendConfig(c.Lease.TTL, c.Lease.Drift); bc.SessionTimeout != c.Lease.TTL || bc.Auth != "lc:pw" {
		t.Errorf("BackendConfig: session timeout %s", bc.SessionTimeout)
	}
}

// lineOf is the 1-based line of the first line of text containing s.
func lineOf(t *testing.T, text, s string) int {
	t.Helper()
	for i, l := range strings.Split(text, "\n") {
		if strings.Contains(l, s) {
			return i + 1
		}
	}
	t.Fatalf("no %q", s)
	return 0
}
