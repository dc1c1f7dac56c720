package redlock

import (
	"errors"
	"fmt"
	"strings"
)

// The layout of the keys on a node. A lease is one hash (leaseKey; its
// fields are listed in acquirebatch.lua and the package documentation),
// and clients that keep leases in other keys must not share a node: each
// would read the other's leases as free. So every node carries the layout
// of the client that wrote its data marker (birth.go) as the marker's
// third field, and a client refuses a node whose marker names another
// layout (ErrOtherLayout, with the node's name, on every round and in
// Health). A marker of two fields was written by a client of layout 1
// (three keys per lease: {key}:lock, :fence, :epoch, plus :note), before
// the layout was written down. A Redis Cluster node has no marker and is
// not checked.

// layoutVersion is the layout this client writes and accepts.
const layoutVersion = "2"

// ErrOtherLayout is wrapped by the refusal of a node whose data was
// written by a client that keeps leases in another layout of keys.
var ErrOtherLayout = errors.New("redlock: node keeps leases in another key layout")

// markerTail is what this client writes after the time in a new data
// marker: its nonce and its layout.
func (n *node) markerTail() string { return n.nonce + " " + layoutVersion }

// checkLayout returns an error when the data marker names another layout
// than this client's.
func checkLayout(marker string) error {
	f := strings.Fields(marker)
	layout := "1"
	if len(f) >= 3 {
		layout = f[2]
	}
	if layout == layoutVersion {
		return nil
	}
	return fmt.Errorf("its data marker (key %s) says layout %s, this client uses layout %s: "+
		"clients of different versions must not share nodes (upgrade them together; "+
		"a node emptied with FLUSHDB takes the layout of the first client after it): %w",
		birthKey, layout, layoutVersion, ErrOtherLayout)
}
