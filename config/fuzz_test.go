package config

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// FuzzParse: Parse never panics; what it rejects it rejects with
// *Error values that name the file and hide the passwords of node,
// postgres and etcd URLs and ZooKeeper's auth; what it accepts validates again and has working
// schedules.
func FuzzParse(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join("testdata", "*.yaml"))
	files = append(files, filepath.Join("..", "jobs.example.yaml"))
	for _, path := range files {
		if data, err := os.ReadFile(path); err == nil {
			f.Add(data)
		}
	}
	for _, s := range []string{
		"",
		"~",
		"- a",
		"redis: [\n",
		node1 + job1,
		node1 + job1 + "lease:\n  ttl: 5s\n",
		node1 + "jobs:\n  - &a {name: a, schedule: '@every 1m', command: [x]}\n  - <<: *a\n    name: b\n",
		node1 + "jobs:\n  - {name: a, schedule: 'CRON_TZ=America/New_York 30 1 * * *', shell: x, timezone: Local}\n",
		node1 + "jobs:\n  - {name: a, schedule: '0 0 29 2 *', shell: x, env: {A: 1}, dir: /tmp}\n",
		"redis:\n  nodes: ['redis://u:hunter2@h:1', 'redis://u:hunter2@h:1', 'http://u:hunter2@x']\n" + job1,
		"redis:\n  nodes: [redis://a:1, redis://b:1]\n  timeout: 1s\nlease: {ttl: 1m, renew: 20s, drift: 0.05}\nshutdown_grace: 1m\n" + job1,
		pg1 + job1,
		"postgres:\n  url: postgres://lc:hunter2@db1:5432,db2/ops?sslmode=verify-full&target_session_attrs=read-write\n  table: ops.leases\n  timeout: 1s\nlease: {ttl: 20s}\n" + job1,
		"postgres: {url: 'postgres://lc:hunter2@db1:99999/ops?sslmode=on', table: Bad.Table.x, password_file: nope}\n" + node1 + job1,
		"postgres:\n  <<: {url: 'host=db1 password=hunter2'}\n" + job1,
		etcd1 + job1,
		zk1 + job1,
		"etcd:\n  endpoints: [http://u:hunter2@a:2379, https://b:2379, grpc://c]\n  prefix: x\n  username: u\n  password_file: nope\n  ca_file: ca.pem\n" + job1,
		"etcd: {endpoints: [https://a:2379], cert_file: c.pem, timeout: 2s}\nlease: {ttl: 15s}\n" + job1,
		"zookeeper:\n  servers: [a:2181, b, 'c:99999']\n  root: x/\n  auth: hunter2\n  auth_file: nope\n" + job1,
		"zookeeper: {servers: [a:2181], root: /a//b, timeout: 3s, auth: 'u:hunter2'}\nlease: {ttl: 9s}\n" + job1,
		zk1 + etcd1 + pg1 + job1,
	} {
		f.Add([]byte(s))
	}
	now := time.Now()
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Parse(bytes.NewReader(data), "fuzz.yaml")
		if err != nil {
			if c != nil {
				t.Fatal("a Config with an error")
			}
			// A node's password (the seeds use hunter2) is never shown
			// where it was: after a ':' or before an '@'.
			for _, e := range configErrors(t, err) {
				if (strings.HasPrefix(e.Field, "redis.nodes") || e.Field == "postgres.url" || strings.HasPrefix(e.Field, "etcd.endpoints")) && (strings.Contains(e.Msg, ":hunter2") || strings.Contains(e.Msg, "hunter2@") || strings.Contains(e.Msg, "=hunter2")) {
					t.Fatalf("password in %q", e)
				}
			}
			for _, e := range configErrors(t, err) {
				if strings.HasPrefix(e.Field, "zookeeper.auth") && strings.Contains(e.Msg, "hunter2") {
					t.Fatalf("auth in %q", e)
				}
				if e.File != "fuzz.yaml" {
					t.Fatalf("error without the file: %q", e)
				}
			}
			var ce *Error
			if !errors.As(err, &ce) {
				t.Fatalf("not a Error: %v", err)
			}
			return
		}
		if err := c.Validate(); err != nil {
			t.Fatalf("accepted config fails Validate: %v\n%s", err, data)
		}
		for _, j := range c.Jobs {
			n := j.Next(now)
			if n.IsZero() || !n.After(now) {
				t.Fatalf("job %q (%q): Next = %s", j.Name, j.Schedule, n)
			}
			if p := j.Prev(n); !p.Equal(n) {
				t.Fatalf("job %q (%q): Prev(Next) = %s, Next = %s", j.Name, j.Schedule, p, n)
			}
		}
	})
}
