package zookeeper

import (
	"context"
	"testing"
	"time"

	"github.com/leasecron/leasecron/internal/testkit/zktest"
)

// TestLateAnswerNotRead: a write given up on (the server frozen past the
// request timeout) that the server answers later, after the caller has
// its error; run with -race, a caller reading what the late request
// writes fails the test.
func TestLateAnswerNotRead(t *testing.T) {
	besideConformance(t)
	e := zktest.Start(t, 1)
	b := open(t, e.Addrs(), 4*time.Second)
	ctx := context.Background()
	if err := b.makeDirs(ctx, "late", "x"); err != nil {
		t.Fatal(err)
	}
	path := b.cfg.Root + "/late/x"
	e.Servers[0].Pause()
	st, err := b.setObserved(ctx, path, []byte("x"), -1)
	e.Servers[0].Resume()
	if err == nil || st != nil {
		t.Fatalf("a write to a frozen server: stat %v, err %v; want no stat and an error", st, err)
	}
	time.Sleep(time.Second) // the late answer arrives and is written
}
