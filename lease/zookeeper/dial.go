package zookeeper

import (
	"encoding/binary"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// A frozen server (SIGSTOP, a hung JVM, a dead host whose kernel still
// answers) accepts TCP connections but never replies. go-zookeeper waits
// 10 × two thirds of the session timeout for the reply to its connect
// request, and two thirds of it for any reply on an established
// connection; a client whose session moved to a frozen server is stuck
// that long while the rest of the ensemble serves. So the Backend dials
// through boundedConn, which bounds the dial and the handshake by the
// connect bound (go-zookeeper then moves on to the next server), and a
// request given up on that is still unanswered after the connect bound,
// on a connection that has not received a byte since the request began,
// drops the connection, which moves the session on to the next server.

// connectBound is how long a server may stay silent — to a dial, to the
// connect request, to a request in flight — before the session moves on
// to the next server: the request timeout, and at least a tenth of the
// session timeout, so that a slow server (a handshake is a write through
// the leader) is not mistaken for a frozen one when the request timeout
// is very short.
func (b *Backend) connectBound() time.Duration {
	return max(b.cfg.Timeout, b.cfg.SessionTimeout/10)
}

// dial is the Backend's zk.Dialer: it connects within the connect bound
// and returns a boundedConn, which it remembers as the current connection.
func (b *Backend) dial(network, address string, _ time.Duration) (net.Conn, error) {
	if b.test.unboundedConnect {
		return net.DialTimeout(network, address, time.Second) // go-zookeeper's default
	}
	bound := b.connectBound()
	c, err := net.DialTimeout(network, address, bound)
	if err != nil {
		return nil, err
	}
	bc := &boundedConn{Conn: c, handshakeEnd: time.Now().Add(bound), need: -1}
	bc.lastRead.Store(time.Now().UnixNano())
	_ = c.SetDeadline(bc.handshakeEnd)
	b.cur.Store(bc)
	return bc, nil
}

// watchSilence watches a request, begun at start, that its caller gave
// up on: if it is still unanswered once the connect bound has passed
// since start, and nothing was read on the session's connection since
// start, the server is frozen or gone, and the connection is closed:
// go-zookeeper reconnects, to the next server.
func (b *Backend) watchSilence(start time.Time, answered <-chan struct{}) {
	if b.test.unboundedConnect {
		return
	}
	b.mu.Lock()
	if b.closed.Load() {
		b.mu.Unlock()
		return
	}
	b.bgWG.Add(1)
	b.mu.Unlock()
	go func() {
		defer b.bgWG.Done()
		t := time.NewTimer(time.Until(start.Add(b.connectBound())))
		defer t.Stop()
		select {
		case <-answered:
		case <-b.bg.Done():
		case <-t.C:
			if c := b.cur.Load(); c != nil && c.lastRead.Load() < start.UnixNano() {
				_ = c.Close()
			}
		}
	}()
}

// boundedConn is a connection to one server whose handshake (go-zookeeper
// writes a connect request and reads the length-prefixed response) must
// complete by handshakeEnd: until then, every deadline go-zookeeper sets is
// cut to handshakeEnd (no deadline: handshakeEnd). After it, deadlines
// pass through. lastRead is when a byte last arrived.
type boundedConn struct {
	net.Conn
	handshakeEnd time.Time
	lastRead     atomic.Int64 // unix ns

	shook atomic.Bool // the whole connect response was read

	mu   sync.Mutex
	head [4]byte // the response's length prefix, as far as read
	got  int     // bytes of the response read so far
	need int     // its whole size with the prefix (-1: prefix not read yet)
}

func (c *boundedConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 {
		c.lastRead.Store(time.Now().UnixNano())
		if !c.shook.Load() {
			c.mu.Lock()
			c.count(p[:n])
			c.mu.Unlock()
		}
	}
	return n, err
}

// count accounts for bytes of the connect response (c.mu held).
func (c *boundedConn) count(p []byte) {
	if c.got < len(c.head) {
		copy(c.head[c.got:], p)
	}
	c.got += len(p)
	if c.need < 0 && c.got >= len(c.head) {
		c.need = len(c.head) + int(binary.BigEndian.Uint32(c.head[:]))
	}
	if c.need >= 0 && c.got >= c.need {
		c.shook.Store(true)
	}
}

// cut returns t bounded by the handshake's end while it is not done.
func (c *boundedConn) cut(t time.Time) time.Time {
	if c.shook.Load() || (!t.IsZero() && t.Before(c.handshakeEnd)) {
		return t
	}
	return c.handshakeEnd
}

func (c *boundedConn) SetDeadline(t time.Time) error { return c.Conn.SetDeadline(c.cut(t)) }

func (c *boundedConn) SetReadDeadline(t time.Time) error { return c.Conn.SetReadDeadline(c.cut(t)) }

func (c *boundedConn) SetWriteDeadline(t time.Time) error { return c.Conn.SetWriteDeadline(c.cut(t)) }
