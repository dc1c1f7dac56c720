package main

import (
	"io"
	"os"
	"path/filepath"
	"testing"
)

// TestWriteKeepingScale: the report replaces what came before the scale
// section; the section and the notes after it stay. Without the marker
// the file is the report alone.
func TestWriteKeepingScale(t *testing.T) {
	path := filepath.Join(t.TempDir(), "BENCHMARKS.md")
	old := "# old report\n\n" + keepFrom + "\nscale rows\n<!-- scalebench:end -->\n\nnotes by hand\n"
	if err := os.WriteFile(path, []byte(old), 0o644); err != nil {
		t.Fatal(err)
	}
	report := func(w io.Writer) error { _, err := io.WriteString(w, "# new report\n"); return err }
	if err := writeKeepingScale(path, report); err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(path)
	want := "# new report\n\n" + keepFrom + "\nscale rows\n<!-- scalebench:end -->\n\nnotes by hand\n"
	if string(got) != want {
		t.Errorf("file =\n%s\nwant\n%s", got, want)
	}
	fresh := filepath.Join(t.TempDir(), "new.md")
	if err := writeKeepingScale(fresh, report); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(fresh); string(got) != "# new report\n" {
		t.Errorf("a new file = %q, want the report alone", got)
	}
}
