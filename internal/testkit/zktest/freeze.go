package zktest

import (
	"sync"
	"time"
)

// A freeze of the whole ensemble (every server SIGSTOPped) is undone
// leader last. ZooKeeper 3.8.0 — the version Debian 12 ships — stalled
// once in this suite after such a freeze: for over a minute no client
// got a session (a write), while every server reported broadcast. Its
// source shows how: the followers, whose socket timeouts ran out during
// the freeze, give their leader up on waking and join it again while it
// still leads; the leader re-sends them the proposals it had in flight,
// and reads the first acknowledgement on each new connection as the
// follower's NEWLEADER acknowledgement — which, for a leader already
// serving, is dropped. A follower's log thread may acknowledge the first
// proposal before its main thread acknowledges NEWLEADER (the race
// reported upstream as ZOOKEEPER-4685); when that happens on both
// followers with two or more proposals in flight, the first is never
// committed, and the leader commits nothing after it. A test of the
// client then fails on the store. So Resume continues the server that led
// when the freeze began only once the others run again and have elected
// another leader (a new epoch, which this race cannot stall); it then
// joins that leader as any resumed server does.

// electionWait bounds how long Resume waits for the other servers to
// elect a leader before it continues the frozen leader anyway: an
// election takes a few seconds on a loaded machine.
const electionWait = 30 * time.Second

// freezeState is what Pause and Resume know of a freeze of the whole
// ensemble.
type freezeState struct {
	mu sync.Mutex
	// leader is the server that answered as leader just before Pause
	// stopped it (nil: none, or the ensemble is standalone); whole is
	// set once every server is paused while it is; deferred is set when
	// Resume was asked for the leader before the others ran again.
	leader   *Server
	whole    bool
	deferred bool
}

// Pause stops the server with SIGSTOP and waits until it is stopped.
func (s *Server) Pause() {
	s.t.Helper()
	led := len(s.e.Servers) > 1 && !s.paused() && s.Mode() == "leader"
	s.mu.Lock()
	p := s.proc
	s.mu.Unlock()
	if p == nil || p.Exited() {
		s.t.Fatalf("zktest: pause of server %d, which is not running", s.ID)
	}
	if err := p.Pause(); err != nil {
		s.t.Fatalf("zktest: server %d: %v", s.ID, err)
	}
	f := &s.e.frozen
	f.mu.Lock()
	defer f.mu.Unlock()
	if led {
		f.leader, f.whole, f.deferred = s, false, false
	}
	if f.leader != nil && s.e.allPaused() {
		f.whole = true
	}
}

// paused reports whether Pause stopped the server and Resume has not
// continued it yet.
func (s *Server) paused() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.proc != nil && s.proc.Paused()
}

// Resume continues a paused server with SIGCONT — after a freeze of the
// whole ensemble, the server that led it last: see the top of this file.
func (s *Server) Resume() {
	s.t.Helper()
	f := &s.e.frozen
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.whole {
		if s == f.leader {
			f.leader = nil
		}
		s.cont()
		return
	}
	if s == f.leader {
		f.deferred = true
	} else {
		s.cont()
	}
	if !f.deferred || s.e.othersPaused(f.leader) {
		return
	}
	if s.e.WaitLeader(electionWait) < 0 {
		s.t.Logf("zktest: no other leader elected within %s of the freeze's end; resuming server %d, which led", electionWait, f.leader.ID)
	}
	f.leader.cont()
	f.leader, f.whole, f.deferred = nil, false, false
}

// forget drops what the freeze knows of s (it is killed).
func (s *Server) forget() {
	f := &s.e.frozen
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.leader == s {
		f.leader, f.whole, f.deferred = nil, false, false
	}
}

// cont sends the server SIGCONT.
func (s *Server) cont() {
	s.t.Helper()
	s.mu.Lock()
	p := s.proc
	s.mu.Unlock()
	if p == nil {
		return
	}
	if err := p.Resume(); err != nil {
		s.t.Fatalf("zktest: server %d: %v", s.ID, err)
	}
}

// allPaused reports whether every server is paused.
func (e *Ensemble) allPaused() bool {
	return e.countPaused() == len(e.Servers)
}

// othersPaused reports whether a server other than but is paused.
func (e *Ensemble) othersPaused(but *Server) bool {
	for _, s := range e.Servers {
		if s != but && s.paused() {
			return true
		}
	}
	return false
}

// countPaused returns how many servers are paused.
func (e *Ensemble) countPaused() int {
	n := 0
	for _, s := range e.Servers {
		if s.paused() {
			n++
		}
	}
	return n
}
