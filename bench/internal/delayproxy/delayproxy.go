// Package delayproxy is a loopback TCP proxy that makes one Redis node slow:
// every chunk a client sends is delivered to the server at its receive time
// plus a delay, in order. Replies flow back undelayed, so each round trip
// through the proxy takes the delay longer. It is like toxiproxy's latency
// toxic, without jitter, in a few dozen lines.
package delayproxy

import (
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// Proxy forwards connections from Addr to a target address.
type Proxy struct {
	ln     net.Listener
	target string
	delay  atomic.Int64

	burstMu  sync.Mutex
	burstGap time.Duration // 0: not counting
	lastRecv time.Time
	bursts   int

	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool
	wg     sync.WaitGroup
}

// New listens on a free 127.0.0.1 port and forwards to target. The delay
// starts at 0.
func New(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("delayproxy: listen: %w", err)
	}
	p := &Proxy{ln: ln, target: target, conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Addr is the address clients connect to.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// SetDelay sets the delay added to chunks received from now on.
func (p *Proxy) SetDelay(d time.Duration) { p.delay.Store(int64(d)) }

// Delay returns the current delay.
func (p *Proxy) Delay() time.Duration { return time.Duration(p.delay.Load()) }

// CountBursts resets the burst counter and starts counting: a burst is a
// run of client→server chunks (on any connection) with less than gap
// between them. With a delay well above the time a client needs to write
// one pipeline, and gap = delay/2, every burst is one request round trip:
// the client cannot send the next round before the delayed one was
// answered.
func (p *Proxy) CountBursts(gap time.Duration) {
	p.burstMu.Lock()
	p.burstGap, p.bursts, p.lastRecv = gap, 0, time.Time{}
	p.burstMu.Unlock()
}

// Bursts returns the bursts counted since CountBursts.
func (p *Proxy) Bursts() int {
	p.burstMu.Lock()
	defer p.burstMu.Unlock()
	return p.bursts
}

func (p *Proxy) noteChunk(now time.Time) {
	p.burstMu.Lock()
	if p.burstGap > 0 {
		if p.lastRecv.IsZero() || now.Sub(p.lastRecv) >= p.burstGap {
			p.bursts++
		}
		p.lastRecv = now
	}
	p.burstMu.Unlock()
}

// Close stops listening, closes every proxied connection and waits for the
// proxy's goroutines.
func (p *Proxy) Close() error {
	err := p.ln.Close()
	p.mu.Lock()
	p.closed = true
	for c := range p.conns {
		_ = c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
	if errors.Is(err, net.ErrClosed) {
		err = nil
	}
	return err
}

func (p *Proxy) track(cs ...net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	for _, c := range cs {
		p.conns[c] = struct{}{}
	}
	return true
}

func (p *Proxy) untrack(cs ...net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range cs {
		delete(p.conns, c)
		_ = c.Close()
	}
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return
		}
		server, err := net.DialTimeout("tcp", p.target, 2*time.Second)
		if err != nil {
			_ = client.Close()
			continue
		}
		if !p.track(client, server) {
			_ = client.Close()
			_ = server.Close()
			return
		}
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			var inner sync.WaitGroup
			inner.Add(2)
			go func() { defer inner.Done(); p.delayed(server, client); p.untrack(client, server) }()
			go func() { defer inner.Done(); _, _ = io.Copy(client, server); p.untrack(client, server) }()
			inner.Wait()
		}()
	}
}

type chunk struct {
	data []byte
	due  time.Time
}

// delayed copies src to dst, delivering each chunk at its receive time plus
// the delay in force when it was received; order is preserved.
func (p *Proxy) delayed(dst io.Writer, src io.Reader) {
	ch := make(chan chunk, 4096)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		broken := false
		for c := range ch {
			if broken {
				continue // drain so the reader never blocks
			}
			if d := time.Until(c.due); d > 0 {
				time.Sleep(d)
			}
			if _, err := dst.Write(c.data); err != nil {
				broken = true
			}
		}
	}()
	for {
		buf := make([]byte, 32<<10)
		n, err := src.Read(buf)
		if n > 0 {
			now := time.Now()
			p.noteChunk(now)
			ch <- chunk{data: buf[:n], due: now.Add(p.Delay())}
		}
		if err != nil {
			break
		}
	}
	close(ch)
	wg.Wait()
}
