package zktest

import (
	"net"
	"sync"
	"time"

	"github.com/leasecron/leasecron/internal/testkit/proctest"
)

// spawnInSlot spawns s holding one of the machine's start slots
// (proctest.StartSlot) while its JVM boots: until its client port
// listens — before it looks for a quorum — it exits, or startTimeout
// passes. booting tracks the goroutine that frees the slot.
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
		s.waitListening(startTimeout)
	}()
	return nil
}

// waitListening waits until the server's client port accepts a
// connection, the process exits, or within passes.
func (s *Server) waitListening(within time.Duration) {
	for end := time.Now().Add(within); time.Now().Before(end); {
		if c, err := net.DialTimeout("tcp", s.Addr(), 200*time.Millisecond); err == nil {
			_ = c.Close()
			return
		}
		select {
		case <-s.exited():
			return
		case <-time.After(50 * time.Millisecond):
		}
	}
}
