package config

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestMySQLSection: a mysql section is parsed with its defaults, chosen as
// the backend, and its password file fills the DSN's password.
func TestMySQLSection(t *testing.T) {
	c := mustParse(t, "mysql:\n  dsn: \"leasecron@tcp(127.0.0.1:3306)/ops\"\n"+job1)
	want := MySQLConfig{DSN: "leasecron@tcp(127.0.0.1:3306)/ops", Table: "leasecron_leases", Timeout: 2 * time.Second}
	if c.backendName() != "mysql" || *c.mysql() != want || c.Timeout() != 2*time.Second {
		t.Errorf("Backend %q MySQL %+v Timeout %s", c.backendName(), c.mysql(), c.Timeout())
	}
	dir := t.TempDir()
	const pw = "hunter2-file"
	if err := os.WriteFile(filepath.Join(dir, "pw"), []byte(pw+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "leasecron.yaml")
	cfg := "mysql:\n  dsn: \"lc@tcp(127.0.0.1:3306)/ops?tls=true\"\n  table: ops.leases\n  timeout: 500ms\n  password_file: pw\n" + job1
	if err := os.WriteFile(file, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := Load(file)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := c.mysql().ConnString(), "lc:"+pw+"@tcp(127.0.0.1:3306)/ops?tls=true"; got != want {
		t.Errorf("ConnString %q, want %q", got, want)
	}
	if c.mysql().Table != "ops.leases" || c.Timeout() != 500*time.Millisecond {
		t.Errorf("MySQL %+v", c.mysql())
	}
}

// TestMySQLBad: every rule of the mysql section, with its line and field,
// and never the password.
func TestMySQLBad(t *testing.T) {
	my := func(dsn string, more ...string) string {
		return "mysql:\n  dsn: " + strconv.Quote(dsn) + "\n" + strings.Join(more, "") + job1
	}
	const ok = "u:hunter2@tcp(127.0.0.1:3306)/ops"
	for _, tc := range []struct {
		name, config string
		line         int
		field, want  string
	}{
		{"empty dsn", my(""), 2, "mysql.dsn", "missing dsn"},
		{"url", my("mysql://u:hunter2@db1/ops"), 2, "mysql.dsn", "a URL, not a DSN"},
		{"unknown parameter", my(ok + "?allowAllFiles=true"), 2, "mysql.dsn", `"allowAllFiles"`},
		{"session variable not allowed", my(ok + "?sql_mode=ANSI"), 2, "mysql.dsn", `"sql_mode"`},
		{"no database", my("u:hunter2@tcp(127.0.0.1:3306)/"), 2, "mysql.dsn", "no database name"},
		{"bad port", my("u:hunter2@tcp(db1:65536)/ops"), 2, "mysql.dsn", "port from 1 to 65535"},
		{"bad tls", my(ok + "?tls=maybe"), 2, "mysql.dsn", "maybe"},
		{"second backend", "postgres:\n  url: postgres://u@127.0.0.1/ops\n" + my(ok), 3, "mysql", "a second backend section"},
		{"table upper case", my(ok, "  table: Leases\n"), 3, "mysql.table", "lower-case"},
		{"table three parts", my(ok, "  table: a.b.c\n"), 3, "mysql.table", "at most one dot"},
		{"table too long", my(ok, "  table: "+strings.Repeat("t", 57)+"\n"), 3, "mysql.table", "longer than 56 bytes"},
		{"bad timeout", my(ok, "  timeout: soon\n"), 3, "mysql.timeout", `bad duration "soon"`},
		{"timeout vs ttl", my(ok, "  timeout: 3s\n"), 3, "mysql.timeout", "less than a tenth of lease.ttl (3s)"},
		{"missing password file", my("u@tcp(127.0.0.1:3306)/ops", "  password_file: /nonexistent/pw\n"), 3, "mysql.password_file", "cannot read"},
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
