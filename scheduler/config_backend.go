package scheduler

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// The backends, by the key of their config section.
const (
	BackendRedis    = "redis"    // Redlock over Redis masters (package lease); the default
	BackendPostgres = "postgres" // a row per lease in a PostgreSQL table
	// BackendMySQL keeps a row per lease in a MySQL/MariaDB InnoDB table.
	BackendMySQL = "mysql"
	// BackendEtcd keeps leases as keys bound to etcd leases (package lease/etcd).
	BackendEtcd = "etcd"
	// BackendZooKeeper keeps leases as ephemeral znodes (package lease/zookeeper).
	BackendZooKeeper = "zookeeper"
)

// backendSection is one backend's section of the config file. A new
// backend (etcd, zookeeper) is one more entry here, a field in Config and
// rawConfig, and a file like config_postgres.go (see config_etcd.go and
// config_zookeeper.go).
type backendSection struct {
	name string
	// decode copies the section from the file into c.
	decode func(d *decoder, raw *rawConfig, c *Config)
	// validate checks the section (its timeout is checked with the lease
	// timing) and reads its password file.
	validate func(v *validator)
	// timeout is the section's per-request timeout.
	timeout func(c *Config) time.Duration
}

// backendSections are the backends a file may choose, one section each.
var backendSections = []backendSection{
	{BackendRedis, (*decoder).redis, (*validator).redis, func(c *Config) time.Duration { return c.Redis.Timeout }},
	{BackendPostgres, (*decoder).postgres, (*validator).postgres, func(c *Config) time.Duration { return c.Postgres.Timeout }},
	{BackendMySQL, (*decoder).mysql, (*validator).mysql, func(c *Config) time.Duration { return c.MySQL.Timeout }},
	{BackendEtcd, (*decoder).etcd, (*validator).etcd, func(c *Config) time.Duration { return c.Etcd.Timeout }},
	{BackendZooKeeper, (*decoder).zookeeper, (*validator).zookeeper, func(c *Config) time.Duration { return c.ZooKeeper.Timeout }},
}

// sectionOf returns the section of backend name.
func sectionOf(name string) (backendSection, bool) {
	for _, s := range backendSections {
		if s.name == name {
			return s, true
		}
	}
	return backendSection{}, false
}

// backendNames lists the backends for messages: "redis, postgres".
func backendNames() string {
	var names []string
	for _, s := range backendSections {
		names = append(names, s.name)
	}
	return strings.Join(names, ", ")
}

// backendName is Backend, with "" meaning BackendRedis.
func (c *Config) backendName() string {
	if c.Backend == "" {
		return BackendRedis
	}
	return c.Backend
}

// Timeout returns the chosen backend's per-request timeout: Redis.Timeout,
// Postgres.Timeout, MySQL.Timeout, Etcd.Timeout or ZooKeeper.Timeout. The lease timing rules use it.
func (c *Config) Timeout() time.Duration {
	if s, ok := sectionOf(c.backendName()); ok {
		return s.timeout(c)
	}
	return 0
}

// backends picks the backend: the one section the file has. A second
// section is an error at its line; so is none.
func (d *decoder) backends(raw *rawConfig, c *Config) {
	type found struct {
		s    backendSection
		line int
	}
	var present []found
	for _, s := range backendSections {
		if line, ok := d.src.lines[s.name]; ok {
			present = append(present, found{s, line})
		}
	}
	slices.SortStableFunc(present, func(a, b found) int { return a.line - b.line })
	if len(present) == 0 {
		d.errs = append(d.errs, &ConfigError{File: d.file, Msg: "no backend section: add one of " + backendNames() +
			" (such as redis: {nodes: [redis://127.0.0.1:6379/0]} or postgres: {url: \"postgres://leasecron@db1:5432/ops?sslmode=verify-full\"})"})
		d.src.noBackend = true
		return
	}
	first := present[0]
	c.Backend = first.s.name
	first.s.decode(d, raw, c)
	for _, p := range present[1:] {
		d.fail(p.line, p.s.name, fmt.Sprintf("a second backend section: the file chose %s at line %d; a config has exactly one of %s",
			first.s.name, first.line, backendNames()))
	}
}

func (v *validator) backend() {
	c := v.c
	if c.src != nil && c.src.noBackend {
		return // reported
	}
	s, ok := sectionOf(c.backendName())
	if !ok {
		v.errorf("", 0, "unknown backend %q (one of %s)", c.Backend, backendNames())
		return
	}
	s.validate(v)
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
