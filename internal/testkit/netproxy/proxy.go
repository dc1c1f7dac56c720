// Package netproxy is a TCP proxy for tests, like toxiproxy in-process:
// it sits between a client and a server on loopback and injects network
// faults — latency, silent loss, broken connections, rewritten replies.
// Every server test kit (redistest, pgtest, etcdtest, zktest) and the fleet
// tests use it.
package netproxy

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

const (
	// proxyDialTimeout bounds the proxy's connection to its target.
	proxyDialTimeout = 2 * time.Second
	// proxyStopTimeout bounds the wait for the proxy's goroutines at cleanup.
	proxyStopTimeout = 10 * time.Second
	// chunkSize is the largest piece of a stream read and delayed at once.
	chunkSize = 32 << 10
	// queueLen bounds the chunks in flight per direction of a connection.
	queueLen = 256
)

// Proxy is a TCP proxy on its own loopback port that forwards every
// connection to a target address, like toxiproxy in-process. It injects
// network faults into the connections that pass through it: latency
// (SetDelay), silent loss (Blackhole), lost answers (DropReplies) and
// broken connections (Cut). Its methods are safe for concurrent use; it is
// stopped and all its connections closed at the test's cleanup.
type Proxy struct {
	t      testing.TB
	target string
	ln     net.Listener
	ctx    context.Context // cancelled at cleanup
	cancel context.CancelFunc
	wg     sync.WaitGroup // every goroutine of the proxy

	delay     atomic.Int64 // time.Duration added to every chunk
	blackhole atomic.Bool
	noReplies atomic.Bool
	rewrite   atomic.Pointer[[2][]byte] // from, to (same length) in the target's replies

	mu     sync.Mutex
	cut    bool
	closed bool
	links  map[*link]struct{}
}

// link is one proxied connection: the client's side and the target's side.
type link struct {
	client, server net.Conn
	done           chan struct{} // closed by close
	once           sync.Once
}

// close closes both sides once; it is safe to call more than once.
func (l *link) close() {
	l.once.Do(func() {
		close(l.done)
		_ = l.client.Close()
		_ = l.server.Close()
	})
}

// chunk is a piece of the stream and the time it is due at the other side.
type chunk struct {
	data []byte
	due  time.Time
}

// New starts a proxy to target ("host:port") on a free 127.0.0.1 port.
// Connections are accepted at once; each dials target when it is accepted.
// t.Cleanup stops the proxy, closes every connection and waits for its
// goroutines.
func New(t testing.TB, target string) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("netproxy: proxy to %s: listen: %v", target, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	p := &Proxy{
		t:      t,
		target: target,
		ln:     ln,
		ctx:    ctx,
		cancel: cancel,
		links:  make(map[*link]struct{}),
	}
	p.wg.Go(p.acceptLoop)
	t.Cleanup(p.stop)
	return p
}

// Addr returns the proxy's "127.0.0.1:port"; connect here instead of to the
// target.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Target returns the address the proxy forwards to.
func (p *Proxy) Target() string { return p.target }

// SetDelay makes every chunk of data, in both directions, arrive d after the
// proxy received it (0, the default, forwards at once). A request and its
// reply are thus delayed by at least 2*d. Delays do not add up along a
// stream: a chunk received at time r is delivered at r+d (or right after the
// chunk before it, if that is later), and order within a connection is kept.
// The new delay applies to chunks received from now on.
func (p *Proxy) SetDelay(d time.Duration) {
	p.delay.Store(int64(max(d, 0)))
}

// Blackhole, while on, makes the proxy swallow all traffic: connections
// (existing and new) stay open, but every byte received from either side is
// dropped, including data still waiting out a delay. Requests then time
// out, as behind a firewall that drops packets. Dropped bytes are lost for
// good, so a connection used during the blackhole may be out of step
// afterwards; clients that close a connection on timeout (go-redis does)
// recover by reconnecting. (A new connection whose target is down is still
// closed at once, as the proxy dials the target on accept.) Blackhole(false)
// or Heal turns it off.
func (p *Proxy) Blackhole(on bool) {
	p.blackhole.Store(on)
}

