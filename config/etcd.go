package config

import (
	"context"
	"fmt"
	"net/url"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/leasecron/leasecron/lease"
	"github.com/leasecron/leasecron/lease/etcd"
)

// EtcdConfig is the "etcd" section: leases are keys bound to etcd leases
// in an etcd cluster (v3 API, package lease/etcd).
type EtcdConfig struct {
	// Endpoints are the members' client URLs, http://host:port or
	// https://host:port; at least one.
	Endpoints []string
	// Prefix starts every key; default "/leasecron/". It must start with
	// '/'.
	Prefix string
	// Timeout bounds each request; default 500ms. It must be less than a
	// tenth of Lease.TTL.
	Timeout time.Duration
	// Username logs in with etcd's authentication, with the password of
	// PasswordFile; both or neither.
	Username string
	// PasswordFile names a file holding the password (a relative path is
	// read from the config file's directory). Validate reads it.
	PasswordFile string
	// CAFile verifies the members' certificates; CertFile and KeyFile (both
	// or neither) are the client's. Any of them requires https endpoints.
	// Relative paths are read from the config file's directory.
	CAFile, CertFile, KeyFile string

	password *secret // read from PasswordFile by Validate
	dir      string  // the config file's directory, set by Validate
}

// rawEtcd is the etcd section as yaml.v3 decodes it.
type rawEtcd struct {
	Endpoints    []*text  `yaml:"endpoints" want:"must be a list of URLs such as http://127.0.0.1:2379, not %s"`
	Prefix       text     `yaml:"prefix"`
	Timeout      duration `yaml:"timeout"`
	Username     text     `yaml:"username"`
	PasswordFile text     `yaml:"password_file"`
	CAFile       text     `yaml:"ca_file"`
	CertFile     text     `yaml:"cert_file"`
	KeyFile      text     `yaml:"key_file"`
}

// BackendConfig returns the etcd.Config to open: the password read from
// PasswordFile and the TLS files resolved against the config file's
// directory. The result carries a secret: hand it to etcd.Open, never log
// or print it.
func (e *EtcdConfig) BackendConfig() etcd.Config {
	cfg := etcd.Config{
		Endpoints: slices.Clone(e.Endpoints),
		Prefix:    e.Prefix,
		Timeout:   e.Timeout,
		Username:  e.Username,
		CAFile:    e.path(e.CAFile),
		CertFile:  e.path(e.CertFile),
		KeyFile:   e.path(e.KeyFile),
	}
	if e.password != nil {
		cfg.Password = e.password.s
	}
	return cfg
}

// path resolves a relative file name against the config file's directory.
func (e *EtcdConfig) path(p string) string {
	if p == "" || filepath.IsAbs(p) || e.dir == "" {
		return p
	}
	return filepath.Join(e.dir, p)
}

// NewEtcd returns an etcd section of endpoints with the documented
// defaults: Prefix "/leasecron/", Timeout 500ms.
func NewEtcd(endpoints ...string) *EtcdConfig {
	return &EtcdConfig{Endpoints: endpoints, Prefix: defaultEtcdPrefix, Timeout: defaultEtcdTimeout}
}

// Name returns "etcd".
func (e *EtcdConfig) Name() string { return "etcd" }

// RequestTimeout returns Timeout, the per-request timeout.
func (e *EtcdConfig) RequestTimeout() time.Duration { return e.Timeout }

// Equal reports whether o is an etcd section that opens the same cluster
// the same way.
func (e *EtcdConfig) Equal(other Section) bool {
	o, ok := other.(*EtcdConfig)
	if !ok {
		return false
	}
	a, b := e.BackendConfig(), o.BackendConfig()
	return slices.Equal(a.Endpoints, b.Endpoints) && a.Prefix == b.Prefix && a.Timeout == b.Timeout &&
		a.Username == b.Username && a.Password == b.Password &&
		a.CAFile == b.CAFile && a.CertFile == b.CertFile && a.KeyFile == b.KeyFile
}

// Summary names the endpoints and how etcd rounds lease.ttl.
func (e *EtcdConfig) Summary(l LeaseConfig) string {
	return "etcd " + strings.Join(e.Endpoints, ",") + "; " + etcd.DescribeTTL(l.TTL)
}

// Open connects to the cluster (with the password of PasswordFile).
func (e *EtcdConfig) Open(ctx context.Context, o OpenOptions) (lease.Backend, error) {
	ec := e.BackendConfig()
	ec.Timeout = max(ec.Timeout, o.MinTimeout)
	octx, cancel := context.WithTimeout(ctx, openTimeout(ec.Timeout, o))
	defer cancel()
	ec.Drift = driverDrift(o.Lease.Drift)
	be, err := etcd.Open(octx, ec)
	if err != nil {
		return nil, fmt.Errorf("etcd %s: %w", strings.Join(e.Endpoints, ","), err)
	}
	return be, nil
}

