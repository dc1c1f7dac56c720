package redlock

import (
	"bytes"
	"cmp"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// encodeVersion writes an int64 version as entries.lua compares it: 20
// decimal digits of the version plus 2^63, whose digit order is the
// order of the versions (exactly: Lua numbers are doubles, which cannot
// tell unix nanoseconds one apart).
func encodeVersion(v int64) string {
	return fmt.Sprintf("%020d", uint64(v)^(1<<63))
}

// decodeVersion reverses encodeVersion.
func decodeVersion(s string) (int64, error) {
	u, err := strconv.ParseUint(s, 10, 64)
	if err != nil || len(s) != 20 {
		return 0, fmt.Errorf("malformed version %q", s)
	}
	return int64(u ^ (1 << 63)), nil
}

// entryMerge keeps, per name, the entry with the highest version among
// the nodes' answers (equal versions: the greater data, so that the
// result does not depend on the order of the answers).
type entryMerge map[string]Entry

// add folds one node's entry (its fields as entries.lua returns them)
// into m.
func (m entryMerge) add(name string, ver, ttl, data any) error {
	v, err := decodeVersion(toString(ver))
	if err != nil {
		return fmt.Errorf("entry %s: %w", name, err)
	}
	ms, err := strconv.ParseInt(toString(ttl), 10, 64)
	if err != nil || ms < 0 {
		return fmt.Errorf("entry %s: malformed TTL %q", name, toString(ttl))
	}
	d := time.Duration(math.MaxInt64) // a TTL of ~292 years, rounded up
	if ms <= math.MaxInt64/int64(time.Millisecond) {
		d = time.Duration(ms) * time.Millisecond
	}
	e := Entry{Name: name, Version: v, Data: []byte(toString(data)), TTL: d}
	if cur, ok := m[name]; ok && (cur.Version > v || cur.Version == v && bytes.Compare(cur.Data, e.Data) >= 0) {
		return nil
	}
	m[name] = e
	return nil
}

// sorted returns the entries sorted by name.
func (m entryMerge) sorted() []Entry {
	out := make([]Entry, 0, len(m))
	for _, e := range m {
		out = append(out, e)
	}
	slices.SortFunc(out, func(a, b Entry) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// logMerge is the union of the nodes' answers to a log read.
type logMerge struct {
	limit int // the largest limit reported (0: none)
	recs  map[string]Record
}

// add folds one node's answer, {LIMIT, ID, AT, DATA, ...}, into m.
func (m *logMerge) add(f []any) error {
	if l := toString(f[0]); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil {
			return fmt.Errorf("malformed limit %q", l)
		}
		m.limit = max(m.limit, n)
	}
	if m.recs == nil {
		m.recs = map[string]Record{}
	}
	for i := 1; i+2 < len(f); i += 3 {
		id := toString(f[i])
		score, err := strconv.ParseFloat(toString(f[i+1]), 64)
		if err != nil || math.IsNaN(score) || math.IsInf(score, 0) {
			return fmt.Errorf("record %s: malformed At %q", id, toString(f[i+1]))
		}
		r := Record{ID: id, At: time.UnixMilli(int64(math.Round(score))), Data: []byte(toString(f[i+2]))}
		// A record has one At and data; should two nodes disagree (an ID
		// reused after it was trimmed), keep the newer.
		if cur, ok := m.recs[id]; ok && recordCmp(cur, r) >= 0 {
			continue
		}
		m.recs[id] = r
	}
	return nil
}

// recordCmp orders records oldest first: by At, then ID, then data.
func recordCmp(a, b Record) int {
	return cmp.Or(a.At.Compare(b.At), strings.Compare(a.ID, b.ID), bytes.Compare(a.Data, b.Data))
}

// newest returns up to n records (and no more than the limit), newest
// first.
func (m *logMerge) newest(n int) []Record {
	out := make([]Record, 0, len(m.recs))
	for _, r := range m.recs {
		out = append(out, r)
	}
	slices.SortFunc(out, func(a, b Record) int { return recordCmp(b, a) })
	if m.limit > 0 {
		n = min(n, m.limit)
	}
	if len(out) > n {
		out = out[:n]
	}
	return out
}
