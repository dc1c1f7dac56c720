package config

import (
	"fmt"
	"github.com/leasecron/leasecron/lease"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// pg1 is the smallest postgres section.
const pg1 = "postgres:\n  url: postgres://leasecron@127.0.0.1:5432/ops?sslmode=disable\n"

// wantError asserts that err holds a *Error at line for field whose
// message mentions want.
func wantError(t *testing.T, err error, line int, field, want string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error; want %d %s: %q", line, field, want)
	}
	for _, e := range configErrors(t, err) {
		if e.Line == line && e.Field == field && strings.Contains(e.Msg, want) && e.File == "jobs.yaml" {
			return
		}
	}
	t.Errorf("no error at line %d for %q mentioning %q in:\n%v", line, field, want, err)
}

// TestBackendSection: the one section the file has chooses the backend;
// a second one is an error at its line, none is an error.
func TestBackendSection(t *testing.T) {
	t.Run("redis", func(t *testing.T) {
		c := mustParse(t, node1+job1)
		if c.backendName() != "redis" || c.Timeout() != 50*time.Millisecond {
			t.Errorf("Backend %q Timeout %s, want redis 50ms", c.backendName(), c.Timeout())
		}
	})
	t.Run("postgres with defaults", func(t *testing.T) {
		c := mustParse(t, pg1+job1)
		want := PostgresConfig{URL: "postgres://leasecron@127.0.0.1:5432/ops?sslmode=disable", Table: "leasecron_leases", Timeout: 2 * time.Second}
		if c.backendName() != "postgres" || *c.postgres() != want || c.Timeout() != 2*time.Second {
			t.Errorf("Backend %q Postgres %+v Timeout %s", c.backendName(), c.postgres(), c.Timeout())
		}
		if len(c.redis().Nodes) != 0 || len(c.Warnings) != 0 {
			t.Errorf("Redis %+v, warnings %q", c.redis(), c.Warnings)
		}
		if schema, table := c.postgres().TableName(); schema != "" || table != "leasecron_leases" {
			t.Errorf("TableName = %q, %q", schema, table)
		}
	})
	t.Run("postgres, every key", func(t *testing.T) {
		c := mustParse(t, "postgres:\n  url: postgresql://lc@db1:6432,db2:6432/ops?sslmode=verify-full&target_session_attrs=read-write\n  table: ops.leases\n  timeout: 500ms\n"+job1)
		if c.postgres().Table != "ops.leases" || c.Timeout() != 500*time.Millisecond || len(c.Warnings) != 0 {
			t.Errorf("Postgres %+v, warnings %q", c.postgres(), c.Warnings)
		}
		if schema, table := c.postgres().TableName(); schema != "ops" || table != "leases" {
			t.Errorf("TableName = %q, %q", schema, table)
		}
	})
	t.Run("flow style and merge keys", func(t *testing.T) {
		c := mustParse(t, "postgres:\n  <<: {url: 'postgres://u@127.0.0.1/ops', timeout: 1s, table: a}\n  table: b\n"+job1)
		if c.postgres().Timeout != time.Second || c.postgres().Table != "b" || c.postgres().URL != "postgres://u@127.0.0.1/ops" {
			t.Errorf("Postgres %+v", c.postgres())
		}
	})
	t.Run("second section after redis", func(t *testing.T) {
		_, err := parse(t, node1+job1+pg1)
		wantError(t, err, 8, "postgres", "a second backend section: the file chose redis at line 1; a config has exactly one of redis, postgres, mysql, etcd, zookeeper")
		if n := len(configErrors(t, err)); n != 1 {
			t.Errorf("%d errors, want 1:\n%v", n, err)
		}
	})
	t.Run("second section after postgres", func(t *testing.T) {
		_, err := parse(t, pg1+job1+node1)
		wantError(t, err, 7, "redis", "the file chose postgres at line 1")
	})
	t.Run("second section is null", func(t *testing.T) {
		_, err := parse(t, pg1+job1+"redis:\n")
		wantError(t, err, 7, "redis", "a second backend section")
	})
	t.Run("none", func(t *testing.T) {
		_, err := parse(t, job1)
		wantError(t, err, 0, "", "no backend section: add one of redis, postgres, mysql, etcd, zookeeper")
		if n := len(configErrors(t, err)); n != 1 {
			t.Errorf("%d errors, want 1 (nothing about the backend's keys):\n%v", n, err)
		}
	})
	t.Run("null postgres section", func(t *testing.T) {
		_, err := parse(t, "postgres:\n"+job1)
		wantError(t, err, 1, "postgres.url", "missing url")
	})
	t.Run("postgres not a mapping", func(t *testing.T) {
		_, err := parse(t, "postgres: postgres://u@db/ops\n"+job1)
		wantError(t, err, 1, "postgres", "must be a mapping (keys: url, table, timeout, password_file), not a single value")
	})
	t.Run("unknown postgres key", func(t *testing.T) {
		_, err := parse(t, pg1+"  tabel: x\n"+job1)
		wantError(t, err, 3, "postgres.tabel", `did you mean "table"?`)
	})
	t.Run("password key", func(t *testing.T) {
		_, err := parse(t, pg1+"  password: hunter2\n"+job1)
		wantError(t, err, 3, "postgres.password", "password_file")
		if strings.Contains(err.Error(), "hunter2") {
			t.Errorf("password in error: %v", err)
		}
	})
	t.Run("in code", func(t *testing.T) {
		c := Default()
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "no backend section: add one of redis, postgres") {
			t.Errorf("no backend: %v", err)
		}
		c.Backend = NewRedis("redis://127.0.0.1:6379/0")
		if err := c.Validate(); err != nil || c.Timeout() != 50*time.Millisecond {
			t.Errorf("Validate %v, Timeout %s", err, c.Timeout())
		}
		c.Backend = NewPostgres("")
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "postgres.url: missing url") {
			t.Errorf("postgres without url: %v", err)
		}
		c.postgres().URL = "postgres://u@127.0.0.1/ops"
		if err := c.Validate(); err != nil || c.Timeout() != 2*time.Second {
			t.Errorf("Validate %v, Timeout %s", err, c.Timeout())
		}
		c.Backend = NewEtcd()
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "etcd.endpoints: at least one endpoint") {
			t.Errorf("etcd without endpoints: %v", err)
		}
		c.etcd().Endpoints = []string{"http://127.0.0.1:2379"}
		if err := c.Validate(); err != nil || c.Timeout() != 500*time.Millisecond {
			t.Errorf("Validate %v, Timeout %s", err, c.Timeout())
		}
		c.Backend = NewZooKeeper("127.0.0.1:2181")
		if err := c.Validate(); err != nil || c.Timeout() != time.Second {
			t.Errorf("Validate %v, Timeout %s", err, c.Timeout())
		}
		c.Backend = NewMySQL("lc@tcp(127.0.0.1:3306)/ops")
		if err := c.Validate(); err != nil || c.Timeout() != 2*time.Second {
			t.Errorf("Validate %v, Timeout %s", err, c.Timeout())
		}
	})
}

