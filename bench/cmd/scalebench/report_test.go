package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestWriteSection: the section goes between the markers, replacing what
// was there and keeping the rest of the file (leasebench's tables before,
// notes after); without markers it is appended with them; a missing file
// is created.
func TestWriteSection(t *testing.T) {
	path := filepath.Join(t.TempDir(), "BENCHMARKS.md")
	if err := writeSection(path, "one\n"); err != nil {
		t.Fatal(err)
	}
	want := markStart + "\none\n" + markEnd + "\n"
	if b, _ := os.ReadFile(path); string(b) != want {
		t.Fatalf("new file:\n%s\nwant:\n%s", b, want)
	}
	if err := os.WriteFile(path, []byte("# leasebench\ntable"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := writeSection(path, "two\n"); err != nil {
		t.Fatal(err)
	}
	want = "# leasebench\ntable\n\n" + markStart + "\ntwo\n" + markEnd + "\n"
	if b, _ := os.ReadFile(path); string(b) != want {
		t.Fatalf("appended:\n%s\nwant:\n%s", b, want)
	}
	if err := os.WriteFile(path, []byte(want+"\nnotes by hand\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := writeSection(path, "three\n"); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(path)
	want = "# leasebench\ntable\n\n" + markStart + "\nthree\n" + markEnd + "\n\nnotes by hand\n"
	if string(b) != want {
		t.Fatalf("replaced:\n%s\nwant:\n%s", b, want)
	}
	if strings.Count(string(b), markStart) != 1 {
		t.Fatalf("markers doubled:\n%s", b)
	}
}
