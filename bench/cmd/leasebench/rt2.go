package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net"
	"time"

	"github.com/leasecron/leasecron/bench/internal/stats"
)

// kindRT2 is the floor of Acquire+Release on one node for a client that
// sends each caller's requests on their own: two round trips in a row
// (PING, then PING) on a bare TCP connection per worker, no client
// library, no script. A lock that needs an answer before it can be
// released cannot take fewer round trips. At c=1 that bounds every
// client; with many callers a client that pipelines several callers'
// requests into one round (lease's lanes) is not bounded by it.
const kindRT2 = "rt2"

// runRT2 measures kindRT2 at c.conc workers, each on its own connection
// to the first node.
func (b *bench) runRT2(ctx context.Context, c kase, addrs []string) (stats.Run, error) {
	conns := make([]net.Conn, c.conc)
	defer func() {
		for _, cn := range conns {
			if cn != nil {
				_ = cn.Close()
			}
		}
	}()
	for i := range conns {
		cn, err := (&net.Dialer{Timeout: opTimeout}).DialContext(ctx, "tcp", addrs[0])
		if err != nil {
			return stats.Run{}, fmt.Errorf("dial %s: %w", addrs[0], err)
		}
		conns[i] = cn
	}
	win := b.newWindow()
	ws := parallel(c.conc, func(i int, w *worker) {
		cn := conns[i]
		rd := bufio.NewReader(cn)
		ping := []byte("PING\r\n")
		rt := func() error {
			if _, err := cn.Write(ping); err != nil {
				return err
			}
			line, err := rd.ReadSlice('\n')
			if err != nil {
				return err
			}
			if !bytes.Equal(line, []byte("+PONG\r\n")) {
				return fmt.Errorf("PING answered %q", line)
			}
			return nil
		}
		for {
			t0 := time.Now()
			if !t0.Before(win.end) || ctx.Err() != nil {
				return
			}
			_ = cn.SetDeadline(t0.Add(opTimeout))
			err := rt()
			if err == nil {
				err = rt()
			}
			if err != nil {
				w.fail(err)
				return // the connection is out of step; the case fails
			}
			if !t0.Before(win.start) {
				w.lat = append(w.lat, time.Since(t0))
			}
		}
	})
	if err := firstErr(ws); err != nil {
		return stats.Run{}, err
	}
	return merge(win, ws), nil
}
