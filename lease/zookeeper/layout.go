package zookeeper

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/go-zookeeper/zk"
)

// The layout of a root. Clients that lay out a root differently must not
// share it: a heartbeat keeps its reads of a space for as long as the
// space's version holds (beatkept.go), so a client whose entry writes do
// not raise that version would have them go unseen. So a root carries
// the layout of the client that made it, ROOT/@layout (persistent, its
// data the layout's number), created in the same multi as the root, and
// Open refuses a root whose marker names another layout, or one that
// holds znodes but no marker (made by a client from before the marker:
// layout 1), with ErrOtherLayout naming the root. A root made empty by
// hand (an operator setting its ACL first) takes the layout of the first
// client that opens it.

// layoutNode is the marker's name under the root.
const layoutNode = "@layout"

// layoutVersion is the layout this client writes and accepts.
const layoutVersion = "2"

// ErrOtherLayout is wrapped by Open's refusal of a root written by a
// client that lays it out another way.
var ErrOtherLayout = errors.New("zookeeper: root holds leases in another layout")

// makeRoot creates the root (and its parents) with the layout marker, or
// checks the layout of the root that exists.
func (b *Backend) makeRoot(ctx context.Context) error {
	if b.cfg.Root == "" { // the root "/" exists
		return b.checkLayout(ctx)
	}
	if err := b.ensureParents(ctx, b.cfg.Root); err != nil {
		return err
	}
	err := b.call(ctx, b.cfg.SessionTimeout, func() error {
		_, err := b.conn.Multi(
			&zk.CreateRequest{Path: b.cfg.Root, Acl: b.acl()},
			&zk.CreateRequest{Path: b.cfg.Root + "/" + layoutNode, Data: []byte(layoutVersion), Acl: b.acl()})
		return err
	}, nil)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, zk.ErrNodeExists):
		return b.checkLayout(ctx)
	default:
		return fmt.Errorf("zookeeper: create %s: %w", b.cfg.Root, b.nodeErr(err))
	}
}

// checkLayout reads the root's layout marker, writing it into a root that
// holds nothing yet, and returns an error when the root is laid out
// another way. Two clients opening an empty root at once both succeed:
// one writes the marker, the other reads it.
func (b *Backend) checkLayout(ctx context.Context) error {
	marker := b.cfg.Root + "/" + layoutNode
	for try := 0; ; try++ {
		var data []byte
		err := b.call(ctx, b.cfg.SessionTimeout, func() error {
			var err error
			data, _, err = b.conn.Get(marker)
			return err
		}, nil)
		if err == nil {
			return b.layoutErr(strings.TrimSpace(string(data)))
		}
		if !errors.Is(err, zk.ErrNoNode) || try == 3 {
			// (A marker made and deleted again between each read and
			// create, three times over, is someone's doing: say so.)
			return fmt.Errorf("zookeeper: read %s: %w", marker, b.nodeErr(err))
		}
		if err := b.rootEmpty(ctx); err != nil {
			return err
		}
		err = b.call(ctx, b.cfg.SessionTimeout, func() error {
			_, err := b.conn.Create(marker, []byte(layoutVersion), 0, b.acl())
			return err
		}, nil)
		if err == nil {
			return nil
		}
		if !errors.Is(err, zk.ErrNodeExists) {
			return fmt.Errorf("zookeeper: create %s: %w", marker, b.nodeErr(err))
		}
		// Another client wrote the marker meanwhile: read it.
	}
}

// rootEmpty returns an error (ErrOtherLayout) when the root, which has no
// layout marker, holds znodes: a client from before the marker wrote
// them. ZooKeeper's own /zookeeper under the root "/" does not count.
func (b *Backend) rootEmpty(ctx context.Context) error {
	root := cmpOr(b.cfg.Root, "/")
	var kids []string
	err := b.call(ctx, b.cfg.SessionTimeout, func() error {
		var err error
		kids, _, err = b.conn.Children(root)
		return err
	}, nil)
	if err != nil {
		return fmt.Errorf("zookeeper: list %s: %w", root, b.nodeErr(err))
	}
	kids = slices.DeleteFunc(kids, func(k string) bool {
		return k == layoutNode || root == "/" && k == "zookeeper"
	})
	if len(kids) == 0 {
		return nil
	}
	slices.Sort(kids)
	return b.layoutErr(fmt.Sprintf("1 (no %s marker; it holds %s)", layoutNode, strings.Join(kids[:min(len(kids), 3)], ", ")))
}

// layoutErr returns nil for this client's layout, else the refusal of the
// root laid out as layout says.
func (b *Backend) layoutErr(layout string) error {
	if layout == layoutVersion {
		return nil
	}
	return fmt.Errorf("zookeeper %s: root %s is laid out as layout %s, this client uses layout %s: "+
		"clients of different versions must not share a root (stop them all and upgrade them together; "+
		"a new root, or the old one deleted with zkCli's deleteall, takes the layout of the first client): %w",
		strings.Join(b.servers, ","), cmpOr(b.cfg.Root, "/"), layout, layoutVersion, ErrOtherLayout)
}