// TestPostgresBad: every rule of the postgres section, with its line and
// field, and never the password.
func TestPostgresBad(t *testing.T) {
	pg := func(url string, more ...string) string {
		return "postgres:\n  url: " + strconv.Quote(url) + "\n" + strings.Join(more, "") + job1
	}
	const ok = "postgres://u:hunter2@127.0.0.1/ops"
	for _, tc := range []struct {
		name, config string
		line         int
		field, want  string
	}{
		{"empty url", pg(""), 2, "postgres.url", "missing url"},
		{"keyword/value", pg("host=db1 user=u password=hunter2 dbname=ops"), 2, "postgres.url", "keyword/value string"},
		{"mysql", pg("mysql://u:hunter2@db1/ops"), 2, "postgres.url", `unsupported scheme "mysql"`},
		{"no host", pg("postgres://u:hunter2@/ops"), 2, "postgres.url", "missing host"},
		{"bad port", pg("postgres://u:hunter2@db1:65536/ops"), 2, "postgres.url", `bad port "65536"`},
		{"bad sslmode", pg("postgres://u:hunter2@db1/ops?sslmode=on"), 2, "postgres.url", `bad sslmode "on"`},
		{"unknown option", pg("postgres://u:hunter2@db1/ops?pool_max_conns=4"), 2, "postgres.url", `unknown option "pool_max_conns"`},
		{"password option", pg("postgres://u@db1/ops?password=hunter2"), 2, "postgres.url", "password_file"},
		{"url a list", "postgres:\n  url: [a]\n" + job1, 2, "postgres.url", "must be a single value, not a list"},
		{"table upper case", pg(ok, "  table: Leases\n"), 3, "postgres.table", "lower-case"},
		{"table three parts", pg(ok, "  table: a.b.c\n"), 3, "postgres.table", "at most one dot"},
		{"table starts with a digit", pg(ok, "  table: 1leases\n"), 3, "postgres.table", "not a plain SQL identifier"},
		{"table quoted", pg(ok, "  table: '\"leases\"'\n"), 3, "postgres.table", "not a plain SQL identifier"},
		{"table with a space", pg(ok, "  table: 'lease table'\n"), 3, "postgres.table", "not a plain SQL identifier"},
		{"table too long", pg(ok, "  table: "+strings.Repeat("t", 64)+"\n"), 3, "postgres.table", "longer than 63 bytes"},
		{"empty table", pg(ok, "  table: ''\n"), 3, "postgres.table", "empty table name"},
		{"bad timeout", pg(ok, "  timeout: soon\n"), 3, "postgres.timeout", `bad duration "soon"`},
		{"zero timeout", pg(ok, "  timeout: 0s\n"), 3, "postgres.timeout", "must be positive"},
		{"timeout vs ttl", pg(ok, "  timeout: 3s\n"), 3, "postgres.timeout", "less than a tenth of lease.ttl (3s)"},
		{"default timeout vs ttl", pg(ok, "lease:\n  ttl: 15s\n"), 1, "postgres.timeout", "timeout 2s (the default) must be less than a tenth of lease.ttl (1.5s)"},
		{"ttl margin counts postgres.timeout", pg(ok, "  timeout: 1s\nlease:\n  ttl: 12s\n"), 5, "lease.ttl", "2×postgres.timeout"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parse(t, tc.config)
			wantError(t, err, tc.line, tc.field, tc.want)
			if err != nil && strings.Contains(err.Error(), "hunter2") {
				t.Errorf("password in error: %v", err)
			}
		})
	}
}

