package scheduler

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/leasecron/leasecron/internal/supervisor"
	"github.com/leasecron/leasecron/internal/testkit/proctest"
	"github.com/leasecron/leasecron/internal/testkit/redistest"
)

// TestStopReachesFrozenSupervisor: a job (sleep 60) times out while its
// supervisor is stopped (SIGSTOP) with its control pipe full, so the
// request to stop it (Terminate) times out, and so does the next one.
// Once the supervisor runs again (SIGCONT) the stop is asked again and
// reaches it: the job is stopped (SIGTERM) within about terminateRetry,
// long before its lease's max lifetime (timeout + kill_grace + 1s) or its
// own end, and the run is recorded, and counted in
// leasecron_job_aborts_total, as a timeout. A stop not asked again would
// leave the job running until its lease's deadline, a run recorded
// aborted (the lease ran out while the job was being stopped).
func TestStopReachesFrozenSupervisor(t *testing.T) {
	t.Parallel()
	s, j, logs, reg := frozenStopScheduler(t)
	done := make(chan triggered, 1)
	go func() {
		rec, err := s.Trigger(context.Background(), j.Name)
		done <- triggered{rec, err}
	}()
	rs := runningState(t, s, j.Name, done)
	sup := rs.proc.SupervisorPID()
	resumed, ended := false, false
	defer func() {
		// Whatever failed, the supervisor (stopped: it cannot have
		// exited) runs again, and a run the stop never reached ends
		// (its control pipe closed) instead of outliving the test.
		if !resumed {
			_ = syscall.Kill(sup, syscall.SIGCONT)
		}
		if !ended {
			endRun(t, rs, done)
		}
	}()

	freezeWithFullPipe(t, logs, rs, j)
	if !logs.waitFor("could not ask the supervisor to stop the job", 1, j.Timeout+10*time.Second) {
		t.Fatalf("no failed request to stop the job %s after its start: the freeze did not hold the stop up; log:\n%s", time.Since(rs.started), logs.String())
	}
	// The request is asked again after terminateRetry, and fails too.
	if !logs.waitFor("could not ask the supervisor to stop the job", 2, terminateRetry+5*time.Second) {
		t.Fatalf("the request to stop the job was not asked again %s after the first failed; log:\n%s", terminateRetry+5*time.Second, logs.String())
	}
	if err := syscall.Kill(sup, syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	resumed = true
	contAt := time.Now()

	var got triggered
	select {
	case got = <-done:
		ended = true
	case <-time.After(30 * time.Second):
		t.Fatalf("the run has not ended 30s after the supervisor was resumed")
	}
	rec := got.rec
	t.Logf("run: result %s signal %s, ended %s after the resume, %s after its start",
		rec.Result, rec.Signal, rec.End.Sub(contAt).Round(time.Millisecond), rec.Duration().Round(time.Millisecond))
	if got.err != nil {
		t.Fatalf("Trigger: %v", got.err)
	}
	if rec.Result != "timeout" || rec.Signal != "SIGTERM" {
		t.Errorf("run recorded %s (signal %q); want timeout, stopped by SIGTERM", rec.Result, rec.Signal)
	}
	// The next request after the resume stops the job: at most
	// terminateRetry, plus the job's end being reported.
	if after := rec.End.Sub(contAt); after > terminateRetry+2*time.Second {
		t.Errorf("the job ended %s after its supervisor was resumed; want within %s", after.Round(time.Millisecond), terminateRetry+2*time.Second)
	}
	aborts := gather(t, reg)["leasecron_job_aborts_total"]
	if len(aborts) != 1 || aborts["job=frozen,reason=timeout"] != 1 {
		t.Errorf("leasecron_job_aborts_total %v; want the one timeout", aborts)
	}
}

// triggered is what Scheduler.Trigger returned.
type triggered struct {
	rec RunRecord
	err error
}

// frozenStopScheduler returns a scheduler on one Redis node with the job
// of TestStopReachesFrozenSupervisor (sleep 60 with a 3s timeout), the
// buffer of its debug log and the registry of its metrics.
func frozenStopScheduler(t *testing.T) (*Scheduler, *Job, *logBuffer, *prometheus.Registry) {
	t.Helper()
	cluster := redistest.Start(t, 1)
	j := &Job{Name: "frozen", Schedule: "@hourly", Command: []string{"sleep", "60"}, Timeout: 3 * time.Second, Deadline: time.Minute}
	cfg := tickConfig(t, cluster.URLs(), j)
	// A grace the timing rule allows with a 15s TTL and long enough that
	// the lease's max lifetime (12s) outlasts the freeze (till about 5s)
	// and a retry by seconds on a loaded machine.
	j.KillGrace = 8 * time.Second
	be := votingBackend(t, cfg, 15*time.Second, 300*time.Millisecond)
	logs := &logBuffer{}
	reg := prometheus.NewRegistry()
	s, err := New(cfg, Options{Self: selfSupervisor(t), Backend: be, Metrics: NewMetrics(reg),
		Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s, j, logs, reg
}

// freezeWithFullPipe stops (SIGSTOP) the supervisor of rs just after a
// renewal has extended it, so that the next one does not write between
// the freeze and the filling, and fills its control pipe (fillControlPipe).
func freezeWithFullPipe(t *testing.T, logs *logBuffer, rs *runState, j *Job) {
	t.Helper()
	renewals := logs.count(`msg="lease renewed"`)
	if !logs.waitFor(`msg="lease renewed"`, renewals+1, 5*time.Second) {
		t.Fatalf("no renewal within 5s of the run's start")
	}
	time.Sleep(20 * time.Millisecond)
	sup := rs.proc.SupervisorPID()
	if err := syscall.Kill(sup, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	if err := proctest.WaitStopped(sup, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	fillControlPipe(t, rs, len(fmt.Sprintf("term %d\n", int64(j.KillGrace))))
}

// endRun closes the control pipe of rs's supervisor, which then kills
// the job, and waits (up to 30s) for the run to be reported on done.
func endRun(t *testing.T, rs *runState, done <-chan triggered) {
	t.Helper()
	_ = rs.proc.Close()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Errorf("the run has not ended 30s after its supervisor's pipe was closed")
	}
}

// fillControlPipe fills the control pipe of rs's supervisor, which is
// stopped: a stopped reader alone does not fail a write, a full pipe
// does (after a timeout), as it does for a supervisor stopped or slow
// long enough. The lines are deadlines far ahead (a renewal after the
// resume writes the lease's own again), so that only the request to stop
// can stop the job in time, and of a length that leaves no room for a
// request of termLen bytes (fillerDeadline).
func fillControlPipe(t *testing.T, rs *runState, termLen int) {
	t.Helper()
	far := fillerDeadline(t, supervisor.BootDeadline(rs.started.Add(time.Hour)), termLen)
	for n := 0; ; n++ {
		err := rs.proc.Extend(far)
		if err == nil && n < 1<<20 {
			continue
		}
		if !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("filling the stopped supervisor's control pipe: %v after %d lines; want a write timeout", err, n)
		}
		t.Logf("control pipe full after %d lines, %s into the run", n, time.Since(rs.started).Round(time.Millisecond))
		return
	}
}

// runningState waits until s runs job and returns its state; it fails
// the test if the run ends first (done) or does not start within 30s.
func runningState[T any](t *testing.T, s *Scheduler, job string, done <-chan T) *runState {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		s.mu.Lock()
		rs := s.running[job]
		s.mu.Unlock()
		if rs != nil {
			return rs
		}
		select {
		case d := <-done:
			t.Fatalf("the run of %s ended before it was seen running: %+v", job, d)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s not running after 30s", job)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// fillerDeadline returns a deadline at or after far whose control line
// ("deadline N\n"), written into a pipe until it is full, leaves no room
// for a line of termLen bytes either. A pipe's buffer is pages, and a
// write under PIPE_BUF goes whole into the room left in the last page or
// into a new page: what decides is the room a page keeps after lines of
// the filler's length, so the deadline is taken with more digits (later)
// until a pipe of the test's own, filled with its line, refuses termLen
// bytes.
func fillerDeadline(t *testing.T, far int64, termLen int) int64 {
	t.Helper()
	for v := far; v > 0; v = nextPow10(v) {
		if fullRefuses(t, fmt.Appendf(nil, "deadline %d\n", v), termLen) {
			return v
		}
	}
	t.Fatalf("no deadline line of any length fills a pipe against %d bytes", termLen)
	return 0
}

// nextPow10 is the smallest power of ten above v (negative past int64).
func nextPow10(v int64) int64 {
	p := int64(1)
	for p <= v {
		if p > math.MaxInt64/10 {
			return -1
		}
		p *= 10
	}
	return p
}

// fullRefuses reports whether a pipe without a reader, filled with line
// until a write times out, then refuses n bytes too.
func fullRefuses(t *testing.T, line []byte, n int) bool {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	write := func(b []byte) error {
		if err := w.SetWriteDeadline(time.Now().Add(20 * time.Millisecond)); err != nil {
			t.Fatal(err)
		}
		_, err := w.Write(b)
		return err
	}
	for err := write(line); err == nil; err = write(line) {
	}
	return errors.Is(write(make([]byte, n)), os.ErrDeadlineExceeded)
}
