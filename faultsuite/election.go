package faultsuite

import (
	"fmt"
	"slices"
	"time"
)

// A ZooKeeper ensemble serves no write from the moment it loses its
// leader (killed, frozen past syncLimit × tickTime, restarted) until the
// others have elected another, although a quorum of its servers runs.
// How long that takes depends on the machine's load, so the nemesis
// measures it: it notes the leader before a fault on the servers and,
// when the fault takes it, polls the ensemble in the background until a
// server answers as leader again (Fault.Unserved; the liveness oracle's
// exemption). etcd takes writes again as soon as it has a leader, and
// its leases survive a leader change, but longer than they would have
// lived: promotions.go.

// electionBound is the longest the nemesis waits for a leader after a
// fault took it: an ensemble without one for that long is broken, and
// the ticks it missed are reported.
const electionBound = 20 * time.Second

// electionWatch polls for a leader after a fault took it; wait returns
// when one answered or the bound passed.
type electionWatch struct {
	done chan struct{}
	at   time.Time // when a server answered as leader; zero if none did
}

// leaderIn reports whether the store is a ZooKeeper ensemble whose
// leader is one of nodes. Asked just before the fault; a moment without a
// leader (a previous fault's election) is asked again for up to a second,
// and an ensemble still without one is noted in ft.Target.
func (n *Nemesis) leaderIn(nodes []int, ft *Fault) bool {
	if st := n.f.Store; st == nil || st.Backend != "zookeeper" {
		return false
	}
	l := n.leader()
	if l < 0 {
		ft.Target += "; leader unknown"
	}
	return l >= 0 && slices.Contains(nodes, l)
}

// leader returns the index of the store's leader, asking again for up to
// a second while none answers (a previous fault's election), or -1 (also
// for a store without one).
func (n *Nemesis) leader() int {
	st := n.f.Store
	if st == nil || st.Leader == nil {
		return -1
	}
	for end := time.Now().Add(time.Second); ; time.Sleep(100 * time.Millisecond) {
		if l := st.Leader(); l >= 0 || time.Now().After(end) {
			return l
		}
	}
}

// watchElection starts polling for a leader when lost (the fault, just
// applied, took it); otherwise it returns nil. Paused servers are not
// asked.
func (n *Nemesis) watchElection(lost bool) *electionWatch {
	if !lost {
		return nil
	}
	w := &electionWatch{done: make(chan struct{})}
	go func() {
		defer close(w.done)
		for end := time.Now().Add(electionBound); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
			if n.f.Store.Leader() >= 0 {
				w.at = time.Now()
				return
			}
		}
	}()
	return w
}

// wait waits for the poll and records its answer in ft (nothing for a nil
// watch).
func (w *electionWatch) wait(ft *Fault) {
	if w == nil {
		return
	}
	<-w.done
	ft.Unserved = w.at
	if w.at.IsZero() {
		ft.Target += fmt.Sprintf("; the leader lost, no leader within %s", electionBound)
		return
	}
	ft.Target += fmt.Sprintf("; the leader lost, a leader again after %s", w.at.Sub(ft.Start).Round(time.Millisecond))
}
