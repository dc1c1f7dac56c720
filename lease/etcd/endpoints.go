package etcd

import (
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/leasecron/leasecron/lease"
)

// A frozen member (SIGSTOP, a hung process, a host whose kernel still
// accepts connections) keeps its gRPC connection ready until keepalive
// gives up on it (10 s of silence, then DialKeepAliveTimeout), and the
// client's round-robin balancer sends it every third request meanwhile,
// each of which then waits its whole timeout: acquisitions and renewals
// fail over and over while the other members have a quorum. So the
// members that fail a Status probe (Health; downErrs runs one after every
// failed request) are taken out of the client's endpoints — never all of
// them — and a background loop probes them again every reprobeEvery and
// puts each back once it answers and knows a leader. The client's Dial,
// which Status uses, reads its endpoints without the client's lock, so
// SetEndpoints waits for the probes in flight (endpointSet.dial).

// reprobeEvery is how often the members taken out are probed again.
const reprobeEvery = time.Second

// endpointSet is the state of the client's endpoints: all of
// Config.Endpoints but those found down.
type endpointSet struct {
	mu      sync.Mutex
	down    map[string]bool
	probing bool // the reprobe loop runs
	// dial orders SetEndpoints after the Status probes: the client's
	// Dial, which Status uses, reads the client's endpoints without the
	// client's lock, so a SetEndpoints during a probe is a data race
	// (and a torn read of the endpoint list). Probes hold it for
	// reading, SetEndpoints for writing; a probe lasts at most one
	// request timeout.
	dial sync.RWMutex
}

// noteHealth takes the endpoints whose status failed out of the client's
// endpoints and puts back those that answered (sts: one status per
// endpoint, as Health returns them). When none answered, nothing changes:
// there is nothing better to send requests to.
func (b *Backend) noteHealth(sts []lease.ServerStatus) {
	if b.test.keepFrozen || b.closed.Load() {
		return
	}
	down := map[string]bool{}
	for _, st := range sts {
		if st.Err != nil {
			down[st.Server] = true
		}
	}
	if len(down) == len(b.cfg.Endpoints) {
		return
	}
	b.eps.mu.Lock()
	defer b.eps.mu.Unlock()
	if maps.Equal(down, b.eps.down) {
		return
	}
	b.eps.down = down
	b.applyEndpoints()
	if len(down) > 0 && !b.eps.probing {
		b.mu.Lock()
		if !b.closed.Load() {
			b.eps.probing = true
			b.probeWG.Add(1)
			go b.reprobe()
		}
		b.mu.Unlock()
	}
}

// applyEndpoints gives the client every endpoint not down (b.eps.mu held).
func (b *Backend) applyEndpoints() {
	up := slices.DeleteFunc(slices.Clone(b.cfg.Endpoints), func(ep string) bool { return b.eps.down[ep] })
	if !b.test.unorderedDial {
		b.eps.dial.Lock()
		defer b.eps.dial.Unlock()
	}
	b.c.SetEndpoints(up...)
}

// reprobe probes the endpoints taken out every reprobeEvery and puts each
// back once it answers; it ends when none is out any more, or at Close.
func (b *Backend) reprobe() {
	defer b.probeWG.Done()
	t := time.NewTicker(reprobeEvery)
	defer t.Stop()
	for {
		select {
		case <-b.bg.Done():
			return
		case <-t.C:
		}
		b.eps.mu.Lock()
		down := slices.Sorted(maps.Keys(b.eps.down))
		b.eps.mu.Unlock()
		for _, ep := range down {
			if st := b.status(b.bg, ep); st.Err == nil {
				b.eps.mu.Lock()
				delete(b.eps.down, ep)
				b.applyEndpoints()
				b.eps.mu.Unlock()
			}
		}
		b.eps.mu.Lock()
		if len(b.eps.down) == 0 {
			b.eps.probing = false
			b.eps.mu.Unlock()
			return
		}
		b.eps.mu.Unlock()
	}
}
