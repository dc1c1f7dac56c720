package zookeeper

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/leasecron/leasecron/lease"
)

// ErrSessionTooShort is the error of Open, and of acquisitions on a later
// session, when the servers granted a session timeout under the one asked
// for (Config.SessionTimeout, leasecron's lease.ttl). A server caps a
// session at its maxSessionTimeout (default 20 × tickTime, 40 s with the
// usual tickTime of 2 s); a lock lives no longer than its session, so the
// holder's validity would end before its first renewal (every TTL/3) and
// every run would be stopped. The cure is on the servers (raise
// maxSessionTimeout to at least the TTL) or in the config (a shorter
// lease.ttl).
var ErrSessionTooShort = errors.New("session timeout granted under the one asked for")

// sessionLogger receives go-zookeeper's log lines: it learns the
// negotiated session timeout from the "authenticated" line and drops the
// rest (the package logs nothing itself).
type sessionLogger struct{ b *Backend }

func (l sessionLogger) Printf(format string, args ...any) {
	if strings.HasPrefix(format, "authenticated: id=%d, timeout=%d") && len(args) == 2 {
		if ms, ok := args[1].(int32); ok {
			l.b.negoMS.Store(int64(ms))
		}
	}
}

// SessionTimeout returns the session timeout the servers granted.
func (b *Backend) SessionTimeout() time.Duration {
	return time.Duration(b.negoMS.Load()) * time.Millisecond
}

// sessionErr returns ErrSessionTooShort in a *lease.NodeError of the
// server, naming its setting, when the session's negotiated timeout is known and under the
// one asked for; nil otherwise.
func (b *Backend) sessionErr() error {
	got := b.SessionTimeout()
	if got == 0 || got >= b.cfg.SessionTimeout || b.test.acceptShortSession {
		return nil
	}
	srv := b.conn.Server()
	if srv == "" {
		srv = strings.Join(b.servers, ",")
	}
	return &lease.NodeError{Node: srv, Err: fmt.Errorf("%w: granted %s, asked %s (lease.ttl): raise the servers' maxSessionTimeout to at least %d (ms), or lower lease.ttl",
		ErrSessionTooShort, got, b.cfg.SessionTimeout, b.cfg.SessionTimeout.Milliseconds())}
}