// TestBackendTimeoutRules: the lease timing rules use the chosen
// backend's timeout: the same lease section passes with redis (50ms) and
// fails with postgres (1s); the minimum ttl named for postgres is enough
// and 1ms less is not.
func TestBackendTimeoutRules(t *testing.T) {
	const lease = "lease:\n  ttl: 12s\n" // renew 4s, kill_grace 5s
	mustParse(t, node1+lease+job1)
	pg := func(ttl string) string {
		return "postgres:\n  url: postgres://u@127.0.0.1/ops\n  timeout: 1s\nlease:\n  ttl: " + ttl + "\n" + job1
	}
	_, err := parse(t, pg("12s"))
	wantError(t, err, 5, "lease.ttl", "the kill margin (2.2s = 200ms + 2×postgres.timeout) + 2×postgres.timeout (2s) = 13.2s")
	msg := err.Error()
	i := strings.Index(msg, "the minimum ttl is ")
	if i < 0 {
		t.Fatalf("no minimum in %v", err)
	}
	minTTL, perr := time.ParseDuration(strings.Fields(msg[i+len("the minimum ttl is "):])[0])
	if perr != nil {
		t.Fatal(perr)
	}
	if _, err := parse(t, pg(minTTL.String())); err != nil {
		t.Errorf("ttl %s (the minimum) fails: %v", minTTL, err)
	}
	if _, err := parse(t, pg((minTTL - time.Millisecond).String())); err == nil {
		t.Errorf("ttl %s (below the minimum) passes", minTTL-time.Millisecond)
	}
	// The chosen section's timeout counts.
	c := Default()
	c.Backend = NewPostgres("postgres://u@127.0.0.1/ops")
	if err := c.Validate(); err != nil || c.Timeout() != 2*time.Second {
		t.Errorf("postgres: %v (Timeout %s)", err, c.Timeout())
	}
}

// writeSecret writes a password file with mode perm in dir.
func writeSecret(t *testing.T, dir, name, content string, perm os.FileMode) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(content), perm); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, perm); err != nil { // whatever the umask
		t.Fatal(err)
	}
	return path
}

