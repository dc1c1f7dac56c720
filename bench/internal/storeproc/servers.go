package storeproc

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Postgres starts a PostgreSQL server (the newest /usr/lib/postgresql/*/bin)
// with a fresh initdb (trust authentication, user postgres) in a temp dir
// under /tmp, listening on 127.0.0.1 only, with the server's default
// durability settings (fsync and synchronous_commit on). As root it runs
// as the postgres user. Clients connect with URL().
func Postgres(ctx context.Context) (*Proc, error) { return PostgresWith(ctx) }

// PostgresWith is Postgres with extra server settings, each "name=value"
// (passed as -c name=value after the defaults, so they win), such as
// "max_connections=500".
func PostgresWith(ctx context.Context, settings ...string) (*Proc, error) {
	return retry(func() (*Proc, error) { return postgresOnce(ctx, settings) })
}

func postgresOnce(ctx context.Context, settings []string) (*Proc, error) {
	bins, _ := filepath.Glob("/usr/lib/postgresql/*/bin/postgres")
	if len(bins) == 0 {
		return nil, fmt.Errorf("storeproc: no /usr/lib/postgresql/*/bin/postgres (apt-get install postgresql)")
	}
	sort.Slice(bins, func(i, j int) bool {
		vi, _ := strconv.ParseFloat(filepath.Base(filepath.Dir(filepath.Dir(bins[i]))), 64)
		vj, _ := strconv.ParseFloat(filepath.Base(filepath.Dir(filepath.Dir(bins[j]))), 64)
		return vi > vj
	})
	bin := filepath.Dir(bins[0])
	dir, err := os.MkdirTemp("/tmp", "leasebench-pg-")
	if err != nil {
		return nil, fmt.Errorf("storeproc: %w", err)
	}
	var cred *syscall.Credential
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			_ = os.RemoveAll(dir)
			return nil, fmt.Errorf("storeproc: running as root and no postgres user: %w", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
		if err := os.Chown(dir, uid, gid); err != nil {
			_ = os.RemoveAll(dir)
			return nil, fmt.Errorf("storeproc: %w", err)
		}
	}
	p := &Proc{dir: dir, log: filepath.Join(dir, "server.log"), sig: syscall.SIGQUIT}
	p.Version = version(filepath.Join(bin, "postgres"), "--version")
	env := []string{"LC_ALL=C", "PATH=/usr/bin:/bin"}
	data := filepath.Join(dir, "data")
	initdb := exec.Command(filepath.Join(bin, "initdb"), "-D", data, "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync")
	initdb.Env = env
	initdb.Dir = dir
	initdb.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	if out, err := initdb.CombinedOutput(); err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("storeproc: initdb: %w\n%s", err, out)
	}
	port, err := freePort()
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	p.Addr = "127.0.0.1:" + itoa(port)
	cmd := exec.Command(filepath.Join(bin, "postgres"), "-D", data, "-k", dir, "-p", itoa(port),
		"-c", "listen_addresses=127.0.0.1", "-c", "max_connections=100", "-c", "logging_collector=off")
	for _, kv := range settings {
		cmd.Args = append(cmd.Args, "-c", kv)
	}
	cmd.Env = env
	cmd.Dir = dir
	// The log file must be writable by the server's user.
	if f, err := os.Create(p.log); err == nil {
		_ = f.Close()
		if cred != nil {
			_ = os.Chown(p.log, int(cred.Uid), int(cred.Gid))
		}
	}
	if err := p.spawn(cmd, cred); err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	if err := p.wait(ctx, "postgres", 30*time.Second, func() error {
		b, _ := os.ReadFile(p.log)
		if !strings.Contains(string(b), "ready to accept connections") {
			return fmt.Errorf("not ready")
		}
		return nil
	}); err != nil {
		_ = p.Stop()
		return nil, err
	}
	return p, nil
}

// URL returns the postgres:// URL of a Postgres server.
func (p *Proc) URL() string {
	return "postgres://postgres@" + p.Addr + "/postgres?sslmode=disable"
}

// Etcd starts a one-member etcd cluster (/usr/bin/etcd or etcd on PATH)
// with its data in a temp dir. Clients connect to URL()-less Endpoint().
func Etcd(ctx context.Context) (*Proc, error) {
	return retry(func() (*Proc, error) { return etcdOnce(ctx) })
}

