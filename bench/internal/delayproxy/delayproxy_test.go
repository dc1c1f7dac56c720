package delayproxy

import (
	"bufio"
	"net"
	"strconv"
	"testing"
	"time"
)

// echo starts a line echo server and returns its address.
func echo(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				r := bufio.NewReader(c)
				for {
					line, err := r.ReadString('\n')
					if err != nil {
						return
					}
					if _, err := c.Write([]byte(line)); err != nil {
						return
					}
				}
			}()
		}
	}()
	return ln.Addr().String()
}

func TestDelayAndOrder(t *testing.T) {
	p, err := New(echo(t))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	r := bufio.NewReader(c)

	roundTrip := func(msg string) time.Duration {
		t.Helper()
		t0 := time.Now()
		if _, err := c.Write([]byte(msg + "\n")); err != nil {
			t.Fatal(err)
		}
		got, err := r.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		if got != msg+"\n" {
			t.Fatalf("got %q, want %q", got, msg)
		}
		return time.Since(t0)
	}
	roundTrip("warm")
	const d = 30 * time.Millisecond
	p.SetDelay(d)
	p.CountBursts(d / 2)
	if rtt := roundTrip("slow"); rtt < d {
		t.Errorf("round trip %v through a %v proxy", rtt, d)
	}
	// Many writes in a row arrive complete and in order.
	for i := 0; i < 50; i++ {
		if _, err := c.Write([]byte(strconv.Itoa(i) + "\n")); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < 50; i++ {
		got, err := r.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		if got != strconv.Itoa(i)+"\n" {
			t.Fatalf("line %d: got %q", i, got)
		}
	}
	if n := p.Bursts(); n != 2 {
		t.Errorf("Bursts = %d, want 2 (one round trip, then one pipelined burst)", n)
	}
}
