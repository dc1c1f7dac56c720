package scheduler

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"sync"
	"time"

	"github.com/leasecron/leasecron/config"
	"github.com/leasecron/leasecron/lease"
)

// Output is the tail of a run's output kept with its history record: the
// last lines of stdout and stderr, interleaved in the order the daemon read
// them, each with its stream and time. The tail is cut at a line boundary
// (a line longer than maxLineBytes is split into pieces first); CutLines
// and CutBytes say how much of the start was dropped.
type Output struct {
	// Lines are the lines kept, oldest first, without their newline.
	Lines []OutputLine `json:"lines"`
	// First is the number of the first line kept (the run's lines are
	// numbered from 1): CutLines + 1.
	First int64 `json:"first"`
	// Bytes is how much the run printed, both streams, newlines included.
	Bytes int64 `json:"bytes"`
	// CutLines and CutBytes are what was dropped from the start to keep
	// the tail within Limit.
	CutLines int64 `json:"cut_lines,omitempty"`
	CutBytes int64 `json:"cut_bytes,omitempty"`
	// Limit is the job's output_limit when the run ran.
	Limit int `json:"limit"`
}

// OutputLine is one line of a run's output.
type OutputLine struct {
	// At is when the daemon read the line (to the millisecond).
	At time.Time `json:"t"`
	// Stream is "out" (stdout) or "err" (stderr).
	Stream string `json:"s"`
	// Text is the line without its newline, redacted (see Job.Redact).
	Text string `json:"l"`

	raw int // bytes the job printed for it, newline included
}

// printed is what the job printed for l (its text and newline when the
// raw size is not known).
func (l OutputLine) printed() int64 {
	if l.raw > 0 {
		return int64(l.raw)
	}
	return int64(len(l.Text)) + lineCost
}

// Output limits.
const (
	// defaultOutputLimit and maxOutputLimit are output_limit's default
	// and largest value (package config checks them).
	defaultOutputLimit = config.DefaultOutputLimit
	maxOutputLimit     = config.MaxOutputLimit
	// maxLineBytes splits longer lines into pieces, so that one huge line
	// costs no more memory than a piece.
	maxLineBytes = 16 << 10
	// lineCost is what a line costs in the tail besides its text: its
	// newline. A tail also keeps at most limit/minLineShare lines, so that
	// a flood of empty lines cannot make its framing outgrow the record.
	lineCost     = 1
	minLineShare = 16
)

// outputTail keeps the last lines of a running job's output within a byte
// limit: memory stays bounded whatever the job prints (the daemon's
// memory per running job is about limit plus a piece being read per
// stream). It is safe for concurrent use by the stream readers.
type outputTail struct {
	mu       sync.Mutex
	limit    int
	maxLines int
	lines    []OutputLine // a queue: lines[head:] are kept
	head     int
	size     int   // cost of lines[head:]
	total    int64 // lines seen
	bytes    int64 // bytes seen
	redact   *redactor
	now      func() time.Time
}

func newOutputTail(limit int, r *redactor) *outputTail {
	if limit <= 0 {
		limit = defaultOutputLimit
	}
	return &outputTail{limit: limit, maxLines: max(limit/minLineShare, 1), redact: r, now: time.Now}
}

// add appends one line of stream, as readLines gives it (with its
// newline, if it had one), and drops the oldest lines beyond the limit. It
// returns the line as kept (redacted, without the newline).
func (o *outputTail) add(stream string, raw []byte) string {
	text := o.redact.apply(string(bytes.TrimSuffix(raw, []byte("\n"))))
	o.mu.Lock()
	defer o.mu.Unlock()
	o.total++
	o.bytes += int64(len(raw))
	o.lines = append(o.lines, OutputLine{At: o.now().Truncate(time.Millisecond), Stream: stream, Text: text, raw: len(raw)})
	o.size += len(text) + lineCost
	for o.size > o.limit || len(o.lines)-o.head > o.maxLines {
		dropped := o.lines[o.head]
		o.lines[o.head] = OutputLine{}
		o.head++
		o.size -= len(dropped.Text) + lineCost
	}
	if o.head > len(o.lines)/2 && o.head > 64 {
		n := copy(o.lines, o.lines[o.head:])
		clear(o.lines[n:])
		o.lines, o.head = o.lines[:n], 0
	}
	return text
}

// snapshot returns the tail as kept now; with maxBytes > 0 only the newest
// lines whose text fits in maxBytes.
func (o *outputTail) snapshot(maxBytes int) Output {
	o.mu.Lock()
	defer o.mu.Unlock()
	kept := o.lines[o.head:]
	if maxBytes > 0 {
		size, i := 0, len(kept)
		for i > 0 && size+len(kept[i-1].Text)+32 <= maxBytes {
			i--
			size += len(kept[i].Text) + 32
		}
		kept = kept[i:]
	}
	first := o.total - int64(len(kept)) + 1
	return Output{
		Lines: append([]OutputLine(nil), kept...), First: first, Bytes: o.bytes,
		CutLines: first - 1, CutBytes: o.bytes - o.sizeOf(kept), Limit: o.limit,
	}
}

// sizeOf is what the job printed for lines.
func (o *outputTail) sizeOf(lines []OutputLine) int64 {
	var n int64
	for _, l := range lines {
		n += l.printed()
	}
	return n
}

// lineCount is how many lines were seen so far.
func (o *outputTail) lineCount() int64 {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.total
}

// readLines reads r to EOF, calling line for each line (with its newline;
// a line longer than maxLineBytes comes in pieces without one) and copying
// the raw bytes to raw when it is not nil. Memory: one buffer of
// maxLineBytes.
func readLines(r io.Reader, raw io.Writer, line func([]byte)) {
	br := bufio.NewReaderSize(r, maxLineBytes)
	for {
		b, err := br.ReadSlice('\n')
		if raw != nil && len(b) > 0 {
			_, _ = raw.Write(b)
		}
		switch {
		case err == nil:
			line(b)
		case errors.Is(err, bufio.ErrBufferFull):
			// A long line: this piece now, the rest as the next ones (a
			// multi-byte character may be split between pieces).
			line(b)
		default:
			if len(b) > 0 {
				line(b)
			}
			return
		}
	}
}

// encodeRecord returns rec's JSON for the history, its output cut
// further (oldest lines first, the cut said) if the record would exceed
// lease.MaxRecordSize.
func encodeRecord(rec RunRecord) ([]byte, error) {
	for {
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(rec); err != nil {
			return nil, err
		}
		data := bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
		if len(data) <= lease.MaxRecordSize || rec.Output == nil || len(rec.Output.Lines) == 0 {
			return data, nil
		}
		out := *rec.Output
		drop := max(len(out.Lines)/4, 1)
		for _, l := range out.Lines[:drop] {
			out.CutBytes += l.printed()
		}
		out.Lines = out.Lines[drop:]
		out.First += int64(drop)
		out.CutLines += int64(drop)
		rec.Output = &out
	}
}
