package scheduler

import "bytes"

// hookTailSize bounds the output a webhook's body carries: the end of
// the run's output tail (the command's LEASECRON_OUTPUT_FILE gets all of
// it).
const hookTailSize = 16 << 10

// hookTail is the end of o as the job printed it (see Output.WriteText),
// at most n bytes, starting at a line boundary.
func hookTail(o *Output, n int) string {
	var b bytes.Buffer
	if o.WriteText(&b, false) != nil {
		return ""
	}
	t := b.Bytes()
	if len(t) > n {
		t = t[len(t)-n:]
		if i := bytes.IndexByte(t, '\n'); i >= 0 {
			t = t[i+1:]
		}
	}
	return string(t)
}
