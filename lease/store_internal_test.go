package lease

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/leasecron/leasecron/internal/testkit/redistest"
)

// TestEntriesVersionGuardNegativeControl runs entries.lua as shipped and
// with its exact version comparison replaced by a comparison of Lua
// numbers (doubles), on a real server: with unix-nanosecond versions one
// apart, the shipped script stores the higher one and the variant keeps
// the lower, which is why versions travel as 20 digits.
func TestEntriesVersionGuardNegativeControl(t *testing.T) {
	t.Parallel()
	rdb := redistest.Start(t, 1).Nodes[0].Client()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const exact = "local function newer(a, b)\n"
	if !strings.Contains(entriesSrc, exact) {
		t.Fatal("entries.lua no longer defines newer(a, b)")
	}
	numeric := strings.Replace(entriesSrc, exact, exact+"  do return tonumber(a) > tonumber(b) end\n", 1)
	v := int64(1_763_936_000_123_456_789)
	for _, c := range []struct {
		name   string
		src    string
		stored int64 // 1 if the Put of v+1 over v must be stored
	}{
		{"shipped", entriesSrc, 1},
		{"numeric (control)", numeric, 0},
	} {
		keys := entryKeys("control." + c.name)
		if err := rdb.Eval(ctx, c.src, keys, "put", "e", encodeVersion(v), 0, "old").Err(); err != nil {
			t.Fatalf("%s: put v: %v", c.name, err)
		}
		got, err := rdb.Eval(ctx, c.src, keys, "put", "e", encodeVersion(v+1), 0, "new").Int64()
		if err != nil {
			t.Fatalf("%s: put v+1: %v", c.name, err)
		}
		if got != c.stored {
			t.Errorf("%s: Put of version v+1 over v returned %d, want %d", c.name, got, c.stored)
		}
	}
}
