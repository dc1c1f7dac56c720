package leasetest

import (
	"bytes"
	"testing"
	"time"

	"github.com/leasecron/leasecron/lease"
)

// testBigRecords: a record of MaxRecordSize bytes (a run's record with
// the tail of its output) is stored and read back byte for byte, next to
// more of its size in the same log, and trimmed like any other; one byte
// more is refused before it reaches the store.
func testBigRecords(t *testing.T, s *suite) {
	b, other := s.open(t), s.open(t)
	lg := s.key(t)
	base := time.Now().Truncate(time.Millisecond).Add(-time.Hour)
	data := func(i int) []byte {
		d := bytes.Repeat([]byte{byte('a' + i)}, lease.MaxRecordSize)
		d[0], d[len(d)-1] = 0, '\n' // binary-safe at both ends
		return d
	}
	const n, limit = 4, 3
	for i := range n {
		r := lease.Record{ID: "big" + itoa(i), At: base.Add(time.Duration(i) * time.Second), Data: data(i)}
		// A retried Append is harmless, and the scheduler retries while
		// its lease is held: a store slow to take half a megabyte under
		// load (the clients' timeouts here are short) gets a few tries.
		var err error
		for try := 0; try < 5; try++ {
			if err = b.Append(ctx(t, liveness), lg, r, limit); err == nil {
				break
			}
		}
		if err != nil {
			t.Fatalf("Append of a %d-byte record, 5 tries: %v", len(r.Data), err)
		}
	}
	var l []lease.Record
	var err error
	for try := 0; try < 5; try++ {
		if l, err = other.Log(ctx(t, liveness), lg, n); err == nil {
			break
		}
	}
	if err != nil {
		t.Fatalf("Log of %d records of %d bytes: %v", limit, lease.MaxRecordSize, err)
	}
	if len(l) != limit {
		t.Fatalf("Log: %d records; want the newest %d", len(l), limit)
	}
	for k, r := range l {
		i := n - 1 - k
		if r.ID != "big"+itoa(i) || !bytes.Equal(r.Data, data(i)) {
			t.Errorf("record %d: ID %s, %d bytes; want big%d with its %d bytes as written", k, r.ID, len(r.Data), i, lease.MaxRecordSize)
		}
	}
	tooBig := lease.Record{ID: "too-big", At: base, Data: make([]byte, lease.MaxRecordSize+1)}
	if err := b.Append(ctx(t, liveness), lg, tooBig, limit); err == nil {
		t.Errorf("Append of %d bytes: no error; want the size refused", len(tooBig.Data))
	}
}
