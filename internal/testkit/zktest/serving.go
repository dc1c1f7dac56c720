package zktest

import (
	"bufio"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/go-zookeeper/zk"
)

// Serving reports whether the ensemble takes writes: a server answers as
// leader (or standalone) and, with peers, has synchronised a quorum of
// them — mntr's zk_synced_followers counts the followers done with their
// first synchronisation, and a new leader serves once a quorum is (on a
// loaded machine a server answers as leader a second or more before
// that) — and a client opens a session through the servers not paused
// within probeTimeout. Opening a session is a transaction the leader
// commits with a quorum, so that holds only while the ensemble takes
// writes, unlike a server's own word: one its followers have left answers
// as leader for up to syncLimit. Paused servers are not asked. A call
// takes a few milliseconds on a serving ensemble, up to about two
// probeTimeouts on one that does not (mntr, then the session).
func (e *Ensemble) Serving() bool {
	return e.leaderSaysServing() && e.opensSession()
}

// leaderSaysServing reports whether a server not paused answers as
// leader (or standalone) and, with peers, as one that has synchronised a
// quorum of them.
func (e *Ensemble) leaderSaysServing() bool {
	i := e.Leader()
	if i < 0 {
		return false
	}
	if len(e.Servers) == 1 {
		return true
	}
	n, ok := e.Servers[i].syncedFollowers()
	return ok && n+1 > len(e.Servers)/2
}

// probeTimeout bounds Serving's session: on a loaded 2-core machine a
// quorum commit of three JVMs takes well under a second, and a client
// whose requests wait longer than this does not see a serving ensemble.
const probeTimeout = 2 * time.Second

// opensSession reports whether a client opens a session through the
// servers not paused within probeTimeout. The session is closed on a
// goroutine of its own: closing one that never opened waits a second for
// an answer that cannot come, and the caller does not wait for that.
func (e *Ensemble) opensSession() bool {
	var addrs []string
	for _, s := range e.Servers {
		if !s.paused() {
			addrs = append(addrs, s.Addr())
		}
	}
	conn, events, err := zk.Connect(addrs, probeTimeout, zk.WithLogInfo(false), zk.WithLogger(quiet{}))
	if err != nil {
		return false
	}
	defer func() { go conn.Close() }()
	timeout := time.After(probeTimeout)
	for {
		select {
		case ev := <-events:
			if ev.State == zk.StateHasSession {
				return true
			}
		case <-timeout:
			// go-zookeeper drops events its channel has no room for.
			return conn.State() == zk.StateHasSession
		}
	}
}

// quiet is a go-zookeeper logger that drops what it is given: a probe
// that fails says so by its result.
type quiet struct{}

func (quiet) Printf(string, ...any) {}

// syncedFollowers asks the server how many followers it has
// synchronised as leader; ok is false when it does not say (not a
// leader, or no answer).
func (s *Server) syncedFollowers() (n int, ok bool) {
	v, ok := s.Stat("zk_synced_followers")
	return int(v), ok
}

// Stat returns the server's figure name (four-letter word mntr: for
// instance zk_packets_received, the client requests it received, session
// pings included); ok is false when it does not say (no answer, or no
// such figure).
func (s *Server) Stat(name string) (v int64, ok bool) {
	for _, line := range s.fourLetter("mntr") {
		if f, found := strings.CutPrefix(line, name+"\t"); found {
			v, err := strconv.ParseInt(strings.TrimSpace(f), 10, 64)
			return v, err == nil
		}
	}
	return 0, false
}

// fourLetter sends the server the four-letter word w and returns the
// lines of its answer (none when it does not answer within a second).
func (s *Server) fourLetter(w string) []string {
	c, err := net.DialTimeout("tcp", s.Addr(), 500*time.Millisecond)
	if err != nil {
		return nil
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(time.Second))
	if _, err := c.Write([]byte(w)); err != nil {
		return nil
	}
	var lines []string
	sc := bufio.NewScanner(c)
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	return lines
}