// DropReplies, while on, makes the proxy swallow what the target sends
// (its replies) while it still forwards what clients send: requests reach
// the server and take effect, but their answers are lost, as when a link
// fails after the request went out. Dropped bytes are lost for good (see
// Blackhole). DropReplies(false) or Heal turns it off.
func (p *Proxy) DropReplies(on bool) {
	p.noReplies.Store(on)
}

// RewriteReplies makes the proxy replace every occurrence of from by to in
// the bytes the target sends (its replies), from now on, as a proxy or a
// Redis-compatible server that answers differently would: for example
// RewriteReplies("run_id:", "run_no:") hides the server's run_id from INFO.
// from and to must have the same length, so that RESP lengths stay right;
// from must not contain '\r' or '\n' (a match split between two reads is
// still found, since a reply never ends inside from).
func (p *Proxy) RewriteReplies(from, to string) {
	if len(from) != len(to) || from == "" || strings.ContainsAny(from, "\r\n") {
		p.t.Fatalf("netproxy: RewriteReplies(%q, %q): need two non-empty strings of the same length without CR/LF", from, to)
	}
	p.rewrite.Store(&[2][]byte{[]byte(from), []byte(to)})
}

// Cut closes every current connection through the proxy (both sides) and,
// until Heal, closes new connections as soon as they are accepted, so
// clients see their connections fail fast (EOF or connection reset).
func (p *Proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = true
	for l := range p.links {
		l.close()
	}
}

// Heal ends a Cut, a Blackhole and DropReplies: new connections are forwarded again and
// traffic flows. The delay is kept; SetDelay(0) removes it. Connections
// closed by Cut stay closed.
func (p *Proxy) Heal() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = false
	p.blackhole.Store(false)
	p.noReplies.Store(false)
}

// stop closes the listener and every connection and waits for the proxy's
// goroutines.
func (p *Proxy) stop() {
	p.cancel()
	p.mu.Lock()
	p.closed = true
	_ = p.ln.Close()
	for l := range p.links {
		l.close()
	}
	p.mu.Unlock()
	done := make(chan struct{})
	go func() {
		p.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(proxyStopTimeout):
		p.t.Errorf("netproxy: proxy %s -> %s: goroutines still running %s after stop", p.Addr(), p.target, proxyStopTimeout)
	}
}

// acceptLoop accepts connections until the listener is closed.
func (p *Proxy) acceptLoop() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			if p.ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return
			}
			// A transient error (e.g. too many open files): back off briefly.
			select {
			case <-p.ctx.Done():
				return
			case <-time.After(10 * time.Millisecond):
			}
			continue
		}
		p.mu.Lock()
		refuse := p.cut || p.closed
		if !refuse {
			p.wg.Go(func() { p.serve(c) })
		}
		p.mu.Unlock()
		if refuse {
			_ = c.Close()
		}
	}
}

// serve connects c to the target and forwards both directions until both
// are finished or the link is closed.
func (p *Proxy) serve(c net.Conn) {
	d := net.Dialer{Timeout: proxyDialTimeout}
	s, err := d.DialContext(p.ctx, "tcp", p.target)
	if err != nil {
		// The target is down: the client sees its connection closed, as it
		// would see a refused connection without the proxy.
		_ = c.Close()
		return
	}
	l := &link{client: c, server: s, done: make(chan struct{})}
	p.mu.Lock()
	if p.cut || p.closed {
		p.mu.Unlock()
		l.close()
		return
	}
	p.links[l] = struct{}{}
	p.mu.Unlock()

	var wg sync.WaitGroup
	wg.Go(func() { p.pipe(l, c, s, false) })
	wg.Go(func() { p.pipe(l, s, c, true) })
	wg.Wait()
	l.close()
	p.mu.Lock()
	delete(p.links, l)
	p.mu.Unlock()
}

