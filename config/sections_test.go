package config

import (
	"strings"
	"testing"
)

// The typed backend sections of a parsed Config, for the tests: each
// returns an empty section when the file chose another backend.

func (c *Config) redis() *RedisConfig         { return sectionAs[RedisConfig](c) }
func (c *Config) postgres() *PostgresConfig   { return sectionAs[PostgresConfig](c) }
func (c *Config) mysql() *MySQLConfig         { return sectionAs[MySQLConfig](c) }
func (c *Config) etcd() *EtcdConfig           { return sectionAs[EtcdConfig](c) }
func (c *Config) zookeeper() *ZooKeeperConfig { return sectionAs[ZooKeeperConfig](c) }

func sectionAs[T any](c *Config) *T {
	if s, ok := any(c.Backend).(*T); ok {
		return s
	}
	return new(T)
}

func sameBackend(a, b *Config) bool { return a.SameBackend(b) }

// TestRegistry: every backend of the registry (backends.go) builds a
// section named after its key, and the docs' order is the registry's.
func TestRegistry(t *testing.T) {
	d := &decoder{src: &source{lines: map[string]int{}, inherited: map[string]string{}, failed: map[string]bool{}}}
	var names []string
	for _, b := range registered() {
		if s := b.raw.section(d); s == nil || s.Name() != b.name {
			t.Errorf("key %q builds %v", b.name, s)
		}
		names = append(names, b.name)
	}
	if got, want := strings.Join(names, ", "), "redis, postgres, mysql, etcd, zookeeper"; got != want {
		t.Errorf("registered %s, want %s", got, want)
	}
}

// TestSameBackendReadsPasswords: a reload of the same file is the same
// backend, also with a password file (compared by the password read, not
// by where it was read into); a new password, table or backend is not.
func TestSameBackendReadsPasswords(t *testing.T) {
	dir := t.TempDir()
	writeSecret(t, dir, "db.pass", "pw1\n", 0o600)
	pg := "postgres:\n  url: postgres://lc@127.0.0.1/ops\n  password_file: db.pass\n" + job1
	my := "mysql:\n  dsn: lc@tcp(127.0.0.1:3306)/ops\n  password_file: db.pass\n" + job1
	for _, text := range []string{pg, my} {
		a, err := loadIn(t, dir, text, "pw1")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := loadIn(t, dir, text, "pw1")
		if !sameBackend(a, b) {
			t.Errorf("%s: the same file is not the same backend", a.Backend.Name())
		}
		if other, _ := loadIn(t, dir, strings.Replace(text, "/ops", "/ops2", 1), "pw1"); sameBackend(a, other) {
			t.Errorf("%s: another database is the same backend", a.Backend.Name())
		}
		writeSecret(t, dir, "db.pass", "pw2\n", 0o600)
		if c, _ := loadIn(t, dir, text, "pw2"); sameBackend(a, c) {
			t.Errorf("%s: a new password is the same backend", a.Backend.Name())
		}
		writeSecret(t, dir, "db.pass", "pw1\n", 0o600)
	}
	if sameBackend(mustParse(t, pg1+job1), mustParse(t, node1+job1)) {
		t.Error("postgres is the same backend as redis")
	}
}
