package scheduler

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/leasecron/leasecron/config"
	"github.com/leasecron/leasecron/lease"
)

// TestOutputTailKeepsTheLastBytes: a tail of limit bytes keeps the newest
// whole lines within limit, numbers them from where the cut ends, and
// counts what it dropped.
func TestOutputTailKeepsTheLastBytes(t *testing.T) {
	const limit = 1000
	o := newOutputTail(limit, nil)
	var total int64
	for i := 1; i <= 5000; i++ {
		line := "a line of output, number " + strconv.Itoa(i)
		total += int64(len(line)) + 1
		o.add([]string{"out", "err"}[i%2], []byte(line+"\n"))
	}
	out := o.snapshot(0)
	if out.Bytes != total {
		t.Errorf("Bytes = %d, want %d", out.Bytes, total)
	}
	kept := out.Bytes - out.CutBytes
	if kept > limit || kept < limit-20 {
		t.Errorf("kept %d bytes, want the last whole lines within %d", kept, limit)
	}
	last := out.Lines[len(out.Lines)-1]
	if last.Text != "a line of output, number 5000" || last.Stream != "out" {
		t.Errorf("last line %+v, want line 5000 on out", last)
	}
	if want := "a line of output, number " + strconv.FormatInt(out.First, 10); out.Lines[0].Text != want || out.CutLines != out.First-1 {
		t.Errorf("first kept %q (First %d, CutLines %d), want %q", out.Lines[0].Text, out.First, out.CutLines, want)
	}
	if !strings.Contains(out.CutNote(), strconv.FormatInt(out.CutLines, 10)+" lines") {
		t.Errorf("CutNote %q does not say the cut", out.CutNote())
	}
	if cap(o.lines) > 4*len(out.Lines)+256 {
		t.Errorf("the queue holds %d slots for %d lines: it grows with the output", cap(o.lines), len(out.Lines))
	}
}

// TestOutputTailEmptyLineFlood: a flood of empty lines is bounded by the
// line count (limit/16), so its framing cannot outgrow the record.
func TestOutputTailEmptyLineFlood(t *testing.T) {
	o := newOutputTail(defaultOutputLimit, nil)
	for range 200_000 {
		o.add("out", nil)
	}
	out := o.snapshot(0)
	if len(out.Lines) > defaultOutputLimit/minLineShare {
		t.Errorf("%d empty lines kept, want at most %d", len(out.Lines), defaultOutputLimit/minLineShare)
	}
	data, err := encodeRecord(RunRecord{Job: "j", Output: &out})
	if err != nil || len(data) > lease.MaxRecordSize {
		t.Errorf("record: %d bytes, %v; want within %d", len(data), err, lease.MaxRecordSize)
	}
}

// TestEncodeRecordFitsTheStore: output that escapes to more than
// lease.MaxRecordSize in JSON is cut further, oldest lines first, and the
// cut is counted.
func TestEncodeRecordFitsTheStore(t *testing.T) {
	o := newOutputTail(maxOutputLimit, nil)
	ctl := strings.Repeat("\x01", 1000) // 6 bytes each in JSON
	for range 2000 {
		o.add("err", []byte(ctl))
	}
	out := o.snapshot(0)
	data, err := encodeRecord(RunRecord{Job: "j", Output: &out})
	if err != nil || len(data) > lease.MaxRecordSize {
		t.Fatalf("record: %d bytes, %v; want within %d", len(data), err, lease.MaxRecordSize)
	}
	var back RunRecord
	if err := json.Unmarshal(data, &back); err != nil {
		t.Fatal(err)
	}
	if back.Output.CutLines <= out.CutLines || back.Output.First != back.Output.CutLines+1 || len(back.Output.Lines) == 0 {
		t.Errorf("cut to fit: CutLines %d (was %d), First %d, %d lines", back.Output.CutLines, out.CutLines, back.Output.First, len(back.Output.Lines))
	}
}

// TestReadLinesSplitsLongLines: lines come without their newline, a line
// longer than maxLineBytes in pieces, the last line without a newline
// too, and the raw copy is byte for byte.
func TestReadLinesSplitsLongLines(t *testing.T) {
	long := strings.Repeat("x", 2*maxLineBytes+5)
	in := "a\n\nb\n" + long + "\nend"
	var got []string
	var raw bytes.Buffer
	readLines(strings.NewReader(in), &raw, func(b []byte) { got = append(got, strings.TrimSuffix(string(b), "\n")) })
	if raw.String() != in {
		t.Errorf("raw copy differs")
	}
	if strings.Join(got, "") != strings.ReplaceAll(in, "\n", "") || got[0] != "a" || got[1] != "" || got[len(got)-1] != "end" {
		t.Errorf("lines %q...", got[:3])
	}
	for _, l := range got {
		if len(l) > maxLineBytes {
			t.Errorf("a piece of %d bytes, want at most %d", len(l), maxLineBytes)
		}
	}
}

