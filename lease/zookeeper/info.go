package zookeeper

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/leasecron/leasecron/lease"
)

// Inspect reads the key's lock, done epoch and note, after a sync (so it
// sees every write acknowledged before it was called; without a quorum,
// from the server's own copy). Fence is the job
// node's pzxid: the zxid of the last creation or deletion of its lock, at
// least every fencing token handed out for the key. TTL is the session
// timeout while the lock is held: a holder that died keeps it at most
// that long.
func (b *Backend) Inspect(ctx context.Context, key string) (lease.Info, error) {
	if err := checkKey(key); err != nil {
		return lease.Info{}, err
	}
	p := b.paths(key)
	info := lease.Info{NoteVersion: -1}
	// Read what every acknowledged write left, as the other stores'
	// Inspect does: a grant another client was told of is seen. Without
	// a quorum to sync with, the server's own copy is read (status and
	// the status page keep showing something during an outage).
	_ = b.sync(ctx)
	var lock, done, note []byte
	var jobSt *zk.Stat
	err := b.call(ctx, b.cfg.Timeout, func() error {
		var err error
		// The lock first: a session's reads never go back in time, so
		// the job node read next has a pzxid at least the lock's czxid
		// (read the other way round, a follower catching up between the
		// two reads showed a held lock with fence 0).
		if lock, _, err = b.conn.Get(p.lock); err != nil && !errors.Is(err, zk.ErrNoNode) {
			return err
		}
		if _, jobSt, err = b.conn.Exists(p.key); err != nil {
			return err
		}
		if done, _, err = b.conn.Get(p.done); err != nil && !errors.Is(err, zk.ErrNoNode) {
			return err
		}
		if note, _, err = b.conn.Get(p.note); err != nil && !errors.Is(err, zk.ErrNoNode) {
			return err
		}
		return nil
	}, nil)
	if err != nil {
		return info, fmt.Errorf("inspect %s: %w", key, b.nodeErr(err))
	}
	info.Answered = 1
	if len(lock) > 0 {
		_, owner, _ := strings.Cut(string(lock), " ")
		info.Holder, info.HolderNodes, info.TTL = owner, 1, b.SessionTimeout()
	}
	info.DoneEpoch, _ = strconv.ParseInt(strings.TrimSpace(string(done)), 10, 64)
	if jobSt != nil {
		info.Fence = jobSt.Pzxid
	}
	if v, n, ok := parseNote(note); ok {
		info.Note, info.NoteVersion = n, v
	}
	return info, nil
}

func parseNote(b []byte) (int64, string, bool) {
	head, rest, ok := strings.Cut(string(b), "\n")
	if !ok {
		return 0, "", false
	}
	v, err := strconv.ParseInt(head, 10, 64)
	return v, rest, err == nil
}

// SetNote stores note under the key unless a note with a higher version
// is stored (a compare-and-set on the note znode's version, retried when
// another writer came first).
func (b *Backend) SetNote(ctx context.Context, key string, version int64, note string) error {
	if err := checkKey(key); err != nil {
		return err
	}
	p := b.paths(key)
	if err := b.prepare(ctx, p, b.cfg.Timeout); err != nil {
		return fmt.Errorf("set note %s: %w", key, b.nodeErr(err))
	}
	data := []byte(strconv.FormatInt(version, 10) + "\n" + note)
	for range 10 {
		var cur []byte
		var st *zk.Stat
		err := b.call(ctx, b.cfg.Timeout, func() error {
			var err error
			cur, st, err = b.conn.Get(p.note)
			return err
		}, nil)
		switch {
		case errors.Is(err, zk.ErrNoNode):
			err = b.call(ctx, b.cfg.Timeout, func() error {
				_, err := b.conn.Create(p.note, data, 0, b.acl())
				return err
			}, nil)
			if errors.Is(err, zk.ErrNodeExists) {
				continue
			}
		case err == nil:
			if v, _, ok := parseNote(cur); ok && v > version {
				return nil
			}
			err = b.call(ctx, b.cfg.Timeout, func() error {
				_, err := b.conn.Set(p.note, data, st.Version)
				return err
			}, nil)
			if errors.Is(err, zk.ErrBadVersion) {
				continue
			}
		}
		if err != nil {
			return fmt.Errorf("set note %s: %w", key, b.nodeErr(err))
		}
		return nil
	}
	return fmt.Errorf("set note %s: too many concurrent writers", key)
}