// TestPasswordFile: password_file for both sections: read at load (a
// missing, unreadable, empty or multi-line file is an error at its line),
// used only where the URL has no password, and never shown.
func TestPasswordFile(t *testing.T) {
	const pw = "hunter2-from-file"
	dir := t.TempDir()
	good := writeSecret(t, dir, "good.pass", pw+"\n", 0o600)
	load := func(t *testing.T, text string) (*Config, error) {
		t.Helper()
		path := filepath.Join(dir, "jobs.yaml")
		if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		c, err := Load(path)
		if err != nil {
			if strings.Contains(err.Error(), pw) {
				t.Errorf("password in error: %v", err)
			}
			var out []string
			for _, e := range configErrors(t, err) {
				out = append(out, e.Error())
			}
			err = fmt.Errorf("%s", strings.Join(out, "\n"))
		}
		return c, err
	}
	noSecret := func(t *testing.T, c *Config) {
		t.Helper()
		for _, s := range []string{fmt.Sprintf("%v", c), fmt.Sprintf("%+v", c), fmt.Sprintf("%#v", c), fmt.Sprintf("%+v %+v", c.redis(), c.postgres()), strings.Join(c.Warnings, "\n")} {
			if strings.Contains(s, pw) {
				t.Errorf("password printed: %s", s)
			}
		}
	}
	file := filepath.Join(dir, "jobs.yaml")

	t.Run("redis: nodes without a password get it", func(t *testing.T) {
		c, err := load(t, "redis:\n  nodes:\n    - redis://a:1/0\n    - rediss://ops@b:2/0\n    - redis://u:own@c:3/0\n  password_file: good.pass\n"+job1)
		if err != nil {
			t.Fatal(err)
		}
		want := []string{"redis://:" + pw + "@a:1/0", "rediss://ops:" + pw + "@b:2/0", "redis://u:own@c:3/0"}
		if got := c.redis().NodeURLs(); strings.Join(got, " ") != strings.Join(want, " ") {
			t.Errorf("NodeURLs = %q, want %q", got, want)
		}
		if c.redis().Nodes[0] != "redis://a:1/0" || c.redis().PasswordFile != "good.pass" {
			t.Errorf("Nodes %q PasswordFile %q: the file's text must not change", c.redis().Nodes, c.redis().PasswordFile)
		}
		noSecret(t, c)
	})
	t.Run("redis: without password_file NodeURLs is Nodes", func(t *testing.T) {
		c, err := load(t, node1+job1)
		if err != nil {
			t.Fatal(err)
		}
		if got := c.redis().NodeURLs(); len(got) != 1 || got[0] != c.redis().Nodes[0] {
			t.Errorf("NodeURLs = %q", got)
		}
	})
	t.Run("postgres: URL without a password gets it", func(t *testing.T) {
		c, err := load(t, "postgres:\n  url: postgres://lc@127.0.0.1:5432/ops?sslmode=disable\n  password_file: "+good+"\n"+job1)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := c.postgres().ConnString(), "postgres://lc:"+pw+"@127.0.0.1:5432/ops?sslmode=disable"; got != want {
			t.Errorf("ConnString = %q, want %q", got, want)
		}
		if len(c.Warnings) != 0 {
			t.Errorf("warnings %q", c.Warnings)
		}
		noSecret(t, c)
	})
	t.Run("postgres: URL with a password keeps it", func(t *testing.T) {
		c, err := load(t, "postgres:\n  url: postgres://lc:own@127.0.0.1/ops\n  password_file: good.pass\n"+job1)
		if err != nil {
			t.Fatal(err)
		}
		if got := c.postgres().ConnString(); got != "postgres://lc:own@127.0.0.1/ops" {
			t.Errorf("ConnString = %q", got)
		}
		if len(c.Warnings) != 1 || !strings.Contains(c.Warnings[0], ":3: postgres.password_file: not used") {
			t.Errorf("warnings %q", c.Warnings)
		}
	})
	t.Run("postgres: no password_file, ConnString is URL", func(t *testing.T) {
		c, err := load(t, pg1+job1)
		if err != nil || c.postgres().ConnString() != c.postgres().URL {
			t.Errorf("err %v, ConnString %q", err, c.postgres().ConnString())
		}
	})
	t.Run("world-readable file warns", func(t *testing.T) {
		writeSecret(t, dir, "open.pass", pw, 0o644)
		c, err := load(t, node1+"  password_file: open.pass\n"+job1)
		if err != nil {
			t.Fatal(err)
		}
		if len(c.Warnings) != 1 || !strings.Contains(c.Warnings[0], ":4: redis.password_file: ") || !strings.Contains(c.Warnings[0], "readable by every user") {
			t.Errorf("warnings %q", c.Warnings)
		}
		noSecret(t, c)
	})
	writeSecret(t, dir, "empty.pass", "", 0o600)
	writeSecret(t, dir, "newline.pass", "\n", 0o600)
	writeSecret(t, dir, "two.pass", pw+"\nsecond\n", 0o600)
	if err := os.Mkdir(filepath.Join(dir, "adir"), 0o700); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, path, want string }{
		{"missing", "nope.pass", "cannot read " + filepath.Join(dir, "nope.pass") + ": no such file or directory"},
		{"a directory", "adir", "cannot read " + filepath.Join(dir, "adir") + ": is a directory"},
		{"empty", "empty.pass", filepath.Join(dir, "empty.pass") + " is empty"},
		{"only a newline", "newline.pass", filepath.Join(dir, "newline.pass") + " is empty"},
		{"two lines", "two.pass", filepath.Join(dir, "two.pass") + " holds more than one line"},
	} {
		t.Run("redis: "+tc.name, func(t *testing.T) {
			_, err := load(t, node1+"  password_file: "+tc.path+"\n"+job1)
			if err == nil || !strings.Contains(err.Error(), file+":4: redis.password_file: "+tc.want) {
				t.Errorf("err = %v, want %q at line 4", err, tc.want)
			}
		})
		t.Run("postgres: "+tc.name, func(t *testing.T) {
			_, err := load(t, "postgres:\n  url: postgres://u@127.0.0.1/ops\n  password_file: "+tc.path+"\n"+job1)
			if err == nil || !strings.Contains(err.Error(), file+":3: postgres.password_file: "+tc.want) {
				t.Errorf("err = %v, want %q at line 3", err, tc.want)
			}
		})
	}
	t.Run("in code, relative to the working directory", func(t *testing.T) {
		c := Default()
		r := NewRedis("redis://a:1")
		r.PasswordFile = good
		c.Backend = r
		if err := c.Validate(); err != nil || c.redis().NodeURLs()[0] != "redis://:"+pw+"@a:1" {
			t.Errorf("err %v, NodeURLs %q", err, c.redis().NodeURLs())
		}
	})
}

