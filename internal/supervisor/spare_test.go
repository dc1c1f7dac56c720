//go:build linux

package supervisor

import (
	"context"
	"errors"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestSpare: a supervisor prepared ahead of time runs the job it is given
// later, with the usual output, exit and deadline handling; a spec with a
// passed deadline leaves it unused; a second Start fails.
func TestSpare(t *testing.T) {
	sp, err := Prepare(testSelf(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sp.Close() })
	// Idle for a while: nothing starts on its own.
	time.Sleep(200 * time.Millisecond)
	if isDead(sp.p.SupervisorPID()) {
		t.Fatal("the spare supervisor exited while waiting")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := sp.Start(ctx, Spec{Path: "/bin/true", Deadline: BootNow() - 1}); !errors.Is(err, ErrDeadlinePassed) {
		t.Fatalf("Start with a passed deadline = %v, want ErrDeadlinePassed", err)
	}
	p, err := sp.Start(ctx, Spec{Path: "/bin/sh", Args: []string{"-c", "echo spare; exit 7"},
		KillGrace: time.Second, Deadline: BootDeadline(time.Now().Add(time.Minute))})
	if err != nil {
		t.Fatalf("Start on the spare after a refused spec: %v", err)
	}
	out := collect(p)
	if got := out.rest(t, 10*time.Second); strings.Join(got, "|") != "spare" {
		t.Errorf("stdout = %q", got)
	}
	exit, err := waitExit(t, p, 10*time.Second)
	if err != nil || exit.Code != 7 || exit.Reason != ReasonExited {
		t.Errorf("exit = %+v, %v; want code 7", exit, err)
	}
	if _, err := sp.Start(ctx, Spec{Path: "/bin/true", Deadline: BootDeadline(time.Now().Add(time.Minute))}); err == nil {
		t.Error("a second Start on one spare succeeded")
	}
}

// TestSpareDeadlineEnforced: a job started on a spare is killed at its
// deadline like any other (it ignores SIGTERM).
func TestSpareDeadlineEnforced(t *testing.T) {
	sp, err := Prepare(testSelf(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sp.Close() })
	deadline := BootDeadline(time.Now().Add(700 * time.Millisecond))
	p, err := sp.Start(context.Background(), Spec{Path: "/bin/sh", Args: []string{"-c", "trap '' TERM; sleep 30"},
		KillGrace: 200 * time.Millisecond, Deadline: deadline})
	if err != nil {
		t.Fatal(err)
	}
	exit, err := waitExit(t, p, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if exit.Reason != ReasonDeadline || exit.DeadTime == 0 || exit.DeadTime > deadline+int64(KillSlack) {
		t.Errorf("exit = %+v; want killed by the deadline %d (+%s)", exit, deadline, KillSlack)
	}
}

// TestSpareClose: closing an unused spare ends its supervisor; a spare
// whose supervisor was killed while waiting fails Start with an error that
// tells the caller to start afresh (not ErrStart or ErrDeadlinePassed).
func TestSpareClose(t *testing.T) {
	sp, err := Prepare(testSelf(t))
	if err != nil {
		t.Fatal(err)
	}
	pid := sp.p.SupervisorPID()
	if err := sp.Close(); err != nil {
		t.Fatal(err)
	}
	if !isDead(pid) {
		t.Errorf("supervisor %d still alive after Close", pid)
	}
	if err := sp.Close(); err != nil {
		t.Errorf("second Close = %v", err)
	}

	sp2, err := Prepare(testSelf(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sp2.Close() })
	if err := syscall.Kill(sp2.p.SupervisorPID(), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-sp2.p.statusDone
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err = sp2.Start(ctx, Spec{Path: "/bin/true", Deadline: BootDeadline(time.Now().Add(time.Minute))})
	if err == nil || errors.Is(err, ErrStart) || errors.Is(err, ErrDeadlinePassed) {
		t.Errorf("Start on a killed spare = %v, want a supervisor error", err)
	}
}