// dropping reports whether data of the direction replies marks is being
// swallowed now (Blackhole, DropReplies).
func (p *Proxy) dropping(replies bool) bool {
	return p.blackhole.Load() || replies && p.noReplies.Load()
}

// pipe forwards src to dst: a reader stamps each chunk with its due time,
// a writer delivers it then. When src ends cleanly, dst's write side is
// shut once everything before was delivered; on any error the whole link
// is closed. replies marks the target-to-client direction (RewriteReplies).
func (p *Proxy) pipe(l *link, src, dst net.Conn, replies bool) {
	q := make(chan chunk, queueLen)
	var readErr error // written before close(q), read after
	var wg sync.WaitGroup
	wg.Go(func() {
		defer close(q)
		var carry []byte // the end of the last read that may begin a match
		for {
			buf := make([]byte, chunkSize)
			n, err := src.Read(buf)
			data := buf[:n]
			if rw := p.rewrite.Load(); replies && rw != nil {
				data, carry = rewrite(append(carry, data...), rw[0], rw[1], err != nil)
			}
			if len(data) > 0 && !p.dropping(replies) {
				ch := chunk{data: data, due: time.Now().Add(time.Duration(p.delay.Load()))}
				select {
				case q <- ch:
				case <-l.done:
					readErr = net.ErrClosed
					return
				}
			}
			if err != nil {
				readErr = err
				return
			}
		}
	})
	defer wg.Wait()

	timer := time.NewTimer(0)
	defer timer.Stop()
	for ch := range q {
		if wait := time.Until(ch.due); wait > 0 {
			timer.Reset(wait)
			select {
			case <-timer.C:
			case <-l.done:
				return // the reader ends too: src is closed
			}
		}
		if p.dropping(replies) {
			continue
		}
		if _, err := dst.Write(ch.data); err != nil {
			l.close()
			return
		}
	}
	if !errors.Is(readErr, io.EOF) {
		l.close()
		return
	}
	if cw, ok := dst.(interface{ CloseWrite() error }); ok {
		if cw.CloseWrite() == nil {
			return
		}
	}
	l.close()
}

// rewrite replaces every from in data by to (same length) and returns the
// part that can be sent and the end held back because it may begin a match
// that the next read completes (nothing is held back at the end of the
// stream).
func rewrite(data, from, to []byte, last bool) (send, carry []byte) {
	for i := 0; ; {
		j := bytes.Index(data[i:], from)
		if j < 0 {
			break
		}
		copy(data[i+j:], to)
		i += j + len(from)
	}
	if last {
		return data, nil
	}
	for k := min(len(from)-1, len(data)); k > 0; k-- {
		if bytes.HasPrefix(from, data[len(data)-k:]) {
			return data[:len(data)-k], bytes.Clone(data[len(data)-k:])
		}
	}
	return data, nil
}

// Group is one proxy per target, faulted together: a client whose every
// connection goes through a Group of its own meets the fault on every
// server, while other clients talk to the servers directly.
type Group []*Proxy

// NewGroup starts a proxy to each of targets ("host:port"), in order.
func NewGroup(t testing.TB, targets ...string) Group {
	g := make(Group, len(targets))
	for i, target := range targets {
		g[i] = New(t, target)
	}
	return g
}

// Rewrite returns addrs (URLs, DSNs, endpoints) with the address of
// target i in addrs[i] replaced by its proxy's.
func (g Group) Rewrite(addrs ...string) []string {
	out := make([]string, len(addrs))
	for i, a := range addrs {
		out[i] = strings.Replace(a, g[i].target, g[i].Addr(), 1)
	}
	return out
}

// DropReplies turns DropReplies on or off on every proxy of the group.
func (g Group) DropReplies(on bool) {
	for _, p := range g {
		p.DropReplies(on)
	}
}

// Cut cuts every proxy of the group (see Proxy.Cut).
func (g Group) Cut() {
	for _, p := range g {
		p.Cut()
	}
}