func etcdOnce(ctx context.Context) (*Proc, error) {
	bin, err := exec.LookPath("etcd")
	if err != nil {
		return nil, fmt.Errorf("storeproc: etcd not installed (apt-get install etcd-server): %w", err)
	}
	dir, err := os.MkdirTemp("", "leasebench-etcd-")
	if err != nil {
		return nil, fmt.Errorf("storeproc: %w", err)
	}
	cport, err := freePort()
	if err != nil {
		return nil, err
	}
	pport, err := freePort()
	if err != nil {
		return nil, err
	}
	p := &Proc{Addr: "127.0.0.1:" + itoa(cport), dir: dir, log: filepath.Join(dir, "etcd.log"), sig: syscall.SIGKILL}
	p.Version = version(bin, "--version")
	cu, pu := "http://"+p.Addr, "http://127.0.0.1:"+itoa(pport)
	cmd := exec.Command(bin, "--name", "m0", "--data-dir", filepath.Join(dir, "data"),
		"--listen-client-urls", cu, "--advertise-client-urls", cu,
		"--listen-peer-urls", pu, "--initial-advertise-peer-urls", pu,
		"--initial-cluster", "m0="+pu, "--initial-cluster-state", "new",
		"--log-level", "warn")
	if err := p.spawn(cmd, nil); err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	hc := http.Client{Timeout: time.Second}
	defer hc.CloseIdleConnections()
	if err := p.wait(ctx, "etcd", 30*time.Second, func() error {
		resp, err := hc.Get(cu + "/health")
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		var b [256]byte
		n, _ := resp.Body.Read(b[:])
		if !strings.Contains(string(b[:n]), `"health":"true"`) {
			return fmt.Errorf("health: %s", b[:n])
		}
		return nil
	}); err != nil {
		_ = p.Stop()
		return nil, err
	}
	return p, nil
}

// ZooKeeperJar is the Debian package's server jar.
const ZooKeeperJar = "/usr/share/java/zookeeper.jar"

// ZooKeeper starts a standalone ZooKeeper server (java + ZooKeeperJar)
// with tickTime 200 ms (sessions from 400 ms to 60 s) and its data in a temp
// dir.
func ZooKeeper(ctx context.Context) (*Proc, error) {
	return retry(func() (*Proc, error) { return zooKeeperOnce(ctx) })
}

func zooKeeperOnce(ctx context.Context) (*Proc, error) {
	if _, err := exec.LookPath("java"); err != nil {
		return nil, fmt.Errorf("storeproc: java not installed: %w", err)
	}
	if _, err := os.Stat(ZooKeeperJar); err != nil {
		return nil, fmt.Errorf("storeproc: apt-get install zookeeper: %w", err)
	}
	dir, err := os.MkdirTemp("", "leasebench-zk-")
	if err != nil {
		return nil, fmt.Errorf("storeproc: %w", err)
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	p := &Proc{Addr: "127.0.0.1:" + itoa(port), dir: dir, log: filepath.Join(dir, "zookeeper.log"), sig: syscall.SIGKILL}
	cfg := fmt.Sprintf("tickTime=200\ndataDir=%s\nclientPort=%d\nclientPortAddress=127.0.0.1\nminSessionTimeout=400\nmaxSessionTimeout=60000\n4lw.commands.whitelist=srvr,ruok\nadmin.enableServer=false\n",
		filepath.Join(dir, "data"), port)
	log4j := "log4j.rootLogger=WARN, F\nlog4j.appender.F=org.apache.log4j.FileAppender\nlog4j.appender.F.File=" + p.log +
		"\nlog4j.appender.F.layout=org.apache.log4j.PatternLayout\nlog4j.appender.F.layout.ConversionPattern=%d %p [%t] %c{1}: %m%n\n"
	if err := os.WriteFile(filepath.Join(dir, "zoo.cfg"), []byte(cfg), 0o644); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, "log4j.properties"), []byte(log4j), 0o644); err != nil {
		return nil, err
	}
	cmd := exec.Command("java", "-Xmx256m", "-XX:+UseSerialGC", "-Dzookeeper.log.dir="+dir,
		"-cp", dir+":"+ZooKeeperJar, "org.apache.zookeeper.server.quorum.QuorumPeerMain", filepath.Join(dir, "zoo.cfg"))
	if err := p.spawn(cmd, nil); err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	if err := p.wait(ctx, "zookeeper", 60*time.Second, func() error {
		out, err := tcpRequest(p.Addr, "srvr")
		if err != nil {
			return err
		}
		if !strings.Contains(out, "Mode: standalone") {
			return fmt.Errorf("srvr: %q", out)
		}
		for _, l := range strings.Split(out, "\n") {
			if strings.HasPrefix(l, "Zookeeper version:") {
				v := strings.TrimSpace(strings.TrimPrefix(l, "Zookeeper version:"))
				v, _, _ = strings.Cut(v, "-")
				v, _, _ = strings.Cut(v, ",")
				p.Version = "ZooKeeper " + v
			}
		}
		return nil
	}); err != nil {
		_ = p.Stop()
		return nil, err
	}
	return p, nil
}
