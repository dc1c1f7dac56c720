package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/leasecron/leasecron/internal/testkit/redistest"
)

// selfSigned writes a certificate for 127.0.0.1 and its key to dir and
// returns their paths and a pool that trusts it.
func selfSigned(t *testing.T, dir string) (certFile, keyFile string, pool *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "leasecron test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, IsCA: true, BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600); err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	pool = x509.NewCertPool()
	pool.AddCert(cert)
	return certFile, keyFile, pool
}

// TestWebConfigTLSAndPassword: with --web.config.file naming a TLS
// certificate and a basic-auth user (bcrypt hash), the status page, a
// job's page and /metrics refuse a request without the password or with
// a wrong one (401), refuse plain HTTP (400, no page), and answer over
// TLS with the password. Negative control: the same daemon without the
// flag serves the page to anyone over plain HTTP.
func TestWebConfigTLSAndPassword(t *testing.T) {
	t.Parallel()
	cl := redistest.Start(t, 3)
	dir := t.TempDir()
	certFile, keyFile, pool := selfSigned(t, dir)
	hash, err := bcrypt.GenerateFromPassword([]byte("s3cret"), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	webCfg := filepath.Join(dir, "web.yml")
	if err := os.WriteFile(webCfg, []byte("tls_server_config:\n  cert_file: "+certFile+"\n  key_file: "+keyFile+
		"\nbasic_auth_users:\n  admin: "+string(hash)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	path := writeConfig(t, jobPageConfig(cl.URLs()))

	control := startDaemon(t, "-c", path, "--id", "host-b", "--metrics", "127.0.0.1:0")
	control.notes.await(t, "READY=1")
	if code, body := get(t, "http://"+control.metricsAddr(t)+"/"); code != http.StatusOK || !strings.Contains(body, "<b>hello</b>") {
		t.Fatalf("negative control: without --web.config.file GET / is %d; want the page to anyone", code)
	}

	d := startDaemon(t, "-c", path, "--id", "host-a", "--metrics", "127.0.0.1:0", "--web.config.file", webCfg)
	d.notes.await(t, "READY=1")
	addr := d.metricsAddr(t)
	client := &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	do := func(url, user, pw string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, url, nil)
		if user != "" {
			req.SetBasicAuth(user, pw)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("GET %s: %v", url, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for _, p := range []string{"/", "/job/hello", "/metrics", "/healthz"} {
		if code, body := do("https://"+addr+p, "", ""); code != http.StatusUnauthorized || strings.Contains(body, "hello") {
			t.Errorf("GET %s without a password: %d; want 401 and no content", p, code)
		}
		if code, _ := do("https://"+addr+p, "admin", "wrong"); code != http.StatusUnauthorized {
			t.Errorf("GET %s with a wrong password: %d; want 401", p, code)
		}
	}
	if code, body := do("https://"+addr+"/", "admin", "s3cret"); code != http.StatusOK || !strings.Contains(body, "<b>hello</b>") {
		t.Errorf("GET / over TLS with the password: %d; want the page:\n%s", code, body)
	}
	if code, body := do("https://"+addr+"/metrics", "admin", "s3cret"); code != http.StatusOK || !strings.Contains(body, "leasecron_") {
		t.Errorf("GET /metrics over TLS with the password: %d", code)
	}
	code, body := get(t, "http://"+addr+"/")
	if code != http.StatusBadRequest || strings.Contains(body, "hello") {
		t.Errorf("plain HTTP to the TLS listener: %d %q; want 400 and no page", code, body)
	}
	if strings.Contains(d.stderr.String(), "s3cret") || strings.Contains(d.stderr.String(), string(hash)) {
		t.Errorf("the password or its hash reached the daemon's log")
	}
}

// TestWebConfigBad: a web config whose user has no bcrypt hash, or that
// names a missing certificate, stops `run` before it starts (exit 2); the
// flag without --metrics is a usage error.
func TestWebConfigBad(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := writeConfig(t, goodConfig)
	for name, text := range map[string]string{
		"plain password": "basic_auth_users:\n  admin: s3cret\n",
		"missing cert":   "tls_server_config:\n  cert_file: " + filepath.Join(dir, "none.pem") + "\n  key_file: " + filepath.Join(dir, "none.key") + "\n",
	} {
		webCfg := filepath.Join(dir, strings.ReplaceAll(name, " ", "-")+".yml")
		if err := os.WriteFile(webCfg, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		code, _, errOut := cli(t, "run", "-c", path, "--metrics", "127.0.0.1:0", "--web.config.file", webCfg)
		if code != exitUsage || !strings.Contains(errOut, webCfg) || strings.Contains(errOut, "s3cret") {
			t.Errorf("%s: exit %d, stderr:\n%s\nwant 2 naming the file, without the password", name, code, errOut)
		}
	}
	if code, _, errOut := cli(t, "run", "-c", path, "--web.config.file", "x.yml"); code != exitUsage || !strings.Contains(errOut, "--metrics") {
		t.Errorf("--web.config.file without --metrics: exit %d: %s", code, errOut)
	}
}
