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
// request timeout (go-zookeeper then moves on to the next server), and a
// request that got no answer within its timeout, on a connection that has
// not received a byte since that request began, drops the connection,
// which also moves the session on to the next server.

// dial is the Backend's zk.Dialer: it connects within the request timeout
// and returns a boundedConn, which it remembers as the current connection.
func (b *Backend) dial(network, address string, _ time.Duration) (net.Conn, error) {
	if b.unboundedConnect {
		return net.DialTimeout(network, address, time.Second) // go-zookeeper's default
	}
	c, err := net.DialTimeout(network, address, b.cfg.Timeout)
	if err != nil {
		return nil, err
	}
	bc := &boundedConn{Conn: c, handshakeEnd: time.Now().Add(b.cfg.Timeout), need: -1}
	bc.lastRead.Store(time.Now().UnixNano())
	_ = c.SetDeadline(bc.handshakeEnd)
	b.cur.Store(bc)
	return bc, nil
}

// dropIfSilent closes the session's connection when nothing was read on
// it since since (the start of a request that just timed out): the server
// is frozen or gone, and go-zookeeper reconnects, to the next server.
func (b *Backend) dropIfSilent(since time.Time) {
	if b.unboundedConnect {
		return
	}
	if c := b.cur.Load(); c != nil && c.lastRead.Load() < since.UnixNano() {
		_ = c.Close()
	}
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
