package config

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/leasecron/leasecron/lease"
)

// Section is one backend's section of the config file: the store that
// holds the leases and how to reach it. Each backend has one (RedisConfig,
// PostgresConfig, MySQLConfig, EtcdConfig, ZooKeeperConfig), registered
// once in backends.go; the scheduler and the commands use a backend only
// through this interface and the lease.Backend that Open returns.
type Section interface {
	// Name is the section's key in the file: "redis", "postgres", ...
	Name() string
	// RequestTimeout is the section's per-request timeout (its timeout
	// key); the lease timing rules use it.
	RequestTimeout() time.Duration
	// Equal reports whether other opens the same store the same way; a
	// reload that changes the section needs a restart.
	Equal(other Section) bool
	// Open connects to the store (see OpenOptions); the error starts with
	// the section's name. The result carries the section's secrets: close
	// it, never print it.
	Open(ctx context.Context, o OpenOptions) (lease.Backend, error)
	// Summary says what the section names, for `leasecron check`:
	// "3 nodes", "postgres postgres://leasecron@db1/ops", without a
	// password.
	Summary(l LeaseConfig) string
	// check checks the section without connecting (Validate calls it;
	// its timeout is checked with the lease timing) and reads its
	// password file.
	check(v *validator)
}

// OpenOptions are what a command asks of the store beyond its section.
type OpenOptions struct {
	// Lease is the lease timing (Config.Open sets it): drift, and the ttl
	// that is the Redis restart guard and the ZooKeeper session timeout.
	Lease LeaseConfig
	// Log receives the servers' restarts and failovers (nil: none).
	Log *slog.Logger
	// OnVote, when set, sees each server's answer to a lease request
	// (Redis: for the metrics).
	OnVote func(server, op, vote string, latency time.Duration)
	// OnRestart, when set, sees a server that restarted or failed over
	// (Redis: for the metrics).
	OnRestart func(server string)
	// MinTimeout raises the per-request timeout (status reads from a
	// terminal, where 50ms would only make it fail on a busy server).
	MinTimeout time.Duration
	// UnsafeNoRestartDetection lets restarted Redis nodes vote at once:
	// only for the fault suite's negative control.
	UnsafeNoRestartDetection bool
}

// Open opens the store of the config's backend section, with the lease
// timing of c. The error names the backend ("postgres: ...").
func (c *Config) Open(ctx context.Context, o OpenOptions) (lease.Backend, error) {
	if c.Backend == nil {
		return nil, errors.New("config: no backend section")
	}
	o.Lease = c.Lease
	return c.Backend.Open(ctx, o)
}

// openTimeout bounds the connect of Open: the request timeout raised to
// what o asks, and at least 5s.
func openTimeout(t time.Duration, o OpenOptions) time.Duration {
	return max(t, o.MinTimeout, 5*time.Second)
}

// backendNames lists the backends for messages: "redis, postgres".
func backendNames() string {
	var names []string
	for _, b := range registered() {
		names = append(names, b.name)
	}
	return strings.Join(names, ", ")
}

// Timeout returns the backend section's per-request timeout (0 when there
// is none). The lease timing rules use it.
func (c *Config) Timeout() time.Duration {
	if c.Backend == nil {
		return 0
	}
	return c.Backend.RequestTimeout()
}

// backendName is the backend section's key, "" when there is none.
func (c *Config) backendName() string {
	if c.Backend == nil {
		return ""
	}
	return c.Backend.Name()
}

// backends picks the backend: the one section the file has. A second
// section is an error at its line; so is none.
func (d *decoder) backends(raw *rawConfig, c *Config) {
	type found struct {
		b    registration
		line int
	}
	var present []found
	for _, b := range registeredIn(&raw.backends) {
		if line, ok := d.src.lines[b.name]; ok {
			present = append(present, found{b, line})
		}
	}
	slices.SortStableFunc(present, func(a, b found) int { return a.line - b.line })
	if len(present) == 0 {
		d.errs = append(d.errs, &Error{File: d.file, Msg: "no backend section: add one of " + backendNames() +
			" (such as redis: {nodes: [redis://127.0.0.1:6379/0]} or postgres: {url: \"postgres://leasecron@db1:5432/ops?sslmode=verify-full\"})"})
		d.src.noBackend = true
		return
	}
	first := present[0]
	c.Backend = first.b.raw.section(d)
	for _, p := range present[1:] {
		d.fail(p.line, p.b.name, fmt.Sprintf("a second backend section: the file chose %s at line %d; a config has exactly one of %s",
			first.b.name, first.line, backendNames()))
	}
}

func (v *validator) backend() {
	c := v.c
	if c.src != nil && c.src.noBackend {
		return // reported
	}
	if c.Backend == nil {
		v.errorf("", 0, "no backend section: add one of %s", backendNames())
		return
	}
	c.Backend.check(v)
}

// secret holds a password read from a password_file. It is a pointer in
// the config structs, so that printing them (%v, %+v, %#v) shows an
// address, never the password.
type secret struct{ s string }

// maxPasswordFile bounds what a password_file may hold.
const maxPasswordFile = 4096

// readPasswordFile reads the password in file path (relative to the
// config file's directory). The error names the file, never its content;
// warn is set when the file is readable by every user.
func readPasswordFile(configFile, path string) (pw *secret, warn string, err error) {
	if !filepath.IsAbs(path) && configFile != "" {
		path = filepath.Join(filepath.Dir(configFile), path)
	}
	f, err := os.Open(path)
	if err != nil {
		var pe *os.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return nil, "", fmt.Errorf("cannot read %s: %w", path, err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxPasswordFile+1))
	if err != nil {
		var pe *os.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return nil, "", fmt.Errorf("cannot read %s: %w", path, err)
	}
	if len(data) > maxPasswordFile {
		return nil, "", fmt.Errorf("%s is larger than %d bytes: not a password file", path, maxPasswordFile)
	}
	s := strings.TrimSuffix(strings.TrimSuffix(string(data), "\n"), "\r")
	switch {
	case s == "":
		return nil, "", fmt.Errorf("%s is empty: it must hold the password (one line)", path)
	case strings.ContainsAny(s, "\r\n\x00"):
		return nil, "", fmt.Errorf("%s holds more than one line: it must hold only the password", path)
	}
	if fi, err := f.Stat(); err == nil && fi.Mode().Perm()&0o004 != 0 {
		warn = fmt.Sprintf("%s is readable by every user; chmod o-r it", path)
	}
	return &secret{s}, warn, nil
}

// passwordFile reads the password_file of a section for validator v:
// problems are reported at field, nil when there is none.
func (v *validator) passwordFile(field, path string) *secret {
	if path == "" || v.failed(field) {
		return nil
	}
	pw, warn, err := readPasswordFile(v.c.File, path)
	if err != nil {
		v.errorf(field, 0, "%v", err)
		return nil
	}
	if warn != "" {
		v.warnf(field, 0, "%s", warn)
	}
	return pw
}

// SameBackend reports whether c and o have equal backend sections: the
// same store, opened the same way (Section.Equal). A reload that changes
// it needs a restart.
func (c *Config) SameBackend(o *Config) bool {
	if c.Backend == nil || o.Backend == nil {
		return c.Backend == nil && o.Backend == nil
	}
	return c.Backend.Equal(o.Backend)
}

// driverDrift is lease.drift as a driver Config's Drift: the same factor,
// with 0 said as lease.NoDrift (a driver reads a Drift of 0 as its
// default), so that every backend counts validity with the drift the
// timing check assumed.
func driverDrift(drift float64) float64 {
	if drift == 0 {
		return lease.NoDrift
	}
	return drift
}
