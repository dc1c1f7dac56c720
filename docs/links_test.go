package docs_test

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"
)

// markdownFiles are the pages whose links are checked, relative to this
// package's directory.
func markdownFiles(t *testing.T) []string {
	t.Helper()
	pages, err := filepath.Glob("*.md")
	if err != nil {
		t.Fatal(err)
	}
	if len(pages) == 0 {
		t.Fatal("no Markdown pages in docs/")
	}
	return append(pages, "../README.md")
}

// linkPattern matches an inline link or image, [text](target) or
// [text](target "title"), and captures the target.
var linkPattern = regexp.MustCompile(`\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)

// TestMarkdownLinks checks every relative link of the Markdown pages: the
// file or directory it names exists, and a #fragment names a heading of
// the Markdown file it points to (GitHub's anchors).
func TestMarkdownLinks(t *testing.T) {
	anchors := map[string]map[string]bool{}
	anchorsOf := func(path string) (map[string]bool, error) {
		if a, ok := anchors[path]; ok {
			return a, nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		a := headingAnchors(string(src))
		anchors[path] = a
		return a, nil
	}
	checked := 0
	for _, page := range markdownFiles(t) {
		src, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range links(string(src)) {
			if isExternal(l.target) {
				continue
			}
			checked++
			file, fragment, _ := strings.Cut(l.target, "#")
			path := page
			if file != "" {
				path = filepath.Join(filepath.Dir(page), filepath.FromSlash(file))
				if _, err := os.Stat(path); err != nil {
					t.Errorf("%s:%d: link %q: %s does not exist", page, l.line, l.target, path)
					continue
				}
			}
			if fragment == "" {
				continue
			}
			if !strings.HasSuffix(path, ".md") {
				t.Errorf("%s:%d: link %q: an anchor into a file that is not Markdown", page, l.line, l.target)
				continue
			}
			a, err := anchorsOf(path)
			if err != nil {
				t.Errorf("%s:%d: link %q: %v", page, l.line, l.target, err)
				continue
			}
			if !a[fragment] {
				t.Errorf("%s:%d: link %q: %s has no heading with the anchor #%s", page, l.line, l.target, path, fragment)
			}
		}
	}
	if checked < 20 {
		t.Errorf("only %d relative links found: the link parser is broken", checked)
	}
}

// link is one link target and the line it is on.
type link struct {
	target string
	line   int
}

// links returns the link targets of a Markdown page, outside fenced code
// blocks and inline code.
func links(src string) []link {
	var out []link
	inFence := false
	for i, line := range strings.Split(src, "\n") {
		if isFence(line) {
			inFence = !inFence
			continue
		}
		if inFence {
			continue
		}
		for _, m := range linkPattern.FindAllStringSubmatch(stripCodeSpans(line), -1) {
			out = append(out, link{target: m[1], line: i + 1})
		}
	}
	return out
}

// isFence reports whether line opens or closes a fenced code block.
func isFence(line string) bool {
	l := strings.TrimSpace(line)
	return strings.HasPrefix(l, "```") || strings.HasPrefix(l, "~~~")
}

// stripCodeSpans removes inline code (`...`) from a line.
func stripCodeSpans(line string) string {
	var b strings.Builder
	in := false
	for _, r := range line {
		if r == '`' {
			in = !in
			continue
		}
		if !in {
			b.WriteRune(r)
		}
	}
	return b.String()
}

// isExternal reports whether a link target leaves the repository.
func isExternal(target string) bool {
	return strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:")
}

// headingPattern matches an ATX heading and captures its text.
var headingPattern = regexp.MustCompile(`^#{1,6}\s+(.*?)\s*#*\s*$`)

// headingAnchors returns the anchors GitHub gives the headings of a page:
// the heading's text in lower case, without punctuation, spaces as
// hyphens; a repeated anchor gets -1, -2, ...
func headingAnchors(src string) map[string]bool {
	anchors := map[string]bool{}
	seen := map[string]int{}
	inFence := false
	for _, line := range strings.Split(src, "\n") {
		if isFence(line) {
			inFence = !inFence
			continue
		}
		m := headingPattern.FindStringSubmatch(line)
		if inFence || m == nil {
			continue
		}
		slug := slugify(m[1])
		if n := seen[slug]; n > 0 {
			anchors[fmt.Sprintf("%s-%d", slug, n)] = true
		} else {
			anchors[slug] = true
		}
		seen[slug]++
	}
	return anchors
}

// mdLinkText matches a link in a heading, whose text alone counts.
var mdLinkText = regexp.MustCompile(`\[([^\]]*)\]\([^)]*\)`)

// slugify turns a heading's Markdown text into GitHub's anchor for it.
func slugify(heading string) string {
	text := mdLinkText.ReplaceAllString(heading, "$1")
	var b strings.Builder
	for _, r := range strings.ToLower(text) {
		switch {
		case unicode.IsLetter(r) || unicode.IsNumber(r) || r == '-' || r == '_':
			b.WriteRune(r)
		case r == ' ':
			b.WriteRune('-')
		}
	}
	return b.String()
}

// TestSlugify pins the anchor rule on headings of the kinds the pages use.
func TestSlugify(t *testing.T) {
	for heading, want := range map[string]string{
		"Guarantees and their preconditions":                                "guarantees-and-their-preconditions",
		"Redis (Redlock)":                                                   "redis-redlock",
		"Exactly-once effects: the fencing token":                           "exactly-once-effects-the-fencing-token",
		"Something kills the job when every leasecron process dies at once": "something-kills-the-job-when-every-leasecron-process-dies-at-once",
		"`max_parallel` and the `job` label":                                "max_parallel-and-the-job-label",
		"Scale: 100 hosts × 1000 jobs on one tick":                          "scale-100-hosts--1000-jobs-on-one-tick",
	} {
		if got := slugify(heading); got != want {
			t.Errorf("slugify(%q) = %q, want %q", heading, got, want)
		}
	}
}
