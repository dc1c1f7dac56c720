package proctest

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"time"
)

// Start slots. `go test ./...` runs several test binaries at once, and
// each may start servers in parallel tests: a dozen JVMs (a ZooKeeper
// server costs about a second of CPU to boot) starting together on a
// 2-core machine push its load past 20 for seconds, and the tests running
// meanwhile miss their timing bounds. A start slot is a lock file
// (flock) in the temporary directory, one per CPU, shared by every test
// process of the machine: a kit holds one while a server boots, so that
// at most one boot per CPU runs at a time. The kernel frees the lock of a
// process that dies.

// slotWaitMax bounds how long StartSlot waits for a slot; past it the
// caller goes on without one (a slow start beats a deadlock).
const slotWaitMax = 2 * time.Minute

// StartSlot waits until this process holds one of the machine's start
// slots (one per CPU) and returns the function that frees it. Hold it
// while a server boots — until it listens, not until a quorum formed,
// which needs other servers that may wait for a slot themselves. After
// slotWaitMax without a slot it returns a no-op function.
func StartSlot() (release func()) {
	dir := filepath.Join(os.TempDir(), "leasecron-testkit-start-slots")
	if err := os.MkdirAll(dir, 0o777); err != nil {
		return func() {}
	}
	n := runtime.NumCPU()
	for end := time.Now().Add(slotWaitMax); time.Now().Before(end); {
		for i := range n {
			if f := tryLock(filepath.Join(dir, fmt.Sprintf("slot-%d", i))); f != nil {
				return func() { _ = f.Close() } // closing drops the lock
			}
		}
		time.Sleep(10*time.Millisecond + rand.N(20*time.Millisecond))
	}
	return func() {}
}
