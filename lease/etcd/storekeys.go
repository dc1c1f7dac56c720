package etcd

import (
	"bytes"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"

	"github.com/leasecron/leasecron/lease"
)

// This file holds the key layout and the value encoding of the entries
// and logs (see "Entries and logs" in the package documentation).

// entryPrefix is the prefix of every entry of space (with its '/').
func (b *Backend) entryPrefix(space string) string {
	return b.cfg.Prefix + "entries/" + space + "/"
}

// logPrefix is the prefix of every record key of log (with its '/').
func (b *Backend) logPrefix(log string) string { return b.cfg.Prefix + "log/" + log + "/" }

// logIDKey is the key that marks id as present in log; its value is the
// record's encoded At.
func (b *Backend) logIDKey(log, id string) string { return b.cfg.Prefix + "logid/" + log + "/" + id }

// encodeAt formats t's Unix milliseconds so that byte-wise order is time
// order: 20 zero-padded digits from 1970 on, "-" and 20 digits of
// ms + 2^63 before it ('-' sorts below every digit).
func encodeAt(t time.Time) string {
	ms := t.UnixMilli()
	if ms >= 0 {
		return pad(uint64(ms))
	}
	return "-" + pad(uint64(ms)+1<<63)
}

// decodeAt is the inverse of encodeAt.
func decodeAt(s string) (time.Time, error) {
	if rest, ok := strings.CutPrefix(s, "-"); ok {
		u, err := strconv.ParseUint(rest, 10, 64)
		if err != nil || u >= 1<<63 {
			return time.Time{}, fmt.Errorf("bad time %q", s)
		}
		return time.UnixMilli(int64(u - 1<<63)), nil
	}
	u, err := strconv.ParseUint(s, 10, 64)
	if err != nil || u > math.MaxInt64 {
		return time.Time{}, fmt.Errorf("bad time %q", s)
	}
	return time.UnixMilli(int64(u)), nil
}

// parseRecord decodes a record key (under prefix) and its value.
func parseRecord(prefix string, kv *mvccpb.KeyValue) (lease.Record, error) {
	at, id, ok := strings.Cut(strings.TrimPrefix(string(kv.Key), prefix), "/")
	if !ok {
		return lease.Record{}, fmt.Errorf("record key %q: no id", kv.Key)
	}
	t, err := decodeAt(at)
	if err != nil {
		return lease.Record{}, fmt.Errorf("record key %q: %w", kv.Key, err)
	}
	return lease.Record{ID: id, At: t, Data: kv.Value}, nil
}

// entryValue is an entry's value: "VERSION TTLNS\n" then the data, both
// numbers in decimal (the TTL as given to Put, in nanoseconds).
func entryValue(e lease.Entry) string {
	return strconv.FormatInt(e.Version, 10) + " " + strconv.FormatInt(int64(e.TTL), 10) + "\n" + string(e.Data)
}

// parseEntry decodes an entry's key (under prefix) and value.
func parseEntry(prefix string, kv *mvccpb.KeyValue) (lease.Entry, error) {
	head, data, ok := bytes.Cut(kv.Value, []byte("\n"))
	if !ok {
		return lease.Entry{}, fmt.Errorf("entry %q: no header", kv.Key)
	}
	v, ttl, _ := strings.Cut(string(head), " ")
	ver, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return lease.Entry{}, fmt.Errorf("entry %q: bad version %q", kv.Key, v)
	}
	ns, err := strconv.ParseInt(ttl, 10, 64)
	if err != nil || ns < 0 {
		return lease.Entry{}, fmt.Errorf("entry %q: bad ttl %q", kv.Key, ttl)
	}
	return lease.Entry{Name: strings.TrimPrefix(string(kv.Key), prefix), Version: ver, Data: data, TTL: time.Duration(ns)}, nil
}
