package zktest

import (
	"sync"
	"time"

	"github.com/leasecron/leasecron/internal/testkit/proctest"
)

// spawnInSlot spawns s holding one of the machine's start slots
// (proctest.StartSlot) while its JVM boots: until it answers srvr at all
// — "not currently serving" included: its database is loaded and it looks
// for a quorum, which needs no slot —, it exits, or startTimeout passes.
// booting tracks the goroutine that frees the slot. (Restarts inside a
// test take no slot: their timing is the test's.)
func (s *Server) spawnInSlot(booting *sync.WaitGroup) error {
	release := proctest.StartSlot()
	if err := s.spawn(); err != nil {
		release()
		return err
	}
	booting.Add(1)
	go func() {
		defer booting.Done()
		defer release()
		s.waitAnswering(startTimeout)
	}()
	return nil
}

// waitAnswering waits until the server answers the four-letter word
// srvr with anything, the process exits, or within passes.
func (s *Server) waitAnswering(within time.Duration) {
	for end := time.Now().Add(within); time.Now().Before(end) && !s.answers(); {
		select {
		case <-s.exited():
			return
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// answers reports whether the server replies to srvr.
func (s *Server) answers() bool { return len(s.fourLetter("srvr")) > 0 }
