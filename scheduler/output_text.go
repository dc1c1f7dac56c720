package scheduler

import (
	"bufio"
	"fmt"
	"io"
)

// CutNote is the line that says what was cut from the start of an output
// tail ("" when nothing was).
func (o Output) CutNote() string {
	if o.CutLines == 0 {
		return ""
	}
	return fmt.Sprintf("[... %d lines (%d bytes) cut: the last %d bytes are kept]", o.CutLines, o.CutBytes, o.Limit)
}

// WriteText writes the output's lines to w, one per line, after its
// CutNote. With stamps each line starts with its time (UTC, to the
// millisecond) and stream ("out" or "err"): the format of `leasecron
// logs`; without, the lines are as the job printed them (redacted).
func (o *Output) WriteText(w io.Writer, stamps bool) error {
	if o == nil {
		return nil
	}
	bw := bufio.NewWriter(w)
	if n := o.CutNote(); n != "" {
		fmt.Fprintln(bw, n)
	}
	for _, l := range o.Lines {
		writeLine(bw, l, stamps)
	}
	return bw.Flush()
}

// writeLine writes one output line to w.
func writeLine(w io.Writer, l OutputLine, stamps bool) {
	if stamps {
		fmt.Fprintln(w, FormatLine(l))
		return
	}
	fmt.Fprintln(w, l.Text)
}

// FormatLine is l as `leasecron logs` prints it: time (UTC, ms), stream,
// text.
func FormatLine(l OutputLine) string {
	return l.At.UTC().Format("2006-01-02T15:04:05.000Z") + " " + l.Stream + " " + l.Text
}
