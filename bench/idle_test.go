package bench

import (
	"bufio"
	"context"
	"database/sql"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/leasecron/leasecron/internal/testkit/etcdtest"
	"github.com/leasecron/leasecron/internal/testkit/mysqltest"
	"github.com/leasecron/leasecron/internal/testkit/pgtest"
	"github.com/leasecron/leasecron/internal/testkit/zktest"
)

// The shape of BenchmarkIdle, set with
// `go test -bench Idle -args -idle.jobs=1000 -idle.window=30s`.
var (
	idleJobs   = flag.Int("idle.jobs", 1000, "BenchmarkIdle: jobs per daemon (none fires in the window)")
	idleHosts  = flag.Int("idle.hosts", 8, "BenchmarkIdle: daemons of the fleet case")
	idleWarm   = flag.Duration("idle.warm", 20*time.Second, "BenchmarkIdle: steady-state wait before the window")
	idleWindow = flag.Duration("idle.window", 20*time.Second, "BenchmarkIdle: the measured window")
	idleStores = flag.String("idle.stores", "redis,postgres,mysql,etcd,zookeeper", "BenchmarkIdle: stores to measure")
)

// idleStore is a store under BenchmarkIdle: the backend section of the
// daemons' config and the requests its servers have received so far.
type idleStore struct {
	section  string
	requests func(ctx context.Context) (int64, error)
}

// BenchmarkIdle runs real daemons (`leasecron run`, built from this
// tree) on each store with -idle.jobs jobs that do not fire in the
// window, waits -idle.warm for the steady state (the start-up guard, the
// first heartbeats), and counts the requests the store's servers receive
// in -idle.window: one daemon (with its CPU as a share of one core and
// its RSS) and -idle.hosts daemons (requests per host: a fleet whose
// cost is linear in its hosts keeps this flat). The counters are Redis
// commands sent by clients (MONITOR, summed over the 5 nodes; the
// calls inside scripts not counted),
// PostgreSQL's transactions (pg_stat_database), MariaDB's Questions and
// Com_admin_commands (pings), etcd's gRPC messages received
// (grpc_server_msg_received_total, summed over the 3 members, lease
// keep-alives included) and ZooKeeper's packets_received (mntr, summed
// over the 3 servers, session pings included). Run it alone, once:
// -bench Idle -benchtime 1x.
func BenchmarkIdle(b *testing.B) {
	dir := b.TempDir()
	bin := filepath.Join(dir, "leasecron")
	// Built in the main module (this one lacks some of its dependencies).
	build := exec.Command("go", "build", "-o", bin, "./cmd/leasecron")
	build.Dir = ".."
	if out, err := build.CombinedOutput(); err != nil {
		b.Fatalf("go build ./cmd/leasecron: %v\n%s", err, out)
	}
	for _, name := range strings.Split(*idleStores, ",") {
		b.Run("store="+name, func(b *testing.B) {
			st := startIdleStore(b, name)
			for i, hosts := range []int{1, *idleHosts} {
				b.Run(fmt.Sprintf("hosts=%d", hosts), func(b *testing.B) {
					for range b.N {
						idleRun(b, bin, st, fmt.Sprintf("idle%d", i), hosts)
					}
				})
			}
		})
	}
}

