package netproxy

import (
	"bytes"
	"testing"
)

// TestRewriteSplitReads: a match split between two reads at any point is
// still rewritten, and nothing is lost or held back at the end.
func TestRewriteSplitReads(t *testing.T) {
	in := []byte("$40\r\nrun_id:abc\r\nxrun_idrun_id:\r\nrun_i\r\n")
	want := bytes.ReplaceAll(in, []byte("run_id:"), []byte("run_no:"))
	from, to := []byte("run_id:"), []byte("run_no:")
	for a := 0; a <= len(in); a++ {
		for b := a; b <= len(in); b++ {
			var out, carry []byte
			for i, part := range [][]byte{in[:a], in[a:b], in[b:]} {
				var send []byte
				send, carry = rewrite(append(carry, bytes.Clone(part)...), from, to, i == 2)
				out = append(out, send...)
			}
			if !bytes.Equal(out, want) || carry != nil {
				t.Fatalf("reads split at %d, %d: got %q (carry %q), want %q", a, b, out, carry, want)
			}
		}
	}
}
