package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"reflect"
	"regexp"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// Reading a config file takes three steps.
//
//  1. yaml.v3 parses the file into a node tree: syntax errors, a second
//     document, and the size of the tree once aliases and merge keys are
//     expanded ("billion laughs") are checked there.
//  2. A walk of the tree along the types of rawConfig notes the line of
//     every field path ("jobs[1].timeout" -> 12) and says, in our words,
//     where a list or a mapping has the wrong kind of value; yaml.v3 would
//     only say "cannot unmarshal !!str into []config.text".
//  3. yaml.v3 decodes the file into rawConfig with KnownFields(true): it
//     applies anchors, aliases and merge keys, and reports unknown and
//     duplicate keys, each of which is turned into a *Error naming
//     the field path. The leaves of rawConfig (text, duration, ...) are
//     yaml.Unmarshalers that keep a value they cannot read as a message
//     instead of failing, so that every problem is reported.
//
// config_decode.go then builds the Config from rawConfig.

// decoder reads one file into a Config, collecting problems.
type decoder struct {
	file string
	src  *source
	errs []*Error
	keys map[lineKey]string // (line, key) -> field path, to place yaml.v3's messages
	// types are the struct types the walk met, by the name yaml.v3 uses
	// in its messages ("config.rawJob").
	types    map[string]reflect.Type
	seqs     map[string]*yaml.Node // field path -> its list node
	errLines map[int]bool          // lines with a problem already
	stop     bool                  // yaml.v3 would fail as a whole: do not decode
}

type lineKey struct {
	line int
	key  string
}

// source remembers where the fields of a parsed Config were, so that
// Validate can name the line.
type source struct {
	lines map[string]int // field path -> line of its key, or of its list item
	// inherited maps a job field that came from the defaults section to
	// the defaults field ("jobs[1].kill_grace" -> "defaults.kill_grace"):
	// a bad default is reported once, where it is written.
	inherited map[string]string
	// failed holds fields that failed to decode: Validate does not report
	// them, or anything inside them, a second time.
	failed map[string]bool
	// renewDefault is set when the file has no lease.renew (Renew = TTL/3).
	renewDefault bool
	// noBackend is set when the file has no backend section (reported).
	noBackend bool
}

// isFailed reports whether field, or a field that holds it, failed to
// decode.
func (s *source) isFailed(field string) bool {
	for f := field; ; {
		if s.failed[f] {
			return true
		}
		i := strings.LastIndexAny(f, ".[")
		if i < 0 {
			return false
		}
		f = f[:i]
	}
}

// decode reads data (file names it) into a Config over DefaultConfig. It
// returns a nil Config when the file is not a YAML mapping that could be
// decoded at all.
func decode(data []byte, file string) (*Config, []*Error) {
	d := &decoder{
		file:     file,
		src:      &source{lines: map[string]int{}, inherited: map[string]string{}, failed: map[string]bool{}},
		keys:     map[lineKey]string{},
		types:    map[string]reflect.Type{},
		seqs:     map[string]*yaml.Node{},
		errLines: map[int]bool{},
	}
	root, cerr := parseDocument(data, file)
	if cerr != nil {
		return nil, []*Error{cerr}
	}
	if !d.fits(root) {
		return nil, d.errs
	}
	var raw rawConfig
	if root != nil {
		d.walk(root, reflect.TypeOf(raw), "", root.Line, "")
		if d.stop || d.src.failed[""] || hasDuplicateKeys(root) {
			// yaml.v3 would decode nothing: report what the walk found
			// and what yaml.v3 says about the keys.
			d.decodeYAML(data, &raw)
			return nil, d.errs
		}
		if !d.decodeYAML(data, &raw) {
			return nil, d.errs
		}
	}
	c := Default()
	c.File = file
	d.build(&raw, c)
	c.src = d.src
	return c, d.errs
}

// fail records a problem at line for field.
func (d *decoder) fail(line int, field, msg string) {
	d.errs = append(d.errs, &Error{File: d.file, Line: line, Field: field, Msg: msg})
	d.src.failed[field] = true
	d.errLines[line] = true
}

