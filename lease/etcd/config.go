package etcd

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/leasecron/leasecron/lease"
)

// Defaults of Config and of the options.
const (
	// DefaultPrefix is the key prefix when Config.Prefix is empty.
	DefaultPrefix = "/leasecron/"
	// DefaultTimeout bounds each request when Config.Timeout is zero.
	DefaultTimeout = 500 * time.Millisecond
	// DefaultDrift is the clock drift factor subtracted from validities.
	DefaultDrift = lease.DefaultDrift
	// DefaultMaxTxnOps is etcd's default --max-txn-ops.
	DefaultMaxTxnOps = 128
	// DefaultRetryEvery is Acquire's pause between attempts (± 25 %).
	DefaultRetryEvery = 100 * time.Millisecond
)

// Config names the cluster and how to reach it; it maps to the etcd
// section of leasecron's configuration.
type Config struct {
	// Endpoints are the members' client URLs, http://host:port or
	// https://host:port. Only these are used (no member discovery).
	Endpoints []string
	// Prefix starts every key (default DefaultPrefix); it must start with
	// '/' and is given a trailing '/' if it has none.
	Prefix string
	// Timeout bounds each request (default DefaultTimeout). Hold's safety
	// margin is derived from it.
	Timeout time.Duration
	// Username and Password log in with etcd's authentication; both or
	// neither. The password is never logged nor put in errors.
	Username, Password string
	// CAFile verifies the members' certificates (default: the system's
	// roots); CertFile and KeyFile, both or neither, are the client's
	// certificate. Any of them requires https endpoints.
	CAFile, CertFile, KeyFile string
	// Drift is the clock drift factor: validity = ttl - elapsed -
	// (ttl × drift + 2 ms). Default (0) DefaultDrift; lease.NoDrift for
	// none; else in [0, 1).
	Drift float64
	// MaxTxnOps is the cluster's --max-txn-ops (default DefaultMaxTxnOps),
	// which bounds how many keys one batch transaction carries (4 fewer).
	MaxTxnOps int
	// RetryEvery is Acquire's pause between attempts (default
	// DefaultRetryEvery, ± 25 %).
	RetryEvery time.Duration
}