// idleRun starts hosts daemons, waits for the steady state and reports
// the requests per second per host over the window; with one host, the
// daemon's CPU (% of a core) and RSS too.
func idleRun(b *testing.B, bin string, st idleStore, space string, hosts int) {
	dir := b.TempDir()
	var procs []*exec.Cmd
	for h := range hosts {
		cfg := filepath.Join(dir, fmt.Sprintf("h%02d.yaml", h))
		if err := os.WriteFile(cfg, idleConfig(st, fmt.Sprintf("%s-h%02d", space, h)), 0o600); err != nil {
			b.Fatal(err)
		}
		logf, err := os.Create(filepath.Join(dir, fmt.Sprintf("h%02d.log", h)))
		if err != nil {
			b.Fatal(err)
		}
		cmd := exec.Command(bin, "run", "-c", cfg)
		cmd.Stdout, cmd.Stderr = logf, logf
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		procs = append(procs, cmd)
		b.Cleanup(func() {
			_ = cmd.Process.Signal(syscall.SIGTERM)
			done := make(chan struct{})
			go func() { _ = cmd.Wait(); close(done) }()
			select {
			case <-done:
			case <-time.After(30 * time.Second):
				_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
				<-done
			}
			_ = logf.Close()
		})
	}
	time.Sleep(*idleWarm)
	for _, p := range procs {
		if p.ProcessState != nil {
			b.Fatalf("daemon %d exited: %v", p.Process.Pid, p.ProcessState)
		}
	}
	b.ResetTimer()
	r0, t0 := idleRequests(b, st)
	cpu0 := procCPU(b, procs[0].Process.Pid)
	time.Sleep(*idleWindow)
	r1, t1 := idleRequests(b, st)
	cpu1 := procCPU(b, procs[0].Process.Pid)
	b.StopTimer()
	secs := t1.Sub(t0).Seconds()
	b.ReportMetric(float64(r1-r0)/secs/float64(hosts), "req/s/host")
	b.ReportMetric(float64(r1-r0)/secs, "req/s")
	if hosts == 1 {
		b.ReportMetric(100*(cpu1-cpu0).Seconds()/secs, "cpu-%")
		b.ReportMetric(float64(procRSS(b, procs[0].Process.Pid))/(1<<20), "rss-MiB")
	}
}

// idleConfig is a daemon's config: -idle.jobs jobs, each once a day at
// a time at least two hours away, with a deadline of a minute (so that
// no earlier tick is caught up at start: none fires in the window).
func idleConfig(st idleStore, id string) []byte {
	var sb strings.Builder
	fmt.Fprintf(&sb, "id: %s\n%s", id, st.section)
	sb.WriteString("defaults:\n  timezone: UTC\n  candidates: 3\n  deadline: 1m\njobs:\n")
	h0 := time.Now().UTC().Hour()
	for i := range *idleJobs {
		spec := fmt.Sprintf("%d %d * * *", i%60, (h0+2+i%20)%24)
		fmt.Fprintf(&sb, "  - {name: j%05d, schedule: %q, shell: \"true\"}\n", i, spec)
	}
	return []byte(sb.String())
}

func idleRequests(b *testing.B, st idleStore) (int64, time.Time) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	n, err := st.requests(ctx)
	if err != nil {
		b.Fatal(err)
	}
	return n, time.Now()
}

// startIdleStore starts the servers of the named store.
func startIdleStore(b *testing.B, name string) idleStore {
	b.Helper()
	switch name {
	case "redis":
		addrs, _ := redisNodes(b, 5)
		var sb strings.Builder
		sb.WriteString("redis:\n  prefix: idle\n  nodes:\n")
		for _, a := range addrs {
			fmt.Fprintf(&sb, "    - %q\n", "redis://"+a+"/0")
		}
		return idleStore{section: sb.String(), requests: redisMonitor(b, addrs)}
	case "postgres":
		srv := pgtest.Start(b)
		admin, err := pgx.Connect(context.Background(), srv.URL())
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = admin.Close(context.Background()) })
		reads := int64(0)
		return idleStore{
			section: fmt.Sprintf("postgres:\n  url: %q\n", srv.URL()),
			// Every statement of the backend is a transaction, and so is
			// each read of this counter (subtracted). A session reports
			// its counts at most once a second (10 s once idle): the
			// window is long beside that.
			requests: func(ctx context.Context) (int64, error) {
				var n int64
				err := admin.QueryRow(ctx, `SELECT xact_commit + xact_rollback FROM pg_stat_database WHERE datname = current_database()`).Scan(&n)
				reads++
				return n - reads, err
			},
		}
	case "mysql":
		srv := mysqltest.Start(b)
		db, err := sql.Open("mysql", srv.DSN())
		if err != nil {
			b.Fatal(err)
		}
		db.SetMaxOpenConns(1)
		b.Cleanup(func() { _ = db.Close() })
		reads := int64(0)
		return idleStore{
			section: fmt.Sprintf("mysql:\n  dsn: %q\n", srv.DSN()),
			requests: func(ctx context.Context) (int64, error) {
				rows, err := db.QueryContext(ctx, `SHOW GLOBAL STATUS WHERE Variable_name IN ('Questions', 'Com_admin_commands')`)
				if err != nil {
					return 0, err
				}
				defer rows.Close()
				var total int64
				for rows.Next() {
					var k string
					var v int64
					if err := rows.Scan(&k, &v); err != nil {
						return 0, err
					}
					total += v
				}
				reads++
				return total - reads, rows.Err()
			},
		}
	case "etcd":
		cl := etcdtest.Start(b)
		eps := cl.Endpoints()
		var sb strings.Builder
		sb.WriteString("etcd:\n  prefix: /idle/\n  endpoints:\n")
		for _, e := range eps {
			fmt.Fprintf(&sb, "    - %q\n", e)
		}
		return idleStore{section: sb.String(), requests: func(ctx context.Context) (int64, error) { return etcdMessages(ctx, eps) }}
	case "zookeeper":
		e := zktest.Start(b, 3)
		addrs := e.Addrs()
		var sb strings.Builder
		sb.WriteString("zookeeper:\n  root: /idle\n  servers:\n")
		for _, a := range addrs {
			fmt.Fprintf(&sb, "    - %q\n", a)
		}
		reads := int64(0)
		return idleStore{section: sb.String(), requests: func(ctx context.Context) (int64, error) {
			// Each server counts the mntr that reads its counter
			// (subtracted), as it counts the daemon's srvr.
			n, err := zkPackets(ctx, addrs)
			reads++
			return n - reads*int64(len(addrs)), err
		}}
	}
	b.Fatalf("unknown store %s", name)
	return idleStore{}
}

