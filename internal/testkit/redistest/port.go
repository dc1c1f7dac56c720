package redistest

import (
	"testing"

	"github.com/leasecron/leasecron/internal/testkit/proctest"
)

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago. As
// with any such helper, another process may take it before the caller binds
// it; Start and StartRedisCluster retry on a new port when that happens.
func FreePort(t testing.TB) int {
	t.Helper()
	ps, err := freePorts(1)
	if err != nil {
		t.Fatalf("redistest: %v", err)
	}
	return ps[0]
}

// freePorts returns n distinct loopback ports (see proctest.FreePorts).
func freePorts(n int) ([]int, error) { return proctest.FreePorts(n) }