// TestExamplePostgres: the commented postgres section of jobs.example.yaml,
// in place of its redis section, loads cleanly too.
func TestExamplePostgres(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "jobs.example.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	text := string(data)
	start := strings.Index(text, "\nredis:\n")
	end := start + 1 + strings.Index(text[start+1:], "\n\n")
	pgStart := strings.Index(text, "# postgres:\n")
	pgEnd := pgStart + strings.Index(text[pgStart:], "\n\n")
	if start < 0 || end <= start || pgStart < 0 || pgEnd <= pgStart {
		t.Fatal("jobs.example.yaml has no redis section and commented postgres section")
	}
	var pg []string
	for _, line := range strings.Split(text[pgStart:pgEnd], "\n") {
		pg = append(pg, strings.TrimPrefix(strings.TrimPrefix(line, "#"), " "))
	}
	text = text[:start+1] + strings.Join(pg, "\n") + text[pgEnd:]
	dir := t.TempDir()
	text = strings.ReplaceAll(text, "/etc/leasecron/postgres.pass", writeSecret(t, dir, "pg.pass", "pw", 0o600))
	c, err := Parse(strings.NewReader(text), "jobs.example.yaml")
	if err != nil {
		t.Fatalf("%v\n%s", err, text)
	}
	if c.backendName() != "postgres" || c.postgres().Table != "leasecron_leases" || len(c.Jobs) == 0 || len(c.Warnings) != 0 {
		t.Errorf("backend %q, %+v, %d jobs, warnings %q", c.backendName(), c.postgres(), len(c.Jobs), c.Warnings)
	}
}

// TestDriverDriftRoundTrips: lease.drift reaches every driver as the
// factor the timing check assumed — 0 included, which a driver Config
// would otherwise read as its default (1 %).
func TestDriverDriftRoundTrips(t *testing.T) {
	for _, d := range []float64{0, 0.001, lease.DefaultDrift, 0.05} {
		if got := lease.DriftOf(driverDrift(d)); got != d {
			t.Errorf("lease.drift %g reaches the drivers as %g", d, got)
		}
	}
}