// yamlLine finds the line number in a yaml.v3 error message.
var yamlLine = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// parseDocument returns the root node of the only document in data (nil
// for an empty file).
func parseDocument(data []byte, file string) (root *yaml.Node, cerr *Error) {
	defer func() {
		if r := recover(); r != nil {
			root, cerr = nil, &Error{File: file, Msg: fmt.Sprintf("not valid YAML (%v)", r)}
		}
	}()
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	for n := 0; ; n++ {
		var next yaml.Node
		err := dec.Decode(&next)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			e := &Error{File: file, Msg: "not valid YAML: " + strings.TrimPrefix(err.Error(), "yaml: "), Err: err}
			if m := yamlLine.FindStringSubmatch(err.Error()); m != nil {
				e.Line, _ = strconv.Atoi(m[1])
				e.Msg = "not valid YAML: " + m[2]
			}
			return nil, e
		}
		if n > 0 {
			return nil, &Error{File: file, Line: next.Line, Msg: "more than one YAML document (\"---\"); a config file holds one"}
		}
		doc = next
	}
	if doc.Kind == yaml.DocumentNode && len(doc.Content) > 0 {
		return doc.Content[0], nil
	}
	return nil, nil
}

// fits reports whether the tree under root has at most maxNodes nodes
// with every alias expanded (counted without expanding them); if not, it
// reports the top-level key where the count runs over.
func (d *decoder) fits(root *yaml.Node) bool {
	memo := map[*yaml.Node]int{}
	var size func(n *yaml.Node) int
	size = func(n *yaml.Node) int {
		if s, ok := memo[n]; ok {
			return s
		}
		memo[n] = maxNodes + 1 // a cycle is too large
		s := 1
		if n.Alias != nil {
			s += size(n.Alias)
		}
		for _, c := range n.Content {
			if s > maxNodes {
				break
			}
			s += size(c)
		}
		s = min(s, maxNodes+1)
		memo[n] = s
		return s
	}
	if root == nil || size(root) <= maxNodes {
		return true
	}
	line, field, total := root.Line, "", 1
	if root.Kind == yaml.MappingNode {
		for i := 0; i+1 < len(root.Content); i += 2 {
			if total += size(root.Content[i]) + size(root.Content[i+1]); total > maxNodes {
				line, field = root.Content[i].Line, root.Content[i].Value
				break
			}
		}
	}
	d.fail(line, field, fmt.Sprintf("too large: too many aliases or merge keys (more than %d values once expanded)", maxNodes))
	return false
}

// unmarshalerType is yaml.Unmarshaler: the leaves of rawConfig.
var unmarshalerType = reflect.TypeOf((*yaml.Unmarshaler)(nil)).Elem()

// walk notes the lines of n, the value of field path (written at line),
// and checks that it is the kind of node type t decodes from. want, from
// the field's `want` tag, is the message for a wrong kind ("%s" is the
// kind found).
func (d *decoder) walk(n *yaml.Node, t reflect.Type, path string, line int, want string) {
	n = resolve(n)
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if n == nil || isNull(n) || reflect.PointerTo(t).Implements(unmarshalerType) {
		return // leaves check themselves
	}
	wrong := func(def string) {
		if want == "" {
			want = def + ", not %s"
		}
		d.fail(line, path, strings.ReplaceAll(want, "%s", kind(n)))
	}
	switch t.Kind() {
	case reflect.Struct:
		d.types[t.String()] = t
		if n.Kind != yaml.MappingNode {
			wrong("must be a mapping (keys: " + strings.Join(keysOf(t), ", ") + ")")
			return
		}
		d.mapping(n, path, func(key string) (reflect.Type, string, bool) {
			for _, f := range yamlFields(t) {
				if yamlKey(f) == key {
					return f.Type, f.Tag.Get("want"), true
				}
			}
			return nil, "", false
		}, 0, map[string]bool{})
	case reflect.Map:
		if n.Kind != yaml.MappingNode {
			wrong("must be a mapping")
			return
		}
		d.mapping(n, path, func(string) (reflect.Type, string, bool) { return t.Elem(), "", true }, 0, map[string]bool{})
	case reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			wrong("must be a list")
			return
		}
		d.seqs[path] = n
		for i, item := range n.Content {
			p := fmt.Sprintf("%s[%d]", path, i)
			d.src.lines[p] = item.Line
			d.walk(item, t.Elem(), p, item.Line, "")
		}
	}
}

