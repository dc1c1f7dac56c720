package scheduler

import "sync"

// hookTailSize is how much of a run's output its hooks get: the last
// bytes of stdout and stderr as they came.
const hookTailSize = 16 << 10

// tailBuffer keeps the last hookTailSize bytes written to it; safe for
// concurrent writers (a job's stdout and stderr readers).
type tailBuffer struct {
	mu  sync.Mutex
	buf []byte
	cut bool // older output was dropped
}

// Write keeps the end of p and what is left of the earlier writes.
func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if over := len(t.buf) - hookTailSize; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
		t.cut = true
	}
	return len(p), nil
}

// String returns the tail, starting at a line boundary when older output
// was dropped.
func (t *tailBuffer) String() string {
	if t == nil {
		return ""
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	b := t.buf
	if t.cut {
		for i, c := range b {
			if c == '\n' {
				b = b[i+1:]
				break
			}
		}
	}
	return string(b)
}
