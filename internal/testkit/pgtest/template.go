package pgtest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/leasecron/leasecron/internal/testkit/proctest"
)

// templateFormat changes whenever what the template holds changes.
const templateFormat = 1

// installHint is how to get the server binaries.
const installHint = "install the PostgreSQL server: apt-get install postgresql"

// runAs is the user the server runs as: nil when the tests are not root.
type runAs struct {
	name     string
	uid, gid int
}

func (r *runAs) cred() *syscall.Credential {
	if r == nil {
		return nil
	}
	return &syscall.Credential{Uid: uint32(r.uid), Gid: uint32(r.gid)}
}

// chown gives path to the server's user (nothing when not root).
func (r *runAs) chown(path string) error {
	if r == nil {
		return nil
	}
	return os.Lchown(path, r.uid, r.gid)
}

// serverUser picks the unprivileged user to run the server as when root.
func serverUser() (*runAs, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	for _, name := range []string{"postgres", "nobody"} {
		u, err := user.Lookup(name)
		if err != nil {
			continue
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		return &runAs{name: name, uid: uid, gid: gid}, nil
	}
	return nil, errors.New("running as root, and neither a postgres nor a nobody user exists to run the server as (PostgreSQL refuses root)")
}

// binDir finds the newest /usr/lib/postgresql/*/bin with a postgres
// binary, or the directory of postgres on PATH.
func binDir(t testing.TB) string {
	t.Helper()
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin/postgres")
	sort.Slice(dirs, func(i, j int) bool {
		vi, _ := strconv.ParseFloat(filepath.Base(filepath.Dir(filepath.Dir(dirs[i]))), 64)
		vj, _ := strconv.ParseFloat(filepath.Base(filepath.Dir(filepath.Dir(dirs[j]))), 64)
		return vi > vj
	})
	if len(dirs) > 0 {
		return filepath.Dir(dirs[0])
	}
	if p, err := exec.LookPath("postgres"); err == nil {
		return filepath.Dir(p)
	}
	t.Fatalf("pgtest: no postgres binary in /usr/lib/postgresql/*/bin nor on PATH; %s", installHint)
	return ""
}

var templateMu sync.Mutex

// template returns the data directory of the template cluster for bin,
// making it first if needed. Several test binaries may race to make it:
// each builds in its own directory and renames it into place.
func template(bin string, who *runAs) (string, error) {
	templateMu.Lock()
	defer templateMu.Unlock()
	out, err := exec.Command(filepath.Join(bin, "postgres"), "--version").Output()
	if err != nil {
		return "", fmt.Errorf("%s --version: %w (%s)", filepath.Join(bin, "postgres"), err, installHint)
	}
	owner := "self"
	if who != nil {
		owner = who.name
	}
	h := sha256.Sum256([]byte(fmt.Sprintf("%s\n%s\n%s\n%d", bin, out, owner, templateFormat)))
	final := filepath.Join(os.TempDir(), "leasecron-pgtest-template-"+hex.EncodeToString(h[:6]))
	if _, err := os.Stat(filepath.Join(final, "ready")); err == nil {
		return filepath.Join(final, "data"), nil
	}
	tmp, err := os.MkdirTemp(os.TempDir(), "leasecron-pgtest-build-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp) // gone after the rename
	if err := who.chown(tmp); err != nil {
		return "", err
	}
	if err := buildTemplate(bin, who, tmp); err != nil {
		return "", fmt.Errorf("making the template cluster: %w", err)
	}
	if err := os.WriteFile(filepath.Join(tmp, "ready"), nil, 0o644); err != nil {
		return "", err
	}
	if err := os.Rename(tmp, final); err != nil {
		if _, serr := os.Stat(filepath.Join(final, "ready")); serr != nil {
			return "", fmt.Errorf("installing the template cluster: %w", err)
		}
	}
	return filepath.Join(final, "data"), nil
}

// buildTemplate runs initdb in dir/data, then starts the server on a
// socket only and creates the role and database "leasecron", and stops
// it cleanly.
func buildTemplate(bin string, who *runAs, dir string) error {
	data := filepath.Join(dir, "data")
	initdb := exec.Command(filepath.Join(bin, "initdb"), "-D", data, "-U", "postgres",
		"--auth-local=trust", "--auth-host=scram-sha-256", "-E", "UTF8", "--locale=C",
		"--no-sync", "--no-instructions")
	initdb.Dir = dir
	initdb.Env = serverEnv()
	initdb.SysProcAttr = &syscall.SysProcAttr{Credential: who.cred()}
	if out, err := initdb.CombinedOutput(); err != nil {
		return fmt.Errorf("initdb: %w\n%s", err, out)
	}
	cmd := exec.Command(filepath.Join(bin, "postgres"), "-D", data, "-k", dir, "-p", "5432",
		"-c", "listen_addresses=")
	cmd.Dir = dir
	cmd.Env = serverEnv()
	logf, err := os.Create(filepath.Join(dir, "template.log"))
	if err != nil {
		return err
	}
	defer logf.Close()
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = proctest.SysProcAttr(who.cred())
	if err := cmd.Start(); err != nil {
		return err
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	err = func() error {
		c, err := waitConnect(socketDSN(dir, 5432, "postgres"), done, 30*time.Second)
		if err != nil {
			return err
		}
		defer c.Close(context.Background())
		for _, q := range []string{"CREATE ROLE leasecron LOGIN", "CREATE DATABASE leasecron OWNER leasecron"} {
			if _, err := c.Exec(context.Background(), q); err != nil {
				return fmt.Errorf("%s: %w", q, err)
			}
		}
		return nil
	}()
	_ = cmd.Process.Signal(syscall.SIGINT) // fast shutdown: a clean cluster
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		<-done
		return errors.New("template server did not stop within 30 s")
	}
	if err != nil {
		b, _ := os.ReadFile(filepath.Join(dir, "template.log"))
		return fmt.Errorf("%w\n%s", err, b)
	}
	return nil
}

// serverEnv is the environment of initdb and postgres: ours without the
// PG* variables (which could point them elsewhere).
func serverEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "PG") {
			env = append(env, kv)
		}
	}
	return append(env, "LC_ALL=C")
}

