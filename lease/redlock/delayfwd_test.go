package redlock_test

import (
	"errors"
	"io"
	"net"
	"sync"
	"testing"
	"time"
)

// delayFwd is a TCP forwarder to a redis-server that can hold back the
// client-to-server bytes of one chosen connection, named by the address
// the server sees it from (the forwarder's own end: CLIENT INFO's addr).
// Unlike netproxy.Proxy, it still delivers bytes it held back after the
// client closed its side, as a network would deliver packets already in
// flight; then it half-closes the server side.
type delayFwd struct {
	ln     net.Listener
	target string

	mu     sync.Mutex
	delay  map[string]time.Duration // server-side address -> hold-back
	fresh  time.Duration            // hold-back of connections accepted from now on
	all    time.Duration            // hold-back of every chunk read from now on, on any connection
	held   int                      // chunks held back by all and delivered since
	conns  []net.Conn
	closed bool
	wg     sync.WaitGroup
}

// newDelayFwd starts a forwarder to target on a free loopback port; the
// test's cleanup stops it and waits for its goroutines.
func newDelayFwd(t *testing.T, target string) *delayFwd {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	f := &delayFwd{ln: ln, target: target, delay: map[string]time.Duration{}}
	f.wg.Add(1)
	go f.accept()
	t.Cleanup(f.stop)
	return f
}

// Addr returns the forwarder's "127.0.0.1:port".
func (f *delayFwd) Addr() string { return f.ln.Addr().String() }

// DelayNew holds back each chunk the client sends on every connection
// accepted from now on by d (0: none).
func (f *delayFwd) DelayNew(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fresh = d
}

// Delay holds back each chunk the client sends on the connection the
// server sees as addr by d (from when it was read), from now on.
func (f *delayFwd) Delay(addr string, d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.delay[addr] = d
}

// HoldAll holds back each chunk read from now on, on any connection, by
// d (0: ends it; chunks read before keep their hold-back).
func (f *delayFwd) HoldAll(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.all = d
}

// Held returns how many chunks held back by HoldAll were delivered.
func (f *delayFwd) Held() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.held
}

func (f *delayFwd) holdAll() time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.all
}

func (f *delayFwd) delayOf(addr string) time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.delay[addr]
}

func (f *delayFwd) accept() {
	defer f.wg.Done()
	for {
		c, err := f.ln.Accept()
		if err != nil {
			return
		}
		s, err := net.Dial("tcp", f.target)
		if err != nil {
			_ = c.Close()
			continue
		}
		f.mu.Lock()
		if f.closed {
			f.mu.Unlock()
			_ = c.Close()
			_ = s.Close()
			return
		}
		f.conns = append(f.conns, c, s)
		if f.fresh > 0 {
			f.delay[s.LocalAddr().String()] = f.fresh
		}
		f.wg.Add(2)
		f.mu.Unlock()
		go func() {
			defer f.wg.Done()
			_, _ = io.Copy(c, s)
			_ = c.Close()
		}()
		go f.up(c, s)
	}
}

// up forwards the client's bytes to the server, holding each chunk back by
// the connection's delay, and half-closes the server side at the client's
// end of stream.
func (f *delayFwd) up(c, s net.Conn) {
	defer f.wg.Done()
	addr := s.LocalAddr().String()
	buf := make([]byte, 64<<10)
	for {
		n, err := c.Read(buf)
		if n > 0 {
			all := f.holdAll()
			if d := max(f.delayOf(addr), all); d > 0 {
				time.Sleep(d)
			}
			if _, werr := s.Write(buf[:n]); werr != nil {
				break
			}
			if all > 0 {
				f.mu.Lock()
				f.held++
				f.mu.Unlock()
			}
		}
		if err != nil {
			if !errors.Is(err, io.EOF) {
				_ = s.Close()
				return
			}
			break
		}
	}
	if tc, ok := s.(*net.TCPConn); ok {
		_ = tc.CloseWrite()
	}
}

func (f *delayFwd) stop() {
	_ = f.ln.Close()
	f.mu.Lock()
	f.closed = true
	for _, c := range f.conns {
		_ = c.Close()
	}
	f.mu.Unlock()
	f.wg.Wait()
}