// redisMonitor counts the commands clients send to the nodes, from
// MONITOR on each node: the lines of client connections, not those of the
// calls scripts make inside the server ("[0 lua]"), which INFO
// commandstats cannot tell apart from them.
func redisMonitor(b *testing.B, addrs []string) func(context.Context) (int64, error) {
	var n atomic.Int64
	for _, a := range addrs {
		conn, err := net.Dial("tcp", a)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = conn.Close() })
		if _, err := conn.Write([]byte("MONITOR\r\n")); err != nil {
			b.Fatal(err)
		}
		go func() {
			sc := bufio.NewScanner(conn)
			sc.Buffer(make([]byte, 1<<20), 1<<20)
			for sc.Scan() {
				line := sc.Text()
				if i := strings.IndexByte(line, '['); i > 0 && !strings.HasPrefix(line[i:], "[0 lua]") {
					n.Add(1)
				}
			}
		}()
	}
	return func(context.Context) (int64, error) { return n.Load(), nil }
}

// etcdMessages sums the gRPC messages the members received
// (grpc_server_msg_received_total of their /metrics), less the Range
// calls nobody made: /metrics is plain HTTP and not counted.
func etcdMessages(ctx context.Context, eps []string) (int64, error) {
	var total int64
	for _, ep := range eps {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(ep, "/")+"/metrics", nil)
		if err != nil {
			return 0, err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, err
		}
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			if !strings.HasPrefix(line, "grpc_server_msg_received_total{") {
				continue
			}
			f := strings.Fields(line)
			v, _ := strconv.ParseFloat(f[len(f)-1], 64)
			total += int64(v)
		}
		_ = resp.Body.Close()
		if err := sc.Err(); err != nil {
			return 0, err
		}
	}
	return total, nil
}

// zkPackets sums packets_received of the servers' mntr: the protocol's
// requests and pings, and the four-letter words (this mntr among them).
func zkPackets(ctx context.Context, addrs []string) (int64, error) {
	var total int64
	for _, a := range addrs {
		var d net.Dialer
		conn, err := d.DialContext(ctx, "tcp", a)
		if err != nil {
			return 0, err
		}
		_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
		_, _ = conn.Write([]byte("mntr"))
		out, err := io.ReadAll(conn)
		_ = conn.Close()
		if err != nil {
			return 0, err
		}
		for _, line := range strings.Split(string(out), "\n") {
			if v, ok := strings.CutPrefix(line, "zk_packets_received\t"); ok {
				n, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
				total += n
			}
		}
	}
	return total, nil
}

// procCPU is the user and system CPU time of process pid.
func procCPU(b *testing.B, pid int) time.Duration {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		b.Fatal(err)
	}
	// Fields after the command name (which may hold spaces) in parens.
	s := string(raw)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * time.Second / 100 // USER_HZ
}

// procRSS is the resident set of process pid in bytes.
func procRSS(b *testing.B, pid int) int64 {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}
