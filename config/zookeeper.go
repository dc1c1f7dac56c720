package config

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/leasecron/leasecron/lease"
	"github.com/leasecron/leasecron/lease/zookeeper"
)

// ZooKeeperConfig is the "zookeeper" section: a lease is an ephemeral
// znode of the daemon's ZooKeeper session (package lease/zookeeper).
// The session timeout asked of the servers is Lease.TTL.
type ZooKeeperConfig struct {
	// Servers are the ensemble's client addresses, host:port; at least one.
	Servers []string
	// Root is the znode under which every key lives; default /leasecron.
	Root string
	// Timeout bounds each request; default 1s. It must be less than a
	// tenth of Lease.TTL (and so a third of the session timeout).
	Timeout time.Duration
	// AuthFile names a file holding "user:password" for ZooKeeper's digest
	// scheme (a relative path is read from the config file's directory);
	// the file's auth key may hold the same inline. Validate reads it.
	AuthFile string

	auth       *secret // from auth or AuthFile
	inlineAuth *secret // the auth key of the file, as decoded
}

// rawZooKeeper is the zookeeper section as yaml.v3 decodes it.
type rawZooKeeper struct {
	Servers  []*text  `yaml:"servers" want:"must be a list of host:port such as 127.0.0.1:2181, not %s"`
	Root     text     `yaml:"root"`
	Timeout  duration `yaml:"timeout"`
	Auth     text     `yaml:"auth"`
	AuthFile text     `yaml:"auth_file"`
}

// HasAuth reports whether the section gives digest credentials.
func (z *ZooKeeperConfig) HasAuth() bool { return z.auth != nil }

// BackendConfig returns the zookeeper.Config to open for a lease.ttl of
// ttl (the session timeout) and a lease.drift of drift. The result
// carries a secret (Auth): hand it to zookeeper.Open, never log or print
// it.
func (z *ZooKeeperConfig) BackendConfig(ttl time.Duration, drift float64) zookeeper.Config {
	cfg := zookeeper.Config{
		Servers:        slices.Clone(z.Servers),
		Root:           z.Root,
		Timeout:        z.Timeout,
		SessionTimeout: ttl,
		Drift:          driverDrift(drift),
	}
	if z.auth != nil {
		cfg.Auth = z.auth.s
	}
	return cfg
}

// NewZooKeeper returns a zookeeper section of servers with the documented
// defaults: Root "/leasecron", Timeout 1s.
func NewZooKeeper(servers ...string) *ZooKeeperConfig {
	return &ZooKeeperConfig{Servers: servers, Root: defaultZooKeeperRoot, Timeout: defaultZKTimeout}
}

// Name returns "zookeeper".
func (z *ZooKeeperConfig) Name() string { return "zookeeper" }

// RequestTimeout returns Timeout, the per-request timeout.
func (z *ZooKeeperConfig) RequestTimeout() time.Duration { return z.Timeout }

// Equal reports whether o is a zookeeper section that opens the same
// ensemble the same way.
func (z *ZooKeeperConfig) Equal(other Section) bool {
	o, ok := other.(*ZooKeeperConfig)
	if !ok {
		return false
	}
	a, b := z.BackendConfig(0, 0), o.BackendConfig(0, 0)
	return slices.Equal(a.Servers, b.Servers) && a.Root == b.Root && a.Timeout == b.Timeout && a.Auth == b.Auth
}

// Summary names the servers and the session timeout asked for.
func (z *ZooKeeperConfig) Summary(l LeaseConfig) string {
	auth := ""
	if z.HasAuth() {
		auth = " (digest auth)"
	}
	return fmt.Sprintf("zookeeper %s%s; lease.ttl %s is the session timeout asked for (servers granting less, their maxSessionTimeout under it, are refused at start; a longer one only delays takeovers)",
		strings.Join(z.Servers, ","), auth, l.TTL)
}

