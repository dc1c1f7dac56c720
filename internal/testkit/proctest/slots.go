package proctest

import (
	"errors"
	"fmt"
	"log"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"time"
)

// Start slots. `go test ./...` runs several test binaries at once, and
// each may start servers in parallel tests: a dozen JVMs (ZooKeeper
// servers) booting together on a 2-core machine push its load past 20
// for seconds, and the tests running meanwhile miss their timing bounds.
// A start slot is a lock file (flock) in the temporary directory, one
// per CPU the Go runtime may use (GOMAXPROCS, which follows a container's
// CPU quota), shared by every test process of the machine: a kit holds
// one while a server boots, so that boots queue instead of piling up. The
// kernel frees the lock of a process that dies.

// slotWaitMax bounds how long StartSlot waits for a slot; past it the
// caller goes on without one (a slow start beats a deadlock).
const slotWaitMax = 2 * time.Minute

// errSlotBusy is tryLock's answer for a slot another holder has.
var errSlotBusy = errors.New("slot busy")

// StartSlot waits until this process holds one of the machine's start
// slots and returns the function that frees it. Hold it while a server
// boots — not until a quorum formed, which needs other servers that may
// wait for a slot themselves. Without a slot after slotWaitMax, or when
// the lock files cannot be opened (made by another user, say), it says
// so on the log and returns a no-op function.
func StartSlot() (release func()) {
	dir := filepath.Join(os.TempDir(), "leasecron-testkit-start-slots")
	return startSlot(dir, runtime.GOMAXPROCS(0), slotWaitMax)
}

// startSlot is StartSlot on n lock files in dir, waiting up to waitMax.
func startSlot(dir string, n int, waitMax time.Duration) (release func()) {
	if err := os.MkdirAll(dir, 0o777); err != nil {
		log.Printf("proctest: no start slots (%v); starting at once", err)
		return func() {}
	}
	_ = os.Chmod(dir, 0o777|os.ModeSticky) // for every user's test runs
	for end := time.Now().Add(waitMax); time.Now().Before(end); {
		for i := range n {
			f, err := tryLock(filepath.Join(dir, fmt.Sprintf("slot-%d", i)))
			if err == nil {
				return func() { _ = f.Close() } // closing drops the lock
			}
			if !errors.Is(err, errSlotBusy) {
				log.Printf("proctest: no start slots (%v); starting at once", err)
				return func() {}
			}
		}
		time.Sleep(10*time.Millisecond + rand.N(20*time.Millisecond))
	}
	log.Printf("proctest: no start slot free after %s; starting at once", waitMax)
	return func() {}
}
