package waitbound

import (
	"flag"
	"fmt"
	"os"
	"testing"
)

var startParallel string

func TestMain(m *testing.M) {
	flag.Parse()
	startParallel = flag.Lookup("test.parallel").Value.String()
	Widen(3)
	os.Exit(m.Run())
}

// TestWiden: the parallelism the tests run with is three times the one
// given (or GOMAXPROCS's).
func TestWiden(t *testing.T) {
	var n, was int
	if _, err := fmt.Sscan(flag.Lookup("test.parallel").Value.String(), &n); err != nil {
		t.Fatal(err)
	}
	if _, err := fmt.Sscan(startParallel, &was); err != nil {
		t.Fatal(err)
	}
	if n != 3*was {
		t.Fatalf("test.parallel = %d after Widen(3) of %d", n, was)
	}
}
