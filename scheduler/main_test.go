package scheduler

import (
	"os"
	"strings"
	"testing"

	"github.com/leasecron/leasecron/internal/supervisor"
)

// TestMain makes the test binary its own supervisor (os.Args[1] ==
// supervisor.Arg), as the leasecron binary is: tests that run a job give
// os.Executable() as Options.Self (see selfSupervisor).
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == supervisor.Arg {
		os.Exit(supervisor.Main(os.Args[2:]))
	}
	// Under -race, a Go program exiting with 0 sleeps 1s first (the race
	// runtime's atexit_sleep_ms); spare the supervisors, which are this
	// binary, that second.
	if g := os.Getenv("GORACE"); !strings.Contains(g, "atexit_sleep_ms") {
		os.Setenv("GORACE", strings.TrimSpace(g+" atexit_sleep_ms=0"))
	}
	os.Exit(m.Run())
}

// selfSupervisor is the path of this test binary, for Options.Self.
func selfSupervisor(t *testing.T) string {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return self
}
