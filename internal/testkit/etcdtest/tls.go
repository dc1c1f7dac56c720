package etcdtest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
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

// Option configures Start.
type Option func(*Cluster)

// TLS is a throwaway CA and one certificate it signed, for 127.0.0.1,
// usable by the members as server and by clients as client certificate.
type TLS struct {
	CAFile, CertFile, KeyFile string
}

// WithTLS makes the members serve https:// client URLs with a throwaway
// CA's certificate and require client certificates signed by it
// (--client-cert-auth). Cluster.TLS returns the files. Peers stay http.
func WithTLS() Option { return func(c *Cluster) { c.tlsOn = true } }

// newTLS writes the CA and the certificate in a t.TempDir().
func newTLS(t testing.TB) *TLS {
	t.Helper()
	dir := t.TempDir()
	now := time.Now()
	caKey := genKey(t)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "etcdtest CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature, BasicConstraintsValid: true, IsCA: true}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatalf("etcdtest: CA: %v", err)
	}
	caCert, _ := x509.ParseCertificate(caDER)
	key := genKey(t)
	der, err := x509.CreateCertificate(rand.Reader, &x509.Certificate{SerialNumber: big.NewInt(2),
		Subject: pkix.Name{CommonName: "127.0.0.1"}, NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, DNSNames: []string{"localhost"},
	}, caCert, &key.PublicKey, caKey)
	if err != nil {
		t.Fatalf("etcdtest: certificate: %v", err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatalf("etcdtest: key: %v", err)
	}
	tl := &TLS{CAFile: filepath.Join(dir, "ca.pem"), CertFile: filepath.Join(dir, "cert.pem"), KeyFile: filepath.Join(dir, "key.pem")}
	for path, b := range map[string]*pem.Block{
		tl.CAFile:   {Type: "CERTIFICATE", Bytes: caDER},
		tl.CertFile: {Type: "CERTIFICATE", Bytes: der},
		tl.KeyFile:  {Type: "EC PRIVATE KEY", Bytes: keyDER},
	} {
		if err := os.WriteFile(path, pem.EncodeToMemory(b), 0o600); err != nil {
			t.Fatalf("etcdtest: %v", err)
		}
	}
	return tl
}

func genKey(t testing.TB) *ecdsa.PrivateKey {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatalf("etcdtest: key: %v", err)
	}
	return k
}