// CheckConfig validates cfg without connecting: endpoint URLs, prefix,
// timeout, credentials and that the TLS files exist and parse. Each error
// names the field (etcd.endpoints[1], etcd.ca_file, ...) and never the
// password; several errors are joined.
func CheckConfig(cfg Config) error {
	var errs []error
	if len(cfg.Endpoints) == 0 {
		errs = append(errs, errors.New("etcd.endpoints: at least one endpoint is required"))
	}
	https := 0
	for i, ep := range cfg.Endpoints {
		secure, err := checkEndpoint(ep)
		if err != nil {
			errs = append(errs, fmt.Errorf("etcd.endpoints[%d]: %w", i, err))
		} else if secure {
			https++
		}
	}
	if https > 0 && https < len(cfg.Endpoints) {
		errs = append(errs, errors.New("etcd.endpoints: mixes http and https endpoints"))
	}
	if cfg.Prefix != "" && !strings.HasPrefix(cfg.Prefix, "/") {
		errs = append(errs, fmt.Errorf("etcd.prefix %q: must start with '/'", cfg.Prefix))
	}
	if cfg.Timeout < 0 {
		errs = append(errs, fmt.Errorf("etcd.timeout %s: must not be negative", cfg.Timeout))
	}
	if (cfg.Username == "") != (cfg.Password == "") {
		errs = append(errs, errors.New("etcd.username and etcd.password: give both or neither"))
	}
	if (cfg.CertFile == "") != (cfg.KeyFile == "") {
		errs = append(errs, errors.New("etcd.cert_file and etcd.key_file: give both or neither"))
	}
	if (cfg.CAFile != "" || cfg.CertFile != "") && https == 0 && len(cfg.Endpoints) > 0 {
		errs = append(errs, errors.New("etcd.ca_file/cert_file: TLS files given but the endpoints are http://"))
	}
	if len(errs) == 0 && https > 0 {
		if _, err := tlsConfig(cfg); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// checkEndpoint parses one endpoint URL and reports whether it is https.
func checkEndpoint(ep string) (bool, error) {
	u, err := url.Parse(ep)
	if err != nil {
		return false, fmt.Errorf("%q: %w", ep, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return false, fmt.Errorf("%q: want http://host:port or https://host:port", ep)
	}
	if u.User != nil {
		return false, fmt.Errorf("%s://%s: credentials belong in etcd.username and etcd.password, not the URL", u.Scheme, u.Host)
	}
	if (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" {
		return false, fmt.Errorf("%q: no path, query or fragment allowed", ep)
	}
	host, port, err := net.SplitHostPort(u.Host)
	if err != nil || host == "" {
		return false, fmt.Errorf("%q: want host:port", ep)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return false, fmt.Errorf("%q: bad port %q", ep, port)
	}
	return u.Scheme == "https", nil
}

// tlsConfig loads the CA and the client certificate.
func tlsConfig(cfg Config) (*tls.Config, error) {
	tc := &tls.Config{MinVersion: tls.VersionTLS12}
	if cfg.CAFile != "" {
		pem, err := os.ReadFile(cfg.CAFile)
		if err != nil {
			return nil, fmt.Errorf("etcd.ca_file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("etcd.ca_file %s: no PEM certificate found", cfg.CAFile)
		}
		tc.RootCAs = pool
	}
	if cfg.CertFile != "" {
		c, err := tls.LoadX509KeyPair(cfg.CertFile, cfg.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("etcd.cert_file/key_file: %w", err)
		}
		tc.Certificates = []tls.Certificate{c}
	}
	return tc, nil
}

// withDefaults fills in the defaults and normalizes the prefix.
func (cfg Config) withDefaults() Config {
	if cfg.Prefix == "" {
		cfg.Prefix = DefaultPrefix
	}
	if !strings.HasSuffix(cfg.Prefix, "/") {
		cfg.Prefix += "/"
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = DefaultTimeout
	}
	cfg.Drift = lease.DriftOf(cfg.Drift)
	if cfg.MaxTxnOps == 0 {
		cfg.MaxTxnOps = DefaultMaxTxnOps
	}
	if cfg.RetryEvery == 0 {
		cfg.RetryEvery = DefaultRetryEvery
	}
	return cfg
}

// GrantSeconds is the etcd lease TTL requested for a lease.ttl of d:
// ceil(d) in whole seconds, at least 1. The server may raise it to its
// minimum TTL. Validity is never counted from the rounded-up value.
func GrantSeconds(d time.Duration) int64 {
	s := int64((d + time.Second - 1) / time.Second)
	return max(s, 1)
}

// options are the timing settings of an open Backend (from its Config).
type options struct {
	drift      float64
	maxTxnOps  int
	retryEvery time.Duration
}

// explainTLS adds, to a request error of an https cluster, why a TLS
// handshake with the first endpoint that refuses one fails (an untrusted
// certificate, a missing client certificate): gRPC reports such failures
// only as a timeout. It returns err unchanged when every handshake works.
func explainTLS(err error, cfg Config, tc *tls.Config) error {
	if err == nil || tc == nil {
		return err
	}
	for _, ep := range cfg.Endpoints {
		u, perr := url.Parse(ep)
		if perr != nil {
			continue
		}
		d := &net.Dialer{Timeout: max(cfg.Timeout, time.Second)}
		c := tc.Clone()
		c.ServerName = u.Hostname()
		conn, herr := tls.DialWithDialer(d, "tcp", u.Host, c)
		if herr == nil {
			// TLS 1.3 reports a rejected client certificate on the first read.
			_ = conn.SetReadDeadline(time.Now().Add(d.Timeout))
			_, herr = conn.Read(make([]byte, 1))
			_ = conn.Close()
			if herr == nil || isTimeout(herr) {
				continue
			}
		}
		var ne net.Error
		if errors.As(herr, &ne) && !isTLSError(herr) {
			continue // not a TLS problem: the endpoint is down, say
		}
		return fmt.Errorf("%w (TLS handshake with %s: %v)", err, ep, herr)
	}
	return err
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// isTLSError reports whether err came from certificate checks or a TLS
// alert rather than from the network.
func isTLSError(err error) bool {
	var ue x509.UnknownAuthorityError
	var he x509.HostnameError
	var ce x509.CertificateInvalidError
	var ae tls.AlertError
	var ve *tls.CertificateVerificationError
	return errors.As(err, &ue) || errors.As(err, &he) || errors.As(err, &ce) || errors.As(err, &ae) || errors.As(err, &ve) ||
		strings.Contains(err.Error(), "tls:")
}

// DescribeTTL says how a lease.ttl maps onto etcd's whole-second leases,
// for `leasecron check`: e.g. "lease.ttl 1.5s: etcd leases of 2s (whole
// seconds, or the cluster's minimum TTL if larger); validity counts 1.5s".
func DescribeTTL(ttl time.Duration) string {
	return fmt.Sprintf("lease.ttl %s: etcd leases of %ds (whole seconds, or the cluster's minimum TTL if larger); validity counts %s",
		ttl, GrantSeconds(ttl), ttl)
}
