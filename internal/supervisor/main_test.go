//go:build linux

package supervisor

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/leasecron/leasecron/internal/testkit/proctest"
)

// TestMain makes the test binary its own supervisor (os.Args[1] == Arg) and
// its own helper daemon (LEASECRON_TEST_DAEMON=1, see daemon_test.go), and
// checks for leaked goroutines after the tests.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == Arg {
		os.Exit(mainWith(os.Args[2:], testSuperviseOpts()))
	}
	if os.Getenv(helperEnv) == "1" {
		os.Exit(helperDaemon())
	}
	proctest.SpareRaceExitSleep() // the supervisors and helper daemons are this binary
	// Orphans of the tests (a killed helper daemon's supervisor, a killed
	// supervisor's job) become this process's children, so waitDead can
	// reap them instead of leaving zombies to an init that may not reap.
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		fmt.Fprintln(os.Stderr, "set child subreaper:", err)
		os.Exit(1)
	}
	code := m.Run()
	if code == 0 {
		if err := checkGoroutines(5 * time.Second); err != nil {
			fmt.Fprintln(os.Stderr, err)
			code = 1
		}
	}
	os.Exit(code)
}

// checkGoroutines waits up to timeout for every goroutine of this package
// to end.
func checkGoroutines(timeout time.Duration) error {
	end := time.Now().Add(timeout)
	for {
		buf := make([]byte, 1<<20)
		stacks := string(buf[:runtime.Stack(buf, true)])
		var leaked []string
		for _, g := range strings.Split(stacks, "\n\n") {
			if strings.Contains(g, "internal/supervisor.(*") && !strings.Contains(g, "TestMain") {
				leaked = append(leaked, g)
			}
		}
		if len(leaked) == 0 {
			return nil
		}
		if time.Now().After(end) {
			return fmt.Errorf("leaked goroutines:\n%s", strings.Join(leaked, "\n\n"))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// testSelf returns the test binary, which is also the supervisor.
func testSelf(t *testing.T) string {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return self
}

// output collects a job's stdout (line by line) and stderr.
type output struct {
	lines     chan string // stdout lines, closed at EOF
	stderr    chan string // whole stderr, sent at EOF
	stdoutAll []string
}

func collect(p *Process) *output {
	o := &output{lines: make(chan string, 1000), stderr: make(chan string, 1)}
	go func() {
		defer close(o.lines)
		sc := bufio.NewScanner(p.Stdout())
		for sc.Scan() {
			o.lines <- sc.Text()
		}
	}()
	go func() {
		b, _ := io.ReadAll(p.Stderr())
		o.stderr <- string(b)
	}()
	return o
}

// next returns the next stdout line, failing after timeout.
func (o *output) next(t *testing.T, timeout time.Duration) string {
	t.Helper()
	select {
	case l, ok := <-o.lines:
		if !ok {
			t.Fatal("stdout closed, wanted a line")
		}
		return l
	case <-time.After(timeout):
		t.Fatalf("no stdout line within %v", timeout)
	}
	return ""
}

// rest returns the remaining stdout lines, waiting for EOF.
func (o *output) rest(t *testing.T, timeout time.Duration) []string {
	t.Helper()
	var lines []string
	tm := time.After(timeout)
	for {
		select {
		case l, ok := <-o.lines:
			if !ok {
				return lines
			}
			lines = append(lines, l)
		case <-tm:
			t.Fatalf("stdout not at EOF within %v (got %q)", timeout, lines)
		}
	}
}

// startShell starts /bin/sh -c script under a supervisor and makes sure it
// is gone when the test ends.
func startShell(t *testing.T, script string, grace time.Duration, deadline int64) (*Process, *output) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p, err := Start(ctx, testSelf(t), Spec{
		Path:      "/bin/sh",
		Args:      []string{"-c", script},
		KillGrace: grace,
		Deadline:  deadline,
	})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() {
		_ = p.Close()
		if _, err := p.Wait(); err != nil && !errors.Is(err, ErrSupervisorLost) {
			t.Logf("cleanup wait: %v", err)
		}
	})
	return p, collect(p)
}

// waitExit waits for p with a bound, failing the test if it does not end.
func waitExit(t *testing.T, p *Process, timeout time.Duration) (Exit, error) {
	t.Helper()
	type result struct {
		exit Exit
		err  error
	}
	ch := make(chan result, 1)
	go func() {
		e, err := p.Wait()
		ch <- result{e, err}
	}()
	select {
	case r := <-ch:
		return r.exit, r.err
	case <-time.After(timeout):
		t.Fatalf("job did not end within %v", timeout)
	}
	return Exit{}, nil
}
