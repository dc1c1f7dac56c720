package etcd_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/leasecron/leasecron/lease/etcd"
)

// TestCheckConfig: CheckConfig accepts a good configuration and rejects
// each bad one without connecting, naming the field and never the
// password.
func TestCheckConfig(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	notPEM := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(notPEM, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	eps := []string{"http://127.0.0.1:2379", "http://[::1]:2379", "http://etcd-1.example:2379"}
	if err := etcd.CheckConfig(etcd.Config{Endpoints: eps, Prefix: "/leasecron", Username: "u", Password: "s3cret"}); err != nil {
		t.Fatalf("good configuration: %v", err)
	}
	const pw = "s3cret-pw"
	for _, tc := range []struct {
		name string
		cfg  etcd.Config
		want string
	}{
		{"no endpoints", etcd.Config{}, "etcd.endpoints"},
		{"no scheme", etcd.Config{Endpoints: []string{"127.0.0.1:2379"}}, "etcd.endpoints[0]"},
		{"unix scheme", etcd.Config{Endpoints: []string{"unix:///run/etcd.sock"}}, "etcd.endpoints[0]"},
		{"no port", etcd.Config{Endpoints: []string{"http://127.0.0.1"}}, "want host:port"},
		{"bad port", etcd.Config{Endpoints: []string{"http://127.0.0.1:0"}}, "bad port"},
		{"path", etcd.Config{Endpoints: []string{"http://127.0.0.1:2379/v3"}}, "no path"},
		{"password in URL", etcd.Config{Endpoints: []string{"http://root:" + pw + "@127.0.0.1:2379"}}, "etcd.username"},
		{"mixed schemes", etcd.Config{Endpoints: []string{"http://a:1", "https://b:1"}}, "mixes http and https"},
		{"relative prefix", etcd.Config{Endpoints: eps, Prefix: "leasecron/"}, "etcd.prefix"},
		{"negative timeout", etcd.Config{Endpoints: eps, Timeout: -time.Second}, "etcd.timeout"},
		{"password alone", etcd.Config{Endpoints: eps, Password: pw}, "etcd.username"},
		{"cert without key", etcd.Config{Endpoints: []string{"https://a:1"}, CertFile: notPEM}, "etcd.key_file"},
		{"TLS files for http", etcd.Config{Endpoints: eps, CAFile: notPEM}, "etcd.ca_file"},
		{"missing CA file", etcd.Config{Endpoints: []string{"https://a:1"}, CAFile: filepath.Join(dir, "nope.pem")}, "nope.pem"},
		{"CA file not PEM", etcd.Config{Endpoints: []string{"https://a:1"}, CAFile: notPEM}, "no PEM certificate"},
	} {
		err := etcd.CheckConfig(tc.cfg)
		if err == nil {
			t.Errorf("%s: accepted", tc.name)
			continue
		}
		if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %q does not say %q", tc.name, err, tc.want)
		}
		if strings.Contains(err.Error(), pw) {
			t.Errorf("%s: %q quotes the password", tc.name, err)
		}
	}
}

// TestGrantSeconds: lease.ttl maps to whole seconds, rounded up.
func TestGrantSeconds(t *testing.T) {
	t.Parallel()
	for d, want := range map[time.Duration]int64{
		time.Millisecond: 1, time.Second: 1, 1500 * time.Millisecond: 2, 2 * time.Second: 2, 90 * time.Second: 90,
	} {
		if got := etcd.GrantSeconds(d); got != want {
			t.Errorf("GrantSeconds(%s) = %d, want %d", d, got, want)
		}
	}
	if s := etcd.DescribeTTL(1500 * time.Millisecond); !strings.Contains(s, "2s") || !strings.Contains(s, "1.5s") {
		t.Errorf("DescribeTTL: %q", s)
	}
}
