package scheduler

import (
	"os"
	"testing"

	"github.com/leasecron/leasecron/internal/supervisor"
	"github.com/leasecron/leasecron/internal/testkit/proctest"
)

// TestMain makes the test binary its own supervisor (os.Args[1] ==
// supervisor.Arg), as the leasecron binary is: tests that run a job give
// os.Executable() as Options.Self (see selfSupervisor).
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == supervisor.Arg {
		os.Exit(supervisor.Main(os.Args[2:]))
	}
	proctest.SpareRaceExitSleep() // the supervisors are this binary
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
