package zookeeper

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/leasecron/leasecron/internal/testkit/zktest"
	"github.com/leasecron/leasecron/lease"
)

// layoutKit opens roots of one server and reads and writes its znodes
// directly.
type layoutKit struct {
	t      *testing.T
	server string
	raw    *zk.Conn
	addrs  []string
}

func newLayoutKit(t *testing.T) *layoutKit {
	e := zktest.Start(t, 1)
	raw, _, err := zk.Connect(e.Addrs(), 10*time.Second, zk.WithLogInfo(false))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(raw.Close)
	return &layoutKit{t: t, server: e.Addrs()[0], raw: raw, addrs: e.Addrs()}
}

func (k *layoutKit) open(root string) (*Backend, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	b, err := Open(ctx, Config{Servers: k.addrs, Root: root, Timeout: time.Second, SessionTimeout: 10 * time.Second})
	if err == nil {
		k.t.Cleanup(func() { _ = b.Close() })
	}
	return b, err
}

// opens opens root with n clients at once; each must succeed.
func (k *layoutKit) opens(root string, n int) {
	k.t.Helper()
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range errs {
		wg.Add(1)
		go func() { defer wg.Done(); _, errs[i] = k.open(root) }()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			k.t.Errorf("client %d of %d opening %s at once: %v", i, n, root, err)
		}
	}
}

// marker fails the test unless the marker of root says want.
func (k *layoutKit) marker(root, want string) {
	k.t.Helper()
	data, _, err := k.raw.Get(strings.TrimSuffix(root, "/") + "/@layout")
	if got := string(data); err != nil || got != want {
		k.t.Errorf("marker of %s: %q (%v), want %q", root, got, err, want)
	}
}

func (k *layoutKit) create(acl []zk.ACL, paths ...string) {
	k.t.Helper()
	for _, p := range paths {
		if _, err := k.raw.Create(p, nil, 0, acl); err != nil {
			k.t.Fatal(err)
		}
	}
}

// TestRootLayout: Open writes the layout marker into a root that holds
// nothing of leasecron's — made by it (in one multi with the root), made
// empty by hand (eight clients at once: one writes the marker, the
// others read it), the root "/" beside ZooKeeper's own znode, a root
// holding another application's znode or a nested root, and a root under
// a parent closed to the client — and a client that makes a top-level
// znode of a root deleted and made again by hand writes it too.
func TestRootLayout(t *testing.T) {
	besideConformance(t)
	k := newLayoutKit(t)
	all := zk.WorldACL(zk.PermAll)
	if _, err := k.open("/"); err != nil { // first, while the server holds nothing else
		t.Fatalf("open of the root /: %v", err)
	}
	k.marker("/", layoutVersion)
	k.opens("/fresh", 8)
	k.marker("/fresh", layoutVersion)
	k.create(all, "/byhand")
	k.opens("/byhand", 8)
	k.marker("/byhand", layoutVersion)

	k.create(all, "/shared", "/shared/other-app")
	k.opens("/shared", 1)
	k.marker("/shared", layoutVersion)
	k.opens("/a/b", 1)
	k.opens("/a", 1)
	k.marker("/a", layoutVersion)

	k.create(all, "/closed", "/closed/root")
	if _, err := k.raw.SetACL("/closed", zk.WorldACL(zk.PermRead), -1); err != nil {
		t.Fatal(err)
	}
	k.opens("/closed/root", 1)
	k.marker("/closed/root", layoutVersion)

	live, err := k.open("/gone")
	if err != nil {
		t.Fatal(err)
	}
	deleteAll(t, k.raw, "/gone")
	k.create(all, "/gone") // by hand, under the live client
	if err := live.Put(ctxT(t, 10*time.Second), "flags", lease.Entry{Name: "x", Version: 1, Data: []byte("1")}); err != nil {
		t.Fatalf("the live client's write into the root made again: %v", err)
	}
	k.marker("/gone", layoutVersion)
	k.opens("/gone", 1)
}

// TestRootOfAnotherLayoutRefused: Open refuses — naming the root, the
// server and both layouts, saying how to move on (upgrade, for a newer
// layout), and writing nothing — a root whose marker names another layout, and one without a marker that
// holds a top-level znode or a key of a client from before the marker.
func TestRootOfAnotherLayoutRefused(t *testing.T) {
	besideConformance(t)
	k := newLayoutKit(t)
	all := zk.WorldACL(zk.PermAll)
	k.opens("/next", 1)
	if _, err := k.raw.Set("/next/@layout", []byte("3"), -1); err != nil {
		t.Fatal(err)
	}
	_, err := k.open("/next")
	checkRefusal(t, err, "/next", k.server, "layout 3", "upgrade this client")
	k.marker("/next", "3")
	k.opens("/garbled", 1)
	if _, err := k.raw.Set("/garbled/@layout", []byte("x"), -1); err != nil {
		t.Fatal(err)
	}
	_, err = k.open("/garbled")
	checkRefusal(t, err, "/garbled", k.server, "layout x", "deleteall")

	for root, made := range map[string][]string{
		"/old":    {"/old", "/old/@entries"},
		"/oldjob": {"/oldjob", "/oldjob/billing", "/oldjob/billing/done"},
	} {
		k.create(all, made...)
		_, err := k.open(root)
		held := strings.TrimPrefix(made[1], root+"/")
		checkRefusal(t, err, root, k.server, "layout 1 (no @layout marker; it holds "+held+")", "create "+root+"/@layout 2")
		if kids, _, err := k.raw.Children(root); err != nil || !slices.Equal(kids, []string{held}) {
			t.Errorf("the refused client wrote into %s: children %v (%v)", root, kids, err)
		}
	}
}

// checkRefusal fails t unless err is an ErrOtherLayout naming root,
// server and what the root is laid out as, and saying how to move on.
func checkRefusal(t *testing.T, err error, root, server, layout, how string) {
	t.Helper()
	if !errors.Is(err, ErrOtherLayout) {
		t.Errorf("open of %s: %v, want ErrOtherLayout", root, err)
		return
	}
	for _, want := range []string{"root " + root + " ", server, layout, fmt.Sprintf("uses layout %s", layoutVersion), how} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("refusal %q does not say %q", err, want)
		}
	}
}

// deleteAll deletes path and everything under it.
func deleteAll(t *testing.T, c *zk.Conn, path string) {
	t.Helper()
	kids, _, err := c.Children(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range kids {
		deleteAll(t, c, path+"/"+k)
	}
	if err := c.Delete(path, -1); err != nil {
		t.Fatal(err)
	}
}