// TestRedactor: redact patterns and secret env values (from the job's
// env or the daemon's) become [REDACTED]; without either nothing changes.
func TestRedactor(t *testing.T) {
	t.Setenv("LEASECRON_TEST_DAEMON_SECRET", "d43m0n")
	j := &Job{Redact: []string{`token=\S+`}, SecretEnv: []string{"DB_PASSWORD", "LEASECRON_TEST_DAEMON_SECRET", "UNSET_ONE"},
		Env: map[string]string{"DB_PASSWORD": "hunter2"}}
	r := newRedactor(j)
	got := r.apply("login hunter2 token=abc123 d43m0n ok")
	if want := "login [REDACTED] [REDACTED] [REDACTED] ok"; got != want {
		t.Errorf("apply = %q, want %q", got, want)
	}
	if newRedactor(&Job{}) != nil || (*redactor)(nil).apply("x") != "x" {
		t.Errorf("a job without redact or secret_env must not change its output")
	}
}

// TestOutputConfigKeys: output_limit (with units), redact and secret_env
// in defaults and jobs; a bad regexp is named with its file and line.
func TestOutputConfigKeys(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "jobs.yaml")
	good := `redis:
  nodes: ["redis://127.0.0.1:6379/0"]
defaults:
  redact: ['password=\S+']
jobs:
  - name: a
    schedule: "@hourly"
    shell: "true"
    output_limit: 128KiB
    secret_env: [DB_PASSWORD]
  - name: b
    schedule: "@hourly"
    shell: "true"
`
	if err := os.WriteFile(path, []byte(good), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	a, b := c.Job("a"), c.Job("b")
	if a.OutputLimit != 128<<10 || len(a.SecretEnv) != 1 || len(a.Redact) != 1 || len(b.Redact) != 1 || b.OutputLimit != 0 {
		t.Errorf("a: %d %q %q; b: %d %q", a.OutputLimit, a.SecretEnv, a.Redact, b.OutputLimit, b.Redact)
	}
	bad := strings.Replace(good, "    secret_env: [DB_PASSWORD]\n", "    redact:\n      - 'ok'\n      - 'bad(['\n", 1)
	bad = strings.Replace(bad, "output_limit: 128KiB", "output_limit: 2MiB", 1)
	if err := os.WriteFile(path, []byte(bad), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = config.Load(path)
	if err == nil {
		t.Fatal("bad redact pattern and output_limit accepted")
	}
	for _, want := range []string{path + ":12:", "bad redact pattern", path + ":9:", "output_limit"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
}

// TestOutputTailMemoryBound: 256 MiB of output read through readLines
// into a tail of the default limit leaves the heap about where it was;
// negative control: the same with the bound lifted (a limit above what is
// printed) grows the heap by at least what was printed, which the same
// measurement sees.
func TestOutputTailMemoryBound(t *testing.T) {
	const printed = 256 << 20
	line := strings.Repeat("y", 999) + "\n"
	feed := func(limit int) uint64 {
		var o *outputTail
		growth := heapGrowth(func() {
			o = newOutputTail(limit, nil)
			readLines(&repeatReader{line: line, left: printed}, nil, func(b []byte) { o.add("out", b) })
		})
		if got := o.snapshot(0).Bytes; got != printed {
			t.Fatalf("read %d bytes, want %d", got, printed)
		}
		return growth
	}
	const bound = 32 << 20
	if g := feed(defaultOutputLimit); g > bound {
		t.Errorf("bounded tail: the heap grew by %d MiB for 256 MiB of output; want at most %d MiB", g>>20, bound>>20)
	}
	if g := feed(1 << 30); g <= bound {
		t.Errorf("negative control: with the bound lifted the heap grew by only %d MiB: the measurement cannot see growth", g>>20)
	}
}

// repeatReader reads line over and over, left bytes in all.
type repeatReader struct {
	line string
	left int
	off  int
}

func (r *repeatReader) Read(p []byte) (int, error) {
	if r.left == 0 {
		return 0, io.EOF
	}
	n := 0
	for n < len(p) && r.left > 0 {
		c := copy(p[n:min(len(p), n+r.left)], r.line[r.off:])
		n, r.left, r.off = n+c, r.left-c, (r.off+c)%len(r.line)
	}
	return n, nil
}

// heapGrowth is the peak of the heap in use while run runs (sampled
// after each of its steps by a ticker) over the heap in use before.
func heapGrowth(run func()) uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	base := ms.HeapInuse
	peak := base
	done := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		tk := time.NewTicker(20 * time.Millisecond)
		defer tk.Stop()
		for {
			var s runtime.MemStats
			runtime.ReadMemStats(&s)
			peak = max(peak, s.HeapInuse)
			select {
			case <-done:
				return
			case <-tk.C:
			}
		}
	}()
	run()
	var s runtime.MemStats
	runtime.ReadMemStats(&s)
	close(done)
	<-sampled
	return max(peak, s.HeapInuse) - base
}

// TestOutputCountsPrintedBytes: Bytes and CutBytes count what the job
// printed, not the redacted text (which may be longer).
func TestOutputCountsPrintedBytes(t *testing.T) {
	o := newOutputTail(64, newRedactor(&Job{Redact: []string{"x"}}))
	o.add("out", []byte("x\n"))
	if out := o.snapshot(0); out.Bytes != 2 || out.CutBytes != 0 || out.Lines[0].Text != redacted {
		t.Errorf("one redacted line: %+v; want 2 bytes printed, none cut", out)
	}
	for range 20 {
		o.add("out", []byte("x\n"))
	}
	if out := o.snapshot(0); out.Bytes != 42 || out.CutBytes != 2*out.CutLines || out.CutLines == 0 {
		t.Errorf("after the cut: %d printed, %d lines and %d bytes cut; want 2 bytes per cut line", out.Bytes, out.CutLines, out.CutBytes)
	}
}
