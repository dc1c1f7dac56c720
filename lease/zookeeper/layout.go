package zookeeper

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

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
// layout 1), with ErrOtherLayout naming the root. Layout 1 kept the same
// znodes, but its writes did not raise the space's version: a root of it
// is taken over by stopping its clients and creating the marker by hand
// (the refusal says how). A root made empty by hand (an operator setting
// its ACL first) takes the layout of the first client that opens it, and
// a client that makes a top-level znode again (a root deleted and made
// again by hand under running daemons) writes the marker with it
// (createTop). An old
// client's write between a new client's look at an empty root and its
// marker is not seen: never run clients from before the marker beside
// newer ones.

// layoutNode is the marker's name under the root.
const layoutNode = "@layout"

// layoutVersion is the layout this client writes and accepts.
const (
	layoutVersion = "2"
	layoutNumber  = 2 // layoutVersion as a number
)

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
	err := b.createOrFind(ctx, b.cfg.Root, func() error {
		_, err := b.conn.Multi(
			&zk.CreateRequest{Path: b.cfg.Root, Acl: b.acl()},
			&zk.CreateRequest{Path: b.cfg.Root + "/" + layoutNode, Data: []byte(layoutVersion), Acl: b.acl()})
		return err
	})
	switch {
	case err == nil:
		return nil
	case errors.Is(err, zk.ErrNodeExists):
		return b.checkLayout(ctx)
	default:
		return fmt.Errorf("zookeeper: create %s: %w", b.cfg.Root, b.nodeErr(err))
	}
}

// createOrFind runs create, which makes the znode path, and returns
// zk.ErrNodeExists when path exists: also when create was refused for
// want of the right to create in its parent (zk.ErrNoAuth), which
// ZooKeeper checks first, so that a root an operator made under a parent
// closed to the daemon opens.
func (b *Backend) createOrFind(ctx context.Context, path string, create func() error) error {
	err := b.call(ctx, b.cfg.SessionTimeout, create, nil)
	if !errors.Is(err, zk.ErrNoAuth) {
		return err
	}
	var found bool
	if ferr := b.call(ctx, b.cfg.SessionTimeout, func() error {
		var err error
		found, _, err = b.conn.Exists(path)
		return err
	}, nil); ferr == nil && found {
		return zk.ErrNodeExists
	}
	return err
}

// createTop creates the top-level znode path with the layout marker in
// one multi, or alone when that fails because one of them exists: the
// marker (the usual case: then path is made), or path (then the plain
// create says so too, with zk.ErrNodeExists).
func (b *Backend) createTop(path string) error {
	_, err := b.conn.Multi(
		&zk.CreateRequest{Path: path, Acl: b.acl()},
		&zk.CreateRequest{Path: b.cfg.Root + "/" + layoutNode, Data: []byte(layoutVersion), Acl: b.acl()})
	if !errors.Is(err, zk.ErrNodeExists) {
		return err
	}
	_, err = b.conn.Create(path, nil, 0, b.acl())
	return err
}

// createMarker creates the root's layout marker, naming this client's
// layout, waiting up to timeout for the answer.
func (b *Backend) createMarker(ctx context.Context, timeout time.Duration) error {
	return b.call(ctx, timeout, func() error {
		_, err := b.conn.Create(b.cfg.Root+"/"+layoutNode, []byte(layoutVersion), 0, b.acl())
		return err
	}, nil)
}

// checkLayout reads the root's layout marker, writing it into a root that
// holds nothing of leasecron's yet, and returns an error when the root is
// laid out another way. Two clients opening an empty root at once both
// succeed: one writes the marker, the other reads it.
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
		if !errors.Is(err, zk.ErrNoNode) {
			return fmt.Errorf("zookeeper: read %s: %w", marker, b.nodeErr(err))
		}
		if try == 3 {
			return fmt.Errorf("zookeeper: read %s: made and deleted again three times while this client opened the root: %w", marker, b.nodeErr(err))
		}
		if err := b.rootUnused(ctx); err != nil {
			return err
		}
		err = b.createMarker(ctx, b.cfg.SessionTimeout)
		if err == nil {
			return nil
		}
		if !errors.Is(err, zk.ErrNodeExists) {
			return fmt.Errorf("zookeeper: create %s: %w", marker, b.nodeErr(err))
		}
		// Another client wrote the marker meanwhile: read it.
	}
}

// rootUnused returns an error (ErrOtherLayout) when the root, which has
// no layout marker, holds znodes a leasecron client from before the
// marker made: one of its top-level znodes (@entries, @logs, @clock,
// @beats) or a key's (a child with a done znode). Other znodes (another
// application's under the root "/", a root nested under this one) do not
// count.
func (b *Backend) rootUnused(ctx context.Context) error {
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
	if slices.Contains(kids, layoutNode) {
		return nil // made since the marker was read: checkLayout reads it
	}
	slices.Sort(kids)
	for _, k := range kids {
		ours := k != layoutNode && reservedKey(k)
		if !ours && !strings.Contains(k, "@") {
			err := b.call(ctx, b.cfg.SessionTimeout, func() error {
				var err error
				ours, _, err = b.conn.Exists(b.paths(k).done)
				return err
			}, nil)
			if err != nil {
				return fmt.Errorf("zookeeper: read %s: %w", b.paths(k).done, b.nodeErr(err))
			}
		}
		if ours {
			return b.layoutErr(fmt.Sprintf("1 (no %s marker; it holds %s)", layoutNode, k))
		}
	}
	return nil
}

// layoutErr returns nil for this client's layout, else the refusal of the
// root laid out as layout says.
func (b *Backend) layoutErr(layout string) error {
	if layout == layoutVersion {
		return nil
	}
	root := cmpOr(b.cfg.Root, "/")
	how := "a new root, or the old one deleted with zkCli's deleteall (this drops pause flags, completed ticks and history), " +
		"takes the layout of the first client"
	if n, err := strconv.Atoi(layout); err == nil && n > layoutNumber {
		how = "upgrade this client to the version of the root's clients"
	}
	if strings.HasPrefix(layout, "1 ") {
		how = fmt.Sprintf("layout 1 keeps the same znodes: stop every client of the root, create the marker "+
			"(zkCli: create %s/%s %s), then start the new ones", strings.TrimSuffix(root, "/"), layoutNode, layoutVersion)
	}
	return fmt.Errorf("zookeeper %s: root %s is laid out as layout %s, this client uses layout %s: "+
		"clients of different versions must not share a root; %s: %w",
		strings.Join(b.servers, ","), root, layout, layoutVersion, how, ErrOtherLayout)
}