// section builds the etcd section from the file.
func (r *rawEtcd) section(d *decoder) Section {
	dst := NewEtcd()
	dst.Endpoints = d.texts("etcd.endpoints", r.Endpoints, "empty endpoint URL")
	for _, f := range []struct {
		key string
		src text
		dst *string
	}{
		{"prefix", r.Prefix, &dst.Prefix},
		{"username", r.Username, &dst.Username},
		{"password_file", r.PasswordFile, &dst.PasswordFile},
		{"ca_file", r.CAFile, &dst.CAFile},
		{"cert_file", r.CertFile, &dst.CertFile},
		{"key_file", r.KeyFile, &dst.KeyFile},
	} {
		if d.take("etcd."+f.key, f.src.leaf) {
			*f.dst = f.src.v
		}
	}
	if d.take("etcd.timeout", r.Timeout.leaf) {
		dst.Timeout = r.Timeout.v
	}
	return dst
}

// etcd checks the etcd section with etcd.CheckConfig (endpoint URLs, the
// prefix, username and password both or neither, the TLS files exist and
// parse), after reading the password_file. Nothing is contacted.
func (e *EtcdConfig) check(v *validator) {
	if v.c.File != "" {
		e.dir = filepath.Dir(v.c.File)
	}
	if len(e.Endpoints) == 0 && !v.failed("etcd.endpoints") {
		v.errorf("etcd.endpoints", 0, "at least one endpoint is needed (a list of URLs such as http://127.0.0.1:2379)")
	}
	if e.Prefix == "" {
		v.errorf("etcd.prefix", 0, "empty key prefix (default %s)", defaultEtcdPrefix)
	}
	e.password = v.passwordFile("etcd.password_file", e.PasswordFile)
	cfg := e.BackendConfig()
	if v.failed("etcd.password_file") || (e.PasswordFile != "" && e.password == nil) {
		cfg.Password = "unread" // reported already: do not also say "give both"
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 0 // the lease timing reports it
	}
	for _, err := range splitErrors(etcd.CheckConfig(cfg)) {
		field, msg := etcdField(err.Error())
		switch {
		case field == "etcd.endpoints" && len(e.Endpoints) == 0:
			continue // reported above
		case field == "etcd.username" && e.Username == "":
			field = "etcd.password_file"
		}
		for _, ep := range e.Endpoints {
			if red := redactEndpoint(ep); red != ep && ep != "" {
				msg = strings.ReplaceAll(msg, strconv.Quote(ep), strconv.Quote(red))
				msg = strings.ReplaceAll(msg, ep, red)
			}
		}
		v.errorf(field, 0, "%s", msg)
	}
}

// splitErrors undoes errors.Join.
func splitErrors(err error) []error {
	if err == nil {
		return nil
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}

// etcdField maps an error of etcd.CheckConfig, which starts with the key
// it is about ("etcd.endpoints[1]: ...", "etcd.cert_file/key_file: ..."),
// to the field of the file and the rest of the message.
func etcdField(msg string) (field, rest string) {
	end := strings.IndexAny(msg, " :/")
	if end < 0 || !strings.HasPrefix(msg, "etcd.") {
		return "etcd", msg
	}
	field, rest = msg[:end], msg
	switch msg[end] {
	case ':':
		rest = strings.TrimSpace(msg[end+1:])
	case ' ':
		rest = msg[end+1:]
	case '/': // "etcd.cert_file/key_file: ..."
		if _, r, ok := strings.Cut(msg, ": "); ok {
			rest = r
		}
	}
	if strings.HasPrefix(msg, "etcd.username and etcd.password:") {
		return "etcd.username", "username and password_file: give both or neither"
	}
	return field, rest
}

// redactEndpoint hides what could be credentials in an endpoint as
// written: the user information of a URL, or anything before an '@' or
// after a ':' of a string that is not a URL with a host.
func redactEndpoint(raw string) string {
	if u, err := url.Parse(raw); err == nil && u.Host != "" && u.Opaque == "" {
		if u.User == nil {
			return raw
		}
		u.User = url.User("xxxxx")
		return u.String()
	}
	if i := strings.LastIndex(raw, "@"); i >= 0 {
		return "xxxxx" + raw[i:]
	}
	if i := strings.Index(raw, ":"); i >= 0 && !strings.HasPrefix(raw[i:], "://") {
		return raw[:i] + ":xxxxx"
	}
	return raw
}
