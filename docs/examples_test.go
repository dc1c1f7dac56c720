package docs_test

import (
	"bytes"
	"fmt"
	"go/ast"
	"go/format"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// exampleMarker precedes a quoted example in a page:
// <!-- example: PATH FUNC --> names the Go file (relative to the page) and
// the function whose source the next ```go block must be.
var exampleMarker = regexp.MustCompile(`^<!-- example: (\S+) (\w+) -->$`)

// TestLibraryExamplesQuoted checks that every example quoted in the pages
// is, byte for byte, the function of the compiled example file it names,
// and that the file is gofmt'd: the quote cannot drift from code that
// builds.
func TestLibraryExamplesQuoted(t *testing.T) {
	pages, err := filepath.Glob("*.md")
	if err != nil {
		t.Fatal(err)
	}
	quotes := 0
	for _, page := range pages {
		src, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(string(src), "\n")
		for i, line := range lines {
			m := exampleMarker.FindStringSubmatch(line)
			if m == nil {
				continue
			}
			quotes++
			quoted, ok := fencedGoBlock(lines[i+1:])
			if !ok {
				t.Errorf("%s:%d: no ```go block right after the example marker", page, i+1)
				continue
			}
			want, err := funcSource(filepath.Join(filepath.Dir(page), filepath.FromSlash(m[1])), m[2])
			if err != nil {
				t.Errorf("%s:%d: %v", page, i+1, err)
				continue
			}
			if quoted != want {
				t.Errorf("%s:%d: the quote of %s differs from %s; paste this:\n%s", page, i+1, m[2], m[1], want)
			}
		}
	}
	if quotes == 0 {
		t.Error("no example marker found: library.md must quote a compiled example")
	}
}

// fencedGoBlock returns the body of the ```go block that starts lines.
func fencedGoBlock(lines []string) (string, bool) {
	if len(lines) == 0 || lines[0] != "```go" {
		return "", false
	}
	for j := 1; j < len(lines); j++ {
		if lines[j] == "```" {
			return strings.Join(lines[1:j], "\n"), true
		}
	}
	return "", false
}

// funcSource returns the source of function name in the gofmt'd file path.
func funcSource(path, name string) (string, error) {
	src, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	formatted, err := format.Source(src)
	if err != nil {
		return "", err
	}
	if !bytes.Equal(formatted, src) {
		return "", fmt.Errorf("%s is not gofmt'd", path)
	}
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, src, parser.ParseComments)
	if err != nil {
		return "", err
	}
	for _, d := range f.Decls {
		if fn, ok := d.(*ast.FuncDecl); ok && fn.Name.Name == name && fn.Recv == nil {
			return string(src[fset.Position(fn.Pos()).Offset:fset.Position(fn.End()).Offset]), nil
		}
	}
	return "", fmt.Errorf("%s has no function %s", path, name)
}