// Open connects to the ensemble. The session timeout is lease.ttl: the
// servers expire the session, and with it the locks, that long after the
// daemon was last heard from.
func (z *ZooKeeperConfig) Open(ctx context.Context, o OpenOptions) (lease.Backend, error) {
	zc := z.BackendConfig(o.Lease.TTL, o.Lease.Drift)
	if t := max(zc.Timeout, o.MinTimeout); t < zc.SessionTimeout/3 {
		zc.Timeout = t
	}
	octx, cancel := context.WithTimeout(ctx, max(zc.SessionTimeout, 5*time.Second))
	defer cancel()
	be, err := zookeeper.Open(octx, zc)
	if errors.Is(err, zookeeper.ErrOtherLayout) {
		return nil, err // it names the servers and the root already
	}
	if err != nil {
		return nil, fmt.Errorf("zookeeper %s: %w", strings.Join(z.Servers, ","), err)
	}
	return be, nil
}

// section builds the zookeeper section from the file.
func (r *rawZooKeeper) section(d *decoder) Section {
	dst := NewZooKeeper()
	dst.Servers = d.texts("zookeeper.servers", r.Servers, "empty server address")
	if d.take("zookeeper.root", r.Root.leaf) {
		dst.Root = r.Root.v
	}
	if d.take("zookeeper.timeout", r.Timeout.leaf) {
		dst.Timeout = r.Timeout.v
	}
	if d.take("zookeeper.auth", r.Auth.leaf) {
		dst.inlineAuth = &secret{r.Auth.v}
	}
	if d.take("zookeeper.auth_file", r.AuthFile.leaf) {
		dst.AuthFile = r.AuthFile.v
	}
	return dst
}

// zookeeper checks the zookeeper section with zookeeper.CheckConfig
// (host:port servers, an absolute root, timeout under a third of the
// session timeout lease.ttl, auth as user:password), after reading the
// auth_file. Nothing is contacted.
func (z *ZooKeeperConfig) check(v *validator) {
	if len(z.Servers) == 0 && !v.failed("zookeeper.servers") {
		v.errorf("zookeeper.servers", 0, "at least one server is needed (a list of host:port such as 127.0.0.1:2181)")
	}
	if z.Root == "" {
		v.errorf("zookeeper.root", 0, "empty root (default %s)", defaultZooKeeperRoot)
	}
	authField := "zookeeper.auth"
	z.auth = z.inlineAuth
	switch {
	case z.inlineAuth != nil && z.AuthFile != "":
		v.errorf("zookeeper.auth_file", 0, "give auth or auth_file, not both")
	case z.AuthFile != "":
		authField = "zookeeper.auth_file"
		z.auth = v.passwordFile(authField, z.AuthFile)
	}
	if z.auth != nil {
		if u, pw, ok := strings.Cut(z.auth.s, ":"); !ok || u == "" || pw == "" {
			what := "auth"
			if authField == "zookeeper.auth_file" {
				what = z.AuthFile
			}
			v.errorf(authField, 0, "%s: want user:password (ZooKeeper's digest scheme)", what)
		}
	}
	cfg := z.BackendConfig(v.c.Lease.TTL, v.c.Lease.Drift)
	cfg.Auth = "" // checked above
	cfg.Servers = nil
	if t := cfg.Timeout; t <= 0 || v.failed("zookeeper.timeout") || (cfg.SessionTimeout > 0 && t >= cfg.SessionTimeout/10) {
		cfg.Timeout = 0 // the lease timing reports it
	}
	if cfg.SessionTimeout < 0 || v.failed("lease.ttl") {
		cfg.SessionTimeout = 0 // reported
	}
	for _, err := range splitErrors(zookeeper.CheckConfig(cfg)) {
		msg := strings.TrimPrefix(err.Error(), "zookeeper: ")
		switch {
		case msg == "no servers":
		case strings.HasPrefix(msg, "root"):
			v.errorf("zookeeper.root", 0, "%s", msg)
		default:
			v.errorf("zookeeper.timeout", 0, "%s (the session timeout is lease.ttl)", msg)
		}
	}
	for i, s := range z.Servers {
		if err := zookeeper.CheckConfig(zookeeper.Config{Servers: []string{s}}); err != nil {
			v.errorf(fmt.Sprintf("zookeeper.servers[%d]", i), 0, "%s", strings.TrimPrefix(err.Error(), "zookeeper: "))
		}
	}
}
