package proctest

import (
	"os"
	"strings"
)

// SpareRaceExitSleep sets atexit_sleep_ms=0 in GORACE unless the
// environment already sets it. Under -race a Go program that exits with
// status 0 first sleeps a second (the race runtime's atexit_sleep_ms),
// and so does every process a test starts from its own binary: the job
// supervisors, a CLI or a helper daemon. A race found in such a process
// is still reported (the report is written when the race is seen, not at
// exit). Call it from TestMain before the tests run; `make test` sets the
// same in the environment, for the test binaries themselves.
func SpareRaceExitSleep() {
	if g := os.Getenv("GORACE"); !strings.Contains(g, "atexit_sleep_ms") {
		os.Setenv("GORACE", strings.TrimSpace(g+" atexit_sleep_ms=0"))
	}
}
