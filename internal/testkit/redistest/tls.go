package redistest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// CA is a throwaway certificate authority made for one test, with one
// server certificate for 127.0.0.1 and localhost signed by it. Nodes
// started WithTLS(ca) serve TLS with that certificate. Trust CAFile (or
// ClientConfig) to connect: it is in no system trust store.
type CA struct {
	// CAFile is the CA certificate in PEM, for SSL_CERT_FILE or
	// redis-server's --tls-ca-cert-file.
	CAFile string

	certFile string // server certificate, PEM
	keyFile  string // its private key, PEM
	pool     *x509.CertPool
}

// NewCA makes a CA and a server certificate valid for a day, in a
// t.TempDir(). A failure fails the test.
func NewCA(t testing.TB) *CA {
	t.Helper()
	dir := t.TempDir()
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "redistest CA"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	caCert, caDER, caKey := issue(t, caTmpl, nil, nil)
	_, der, key := issue(t, &x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: "127.0.0.1"},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
		DNSNames:     []string{"localhost"},
	}, caCert, caKey)
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatalf("redistest: server key: %v", err)
	}
	ca := &CA{
		CAFile:   filepath.Join(dir, "ca.pem"),
		certFile: filepath.Join(dir, "server.pem"),
		keyFile:  filepath.Join(dir, "server-key.pem"),
		pool:     x509.NewCertPool(),
	}
	ca.pool.AddCert(caCert)
	for path, block := range map[string]*pem.Block{
		ca.CAFile:   {Type: "CERTIFICATE", Bytes: caDER},
		ca.certFile: {Type: "CERTIFICATE", Bytes: der},
		ca.keyFile:  {Type: "EC PRIVATE KEY", Bytes: keyDER},
	} {
		if err := os.WriteFile(path, pem.EncodeToMemory(block), 0o600); err != nil {
			t.Fatalf("redistest: %v", err)
		}
	}
	return ca
}

// issue makes a P-256 key and a certificate for it from tmpl, signed by
// parent's key (self-signed when parent is nil).
func issue(t testing.TB, tmpl, parent *x509.Certificate, parentKey *ecdsa.PrivateKey) (*x509.Certificate, []byte, *ecdsa.PrivateKey) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatalf("redistest: key for %s: %v", tmpl.Subject.CommonName, err)
	}
	if parent == nil {
		parent, parentKey = tmpl, key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, parentKey)
	if err != nil {
		t.Fatalf("redistest: certificate for %s: %v", tmpl.Subject.CommonName, err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatalf("redistest: certificate for %s: %v", tmpl.Subject.CommonName, err)
	}
	return cert, der, key
}

// ClientConfig returns a TLS client configuration that trusts only this
// CA. It sets no ServerName: the client must use the host it dials.
func (ca *CA) ClientConfig() *tls.Config {
	return &tls.Config{RootCAs: ca.pool, MinVersion: tls.VersionTLS12}
}

// WithTLS makes the nodes also serve TLS, on a second port (Node.TLSAddr),
// with ca's server certificate. Clients are not asked for certificates
// (--tls-auth-clients no). The plain port stays open for Client, Keys and
// the start-up check.
func WithTLS(ca *CA) Option {
	return func(c *config) { c.tls = ca }
}