// mapping walks the keys of n, a mapping at path, and of the mappings it
// merges ("<<"). typeOf gives a key's type and want tag (false: unknown,
// left to yaml.v3). seen holds the keys met so far: the mapping's own keys
// win over merged ones, and earlier merged mappings over later ones, as in
// yaml.v3.
func (d *decoder) mapping(n *yaml.Node, path string, typeOf func(string) (reflect.Type, string, bool), depth int, seen map[string]bool) {
	var merges []*yaml.Node
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		rk := resolve(k)
		if rk == nil || rk.Kind != yaml.ScalarNode {
			d.fail(k.Line, path, "a key must be a plain word, not "+kind(k))
			continue
		}
		if rk.Value == "<<" && rk.ShortTag() == "!!merge" {
			merges = append(merges, v)
			continue
		}
		p := join(path, rk.Value)
		if _, ok := d.keys[lineKey{k.Line, rk.Value}]; !ok {
			d.keys[lineKey{k.Line, rk.Value}] = p
		}
		if seen[rk.Value] {
			continue // a duplicate (yaml.v3 reports it), or merged and overridden
		}
		seen[rk.Value] = true
		d.src.lines[p] = k.Line
		if t, want, ok := typeOf(rk.Value); ok {
			d.walk(v, t, p, k.Line, want)
		}
	}
	for _, m := range merges {
		if depth >= 16 {
			d.fail(m.Line, path, "merge keys (<<) nested too deeply")
			d.stop = true
			return
		}
		var srcs []*yaml.Node
		switch rm := resolve(m); {
		case rm != nil && rm.Kind == yaml.MappingNode:
			srcs = []*yaml.Node{rm}
		case rm != nil && rm.Kind == yaml.SequenceNode:
			for _, s := range rm.Content {
				if s = resolve(s); s == nil || s.Kind != yaml.MappingNode {
					srcs = nil
					break
				}
				srcs = append(srcs, s)
			}
		}
		if srcs == nil {
			// yaml.v3 stops decoding the whole file at such a merge.
			d.fail(m.Line, path, "a merge key (<<) takes a mapping or a list of mappings")
			d.stop = true
			continue
		}
		for _, s := range srcs {
			d.mapping(s, path, typeOf, depth+1, seen)
		}
	}
}

// Messages of yaml.v3's *TypeError.
var (
	yamlUnknownKey = regexp.MustCompile(`^line (\d+): field (.*) not found in type (\S+)$`)
	yamlDuplicate  = regexp.MustCompile(`^line (\d+): mapping key (".*") already defined at line (\d+)$`)
	yamlSetTwice   = regexp.MustCompile(`^line (\d+): field (.*) already set in type (\S+)$`)
	yamlKind       = regexp.MustCompile(`^line (\d+): cannot unmarshal (.*)$`)
)

// decodeYAML decodes data into raw with yaml.v3, strictly, and turns its
// complaints into problems with a field path and our wording. It returns
// false when yaml.v3 gave up part way (raw is then incomplete).
func (d *decoder) decodeYAML(data []byte, raw *rawConfig) bool {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	err := dec.Decode(raw)
	var te *yaml.TypeError
	switch {
	case err == nil || errors.Is(err, io.EOF):
		return true
	case !errors.As(err, &te):
		msg := "cannot decode: " + strings.TrimPrefix(err.Error(), "yaml: ")
		if strings.Contains(err.Error(), "excessive aliasing") {
			msg = "too large: too many aliases or merge keys (yaml.v3: excessive aliasing)"
		}
		if len(d.errs) == 0 { // else one of the failures the walk foresaw
			d.errs = append(d.errs, &Error{File: d.file, Msg: msg, Err: err})
		}
		return false
	}
	for _, msg := range te.Errors {
		if m := yamlUnknownKey.FindStringSubmatch(msg); m != nil {
			line, _ := strconv.Atoi(m[1])
			path := d.pathOf(line, m[2])
			d.fail(line, path, unknownKey(m[2], keysOf(d.types[m[3]])))
		} else if m := yamlDuplicate.FindStringSubmatch(msg); m != nil {
			line, _ := strconv.Atoi(m[1])
			key, _ := strconv.Unquote(m[2])
			path := d.pathOf(line, key)
			d.fail(line, path, fmt.Sprintf("duplicate key %q (first at line %s)", key, m[3]))
			d.src.failed[parent(path)] = true // yaml.v3 decodes none of the mapping
		} else if m := yamlSetTwice.FindStringSubmatch(msg); m != nil {
			line, _ := strconv.Atoi(m[1])
			d.fail(line, d.pathOf(line, m[2]), fmt.Sprintf("duplicate key %q", m[2]))
		} else if m := yamlKind.FindStringSubmatch(msg); m != nil {
			if line, _ := strconv.Atoi(m[1]); !d.errLines[line] { // else said in our words already
				d.fail(line, "", "wrong kind of value: cannot decode "+m[2])
			}
		} else {
			d.errs = append(d.errs, &Error{File: d.file, Msg: msg})
		}
	}
	return true
}

// pathOf is the field path of key written at line.
func (d *decoder) pathOf(line int, key string) string {
	if p, ok := d.keys[lineKey{line, key}]; ok {
		return p
	}
	return key
}