// socketDSN is a keyword/value string for the Unix socket in dir.
func socketDSN(dir string, port int, dbname string) string {
	return fmt.Sprintf("host=%s port=%d user=postgres dbname=%s sslmode=disable connect_timeout=2", dir, port, dbname)
}

// waitConnect connects to dsn until it succeeds, the process exits (done)
// or timeout passes.
func waitConnect(dsn string, done <-chan struct{}, timeout time.Duration) (*pgx.Conn, error) {
	deadline := time.Now().Add(timeout)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		c, err := pgx.Connect(ctx, dsn)
		if err == nil {
			_, err = c.Exec(ctx, "SELECT 1")
			if err != nil {
				c.Close(ctx)
			}
		}
		cancel()
		if err == nil {
			return c, nil
		}
		select {
		case <-done:
			return nil, errors.New("postgres exited during start")
		default:
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("no connection within %s: %w", timeout, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// copyTree copies the data directory src to dst, owned by who.
func copyTree(src, dst string, who *runAs) error {
	return filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, path)
		to := filepath.Join(dst, rel)
		info, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case d.IsDir():
			if err := os.Mkdir(to, info.Mode().Perm()); err != nil {
				return err
			}
		case d.Type().IsRegular():
			if err := copyFile(path, to, info.Mode().Perm()); err != nil {
				return err
			}
		default:
			return fmt.Errorf("%s: unexpected file type %s", path, d.Type())
		}
		return who.chown(to)
	})
}

func copyFile(src, dst string, mode fs.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_EXCL|os.O_WRONLY, mode)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
