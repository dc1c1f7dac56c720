package etcd_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/leasecron/leasecron/internal/testkit/etcdtest"
	"github.com/leasecron/leasecron/lease"
	"github.com/leasecron/leasecron/lease/etcd"
)

// TestTLSAndAuth: on a cluster serving https with client certificates
// and etcd authentication, the backend works with the right CA, client
// certificate and password; a wrong password, a missing client
// certificate or an untrusted server each fail, naming the endpoints and
// never quoting the password.
func TestTLSAndAuth(t *testing.T) {
	t.Parallel()
	const pw = "s3cret-pw"
	c := etcdtest.Start(t, etcdtest.WithTLS())
	c.EnableAuth(pw)
	tl := c.TLS()
	good := etcd.Config{Endpoints: c.Endpoints(), Prefix: "/tls/", Timeout: time.Second,
		Username: "root", Password: pw, CAFile: tl.CAFile, CertFile: tl.CertFile, KeyFile: tl.KeyFile}
	if err := etcd.CheckConfig(good); err != nil {
		t.Fatal(err)
	}
	try := func(cfg etcd.Config) error {
		b, err := etcd.Open(context.Background(), cfg)
		if err != nil {
			return err
		}
		defer b.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		l, err := b.Acquire(ctx, lease.Request{Key: "k", TTL: testTTL})
		if err == nil {
			err = l.Release(ctx)
		}
		return err
	}
	if err := try(good); err != nil {
		t.Fatalf("good configuration: %v", err)
	}
	bad := map[string]etcd.Config{}
	// What each error must say besides the endpoints.
	why := map[string]string{"wrong password": "authentication failed", "no client certificate": "bad certificate",
		"untrusted server": "unknown authority"}
	wrong := good
	wrong.Password = "wrong-" + pw
	bad["wrong password"] = wrong
	noCert := good
	noCert.CertFile, noCert.KeyFile = "", ""
	bad["no client certificate"] = noCert
	noCA := good
	noCA.CAFile = ""
	bad["untrusted server"] = noCA
	for name, cfg := range bad {
		err := try(cfg)
		if err == nil {
			t.Errorf("%s: no error", name)
			continue
		}
		if strings.Contains(err.Error(), pw) {
			t.Errorf("%s: error quotes the password: %v", name, err)
		}
		if !strings.Contains(err.Error(), c.Endpoints()[0]) {
			t.Errorf("%s: error does not name the endpoints: %v", name, err)
		}
		if !strings.Contains(err.Error(), why[name]) {
			t.Errorf("%s: error does not say %q: %v", name, why[name], err)
		}
		t.Logf("%s: %v", name, err)
	}
}
