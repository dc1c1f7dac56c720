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

// TestRootLayout: Open writes the layout marker into a root that holds
// nothing (the root "/" too, beside ZooKeeper's own /zookeeper), eight
// clients opening an empty root at once all succeed, and Open refuses —
// naming the root, the server and both layouts, and writing nothing — a
// root whose marker names another layout or one that holds znodes but no
// marker (a client from before the marker).
func TestRootLayout(t *testing.T) {
	e := zktest.Start(t, 1)
	raw, _, err := zk.Connect(e.Addrs(), 10*time.Second, zk.WithLogInfo(false))
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	openRoot := func(root string) (*Backend, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		b, err := Open(ctx, Config{Servers: e.Addrs(), Root: root, Timeout: time.Second, SessionTimeout: 10 * time.Second})
		if err == nil {
			t.Cleanup(func() { _ = b.Close() })
		}
		return b, err
	}
	marker := func(path string) string {
		data, _, err := raw.Get(path)
		if err != nil {
			return err.Error()
		}
		return string(data)
	}
	// First, while the server holds nothing else.
	if _, err := openRoot("/"); err != nil {
		t.Fatalf("open of the root /: %v", err)
	}
	if got := marker("/@layout"); got != layoutVersion {
		t.Errorf("marker of / after open: %q, want %q", got, layoutVersion)
	}

	var wg sync.WaitGroup
	errs := make([]error, 8)
	for i := range errs {
		wg.Add(1)
		go func() { defer wg.Done(); _, errs[i] = openRoot("/fresh") }()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("client %d of 8 opening an empty root at once: %v", i, err)
		}
	}
	if got := marker("/fresh/@layout"); got != layoutVersion {
		t.Errorf("marker after open: %q, want %q", got, layoutVersion)
	}

	if _, err := raw.Set("/fresh/@layout", []byte("3"), -1); err != nil {
		t.Fatal(err)
	}
	_, err = openRoot("/fresh")
	checkRefusal(t, err, "/fresh", e.Addrs()[0], "layout 3")

	if _, err := raw.Create("/byhand", nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	if _, err := openRoot("/byhand"); err != nil {
		t.Errorf("open of a root made empty by hand: %v", err)
	}

	// A root deleted under a live client (data loss, zkCli's deleteall)
	// is made again, marker and all, by the next Open, whatever the live
	// client writes meanwhile.
	live, err := openRoot("/gone")
	if err != nil {
		t.Fatal(err)
	}
	deleteAll(t, raw, "/gone")
	_ = live.Put(ctxT(t, 10*time.Second), "flags", lease.Entry{Name: "x", Version: 1, Data: []byte("1")})
	if _, err := openRoot("/gone"); err != nil {
		t.Errorf("open of a root deleted under a live client: %v", err)
	}
	if err := live.Put(ctxT(t, 10*time.Second), "flags", lease.Entry{Name: "x", Version: 2, Data: []byte("2")}); err != nil {
		t.Errorf("the live client's write once the root is back: %v", err)
	}
	if _, err := openRoot("/gone"); err != nil {
		t.Errorf("open of the root the live client wrote in again: %v", err)
	}

	for _, p := range []string{"/old", "/old/@entries"} {
		if _, err := raw.Create(p, nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
			t.Fatal(err)
		}
	}
	_, err = openRoot("/old")
	checkRefusal(t, err, "/old", e.Addrs()[0], "layout 1 (no @layout marker; it holds @entries)")
	if kids, _, err := raw.Children("/old"); err != nil || !slices.Equal(kids, []string{"@entries"}) {
		t.Errorf("the refused client wrote into the root: children %v (%v)", kids, err)
	}
}

// checkRefusal fails t unless err is an ErrOtherLayout naming root,
// server and what the root is laid out as.
func checkRefusal(t *testing.T, err error, root, server, layout string) {
	t.Helper()
	if !errors.Is(err, ErrOtherLayout) {
		t.Errorf("open of %s: %v, want ErrOtherLayout", root, err)
		return
	}
	for _, want := range []string{"root " + root + " ", server, layout, fmt.Sprintf("uses layout %s", layoutVersion)} {
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
