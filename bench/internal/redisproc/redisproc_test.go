package redisproc

import (
	"context"
	"os/exec"
	"syscall"
	"testing"
)

func TestStartStop(t *testing.T) {
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Fatalf("redis-server not found in PATH: install it (apt-get install -y redis-server) to run these tests: %v", err)
	}
	s, err := Start(context.Background(), "redis-server")
	if err != nil {
		t.Fatal(err)
	}
	if err := ping(s.Addr); err != nil {
		t.Fatalf("ping: %v", err)
	}
	pid := s.PID()
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := s.Stop(); err != nil {
		t.Fatalf("second Stop: %v", err)
	}
	if err := syscall.Kill(pid, 0); err == nil {
		t.Errorf("process %d still exists", pid)
	}
}
