package waitbound

import (
	"flag"
	"fmt"
	"os"
	"runtime"
	"testing"
)

var startParallel string

func TestMain(m *testing.M) {
	flag.Parse()
	startParallel = flag.Lookup("test.parallel").Value.String()
	Widen(3)
	os.Exit(m.Run())
}

// TestWiden: the parallelism the tests run with is the one given (or
// GOMAXPROCS's) widened by 3.
func TestWiden(t *testing.T) {
	var n, was int
	if _, err := fmt.Sscan(flag.Lookup("test.parallel").Value.String(), &n); err != nil {
		t.Fatal(err)
	}
	if _, err := fmt.Sscan(startParallel, &was); err != nil {
		t.Fatal(err)
	}
	want := was
	if was > 1 {
		want = widened(was, 3, runtime.GOMAXPROCS(0))
	}
	if n != want {
		t.Fatalf("test.parallel = %d after Widen(3) of %d, want %d", n, was, want)
	}
}

// TestWidened: k times, up to four per CPU, never below what was given.
func TestWidened(t *testing.T) {
	for _, c := range []struct{ n, k, procs, want int }{
		{3, 3, 2, 8}, {2, 3, 2, 6}, {2, 3, 32, 6}, {32, 3, 32, 96}, {50, 3, 4, 50}, {1, 3, 2, 3},
	} {
		if got := widened(c.n, c.k, c.procs); got != c.want {
			t.Errorf("widened(%d, %d, %d) = %d, want %d", c.n, c.k, c.procs, got, c.want)
		}
	}
}

// TestAtLeast: AtLeast raises -test.parallel, never lowers it, and keeps
// an explicit 1.
func TestAtLeast(t *testing.T) {
	f := flag.Lookup("test.parallel")
	was := f.Value.String()
	t.Cleanup(func() { _ = f.Value.Set(was) })
	for _, c := range []struct {
		from string
		n    int
		want string
	}{
		{"3", 64, "64"}, {"80", 64, "80"}, {"1", 64, "1"},
	} {
		if err := f.Value.Set(c.from); err != nil {
			t.Fatal(err)
		}
		AtLeast(c.n)
		if got := f.Value.String(); got != c.want {
			t.Errorf("AtLeast(%d) with -parallel %s: %s, want %s", c.n, c.from, got, c.want)
		}
	}
}
