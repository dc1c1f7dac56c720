package faultsuite

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"sync"
	"time"
)

// HistoryLog reads a recorder log as it grows: each Read parses only the
// lines appended since the previous one, so a test that polls the history
// every few milliseconds does not parse the whole log again each time (in
// the fault suite's long runs that parsing was a third of the test
// binary's CPU). Safe for concurrent use.
type HistoryLog struct {
	Path string

	mu      sync.Mutex
	offset  int64  // bytes of the file consumed
	partial []byte // an unterminated last line, kept until its newline
	byKey   map[runKey]*Run
	order   []runKey
}

// runKey identifies one run in the log.
type runKey struct {
	host string
	pid  int
	job  string
	tick int64
}

// Read returns every run in the log so far, in start order. A line not yet
// ended by a newline waits for the next Read (the recorder writes a line
// and its newline in one write); a missing file is an empty history. A
// file shorter than what was read before (replaced or truncated) is read
// again from its start.
func (l *HistoryLog) Read() (*History, error) { return l.read(false) }

// read parses what was appended since the last read. With final set, an
// unterminated last line is parsed too (the log is complete).
func (l *HistoryLog) read(final bool) (*History, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.byKey == nil {
		l.byKey = map[runKey]*Run{}
	}
	if err := l.consume(final); err != nil {
		return nil, fmt.Errorf("read history %s: %w", l.Path, err)
	}
	h := &History{Runs: make([]Run, 0, len(l.order))}
	for _, k := range l.order {
		h.Runs = append(h.Runs, *l.byKey[k])
	}
	sort.SliceStable(h.Runs, func(i, j int) bool { return h.Runs[i].Start.Before(h.Runs[j].Start) })
	return h, nil
}

// consume reads the file from the offset and applies its complete lines.
func (l *HistoryLog) consume(final bool) error {
	f, err := os.Open(l.Path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer f.Close()
	if st, err := f.Stat(); err != nil {
		return err
	} else if st.Size() < l.offset {
		l.offset, l.partial, l.byKey, l.order = 0, nil, map[runKey]*Run{}, nil
	}
	if _, err := f.Seek(l.offset, io.SeekStart); err != nil {
		return err
	}
	data, err := io.ReadAll(f)
	if err != nil {
		return err
	}
	l.offset += int64(len(data))
	data = append(l.partial, data...)
	l.partial = nil
	for len(data) > 0 {
		i := bytes.IndexByte(data, '\n')
		if i < 0 {
			if !final {
				l.partial = bytes.Clone(data)
				return nil
			}
			i = len(data)
		}
		l.apply(data[:i])
		data = data[min(i+1, len(data)):]
	}
	return nil
}

// apply adds one line's event to its run. A line that does not parse (the
// torn line of a killed writer) is skipped.
func (l *HistoryLog) apply(line []byte) {
	var e Event
	if len(bytes.TrimSpace(line)) == 0 || json.Unmarshal(line, &e) != nil {
		return
	}
	k := runKey{e.Host, e.PID, e.Job, e.Tick}
	t := time.Unix(0, e.T)
	r := l.byKey[k]
	if r == nil {
		r = &Run{Job: e.Job, Tick: e.Tick, Host: e.Host, Token: e.Token, PID: e.PID, Start: t, Attempt: e.Attempt}
		l.byKey[k] = r
		l.order = append(l.order, k)
	}
	switch e.Ev {
	case "start":
		r.Start = t
	case "end":
		r.End, r.Exit = t, e.Exit
	case "term":
		r.Term = true
	}
	if t.After(r.Last) {
		r.Last = t
	}
}
