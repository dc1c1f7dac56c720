package etcd

import (
	"slices"
	"strings"
	"testing"
	"time"
)

// TestEncodeAt: the log's time encoding sorts byte-wise like the times
// (before and after 1970) and decodes to the same millisecond.
func TestEncodeAt(t *testing.T) {
	t.Parallel()
	times := []time.Time{
		time.UnixMilli(-1 << 62), time.Date(1900, 1, 1, 0, 0, 0, 0, time.UTC), time.UnixMilli(-1001), time.UnixMilli(-1),
		time.UnixMilli(0), time.UnixMilli(1), time.Date(2026, 11, 23, 22, 0, 0, 123e6, time.UTC), time.UnixMilli(1 << 62),
	}
	var enc []string
	for _, at := range times {
		s := encodeAt(at)
		got, err := decodeAt(s)
		if err != nil || !got.Equal(at) {
			t.Errorf("decodeAt(encodeAt(%s)) = %s, %v", at, got, err)
		}
		enc = append(enc, s+"/id")
	}
	if !slices.IsSortedFunc(enc, strings.Compare) {
		t.Errorf("encodings not in time order: %q", enc)
	}
	for _, bad := range []string{"", "-", "x", "-99999999999999999999", "99999999999999999999"} {
		if _, err := decodeAt(bad); err == nil {
			t.Errorf("decodeAt(%q): no error", bad)
		}
	}
}