// Health asks every server for its mode (the srvr four-letter word, which
// ZooKeeper allows by default). Voting means the server serves clients in a
// quorum (leader, follower or standalone).
func (b *Backend) Health(ctx context.Context) []lease.ServerStatus {
	out := make([]lease.ServerStatus, len(b.servers))
	done := make(chan struct{}, len(b.servers))
	for i, s := range b.servers {
		go func() {
			defer func() { done <- struct{}{} }()
			start := time.Now()
			mode, err := srvrMode(ctx, s, b.cfg.Timeout)
			// A server that answers but does not serve is in an election:
			// give it a moment (a second or two on a quick ensemble).
			for end := time.Now().Add(2 * time.Second); err == nil && mode == "" && time.Now().Before(end) && ctx.Err() == nil; {
				time.Sleep(50 * time.Millisecond)
				start = time.Now()
				mode, err = srvrMode(ctx, s, b.cfg.Timeout)
			}
			st := lease.ServerStatus{Server: s, Latency: time.Since(start), Err: err}
			switch {
			case err != nil:
			case mode == "leader" || mode == "follower" || mode == "standalone":
				st.Voting = true
			case mode == "":
				st.Err = errors.New("not serving clients (no quorum, or an election in progress)")
			default:
				st.Err = fmt.Errorf("not serving clients (mode %q)", mode)
			}
			out[i] = st
		}()
	}
	for range b.servers {
		<-done
	}
	return out
}

// srvrMode sends srvr to addr and returns the Mode line's value.
func srvrMode(ctx context.Context, addr string, timeout time.Duration) (string, error) {
	d := net.Dialer{Timeout: timeout}
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(timeout))
	if _, err := c.Write([]byte("srvr")); err != nil {
		return "", err
	}
	sc := bufio.NewScanner(c)
	var first string
	for sc.Scan() {
		if first == "" {
			first = sc.Text()
		}
		if m, ok := strings.CutPrefix(sc.Text(), "Mode: "); ok {
			return strings.TrimSpace(m), nil
		}
	}
	if err := sc.Err(); err != nil {
		return "", err
	}
	if strings.Contains(first, "whitelist") {
		// srvr is switched off on this server: it answered, so count it.
		return "standalone", nil
	}
	if strings.Contains(first, "not currently serving") {
		return "", nil
	}
	return "", errors.New("no answer to srvr")
}

// Warm makes one round trip on the session, so that the connection is up
// before the first acquisition.
func (b *Backend) Warm(ctx context.Context) error {
	return b.call(ctx, b.cfg.Timeout, func() error {
		_, _, err := b.conn.Exists(b.cfg.Root)
		return err
	}, nil)
}

// CheckConfig validates cfg without connecting: at least one server, each
// host:port with a numeric port; an absolute root without a trailing
// slash; positive timeouts, the request timeout shorter than the session
// timeout; auth of the form user:password.
func CheckConfig(cfg Config) error {
	var errs []error
	if len(cfg.Servers) == 0 {
		errs = append(errs, errors.New("zookeeper: no servers"))
	}
	for _, s := range cfg.Servers {
		host, port, err := net.SplitHostPort(s)
		if err != nil || host == "" {
			errs = append(errs, fmt.Errorf("zookeeper: server %q: want host:port", s))
			continue
		}
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
			errs = append(errs, fmt.Errorf("zookeeper: server %q: bad port", s))
		}
	}
	if r := cfg.Root; r != "" && (!strings.HasPrefix(r, "/") || (len(r) > 1 && strings.HasSuffix(r, "/")) || strings.Contains(r, "//")) {
		errs = append(errs, fmt.Errorf("zookeeper: root %q: want an absolute path like /leasecron", r))
	}
	if cfg.Timeout < 0 || cfg.SessionTimeout < 0 {
		errs = append(errs, errors.New("zookeeper: timeouts must be positive"))
	}
	if cfg.Timeout > 0 && cfg.SessionTimeout > 0 && cfg.Timeout >= cfg.SessionTimeout/3 {
		errs = append(errs, fmt.Errorf("zookeeper: timeout %s must be under a third of the session timeout %s", cfg.Timeout, cfg.SessionTimeout))
	}
	if a := cfg.Auth; a != "" {
		if u, pw, ok := strings.Cut(a, ":"); !ok || u == "" || pw == "" {
			errs = append(errs, errors.New("zookeeper: auth: want user:password (digest scheme)"))
		}
	}
	return errors.Join(errs...)
}
