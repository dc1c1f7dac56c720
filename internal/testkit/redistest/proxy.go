package redistest

import (
	"testing"

	"github.com/leasecron/leasecron/internal/testkit/netproxy"
)

// Proxy is a TCP proxy between a client and a node (see package netproxy).
type Proxy = netproxy.Proxy

// NewProxy starts a proxy to target on its own loopback port; the test's
// cleanup stops it (netproxy.New).
func NewProxy(t testing.TB, target string) *Proxy { return netproxy.New(t, target) }
