package config

import (
	"fmt"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// rawConfig is the file as yaml.v3 decodes it. The order of the fields is
// the order messages list the keys in. A `want` tag is the message for a
// value of the wrong kind ("%s": the kind found).
type rawConfig struct {
	ID            text             `yaml:"id"`
	backends      `yaml:",inline"` // the backend sections (backends.go)
	Lease         rawLease         `yaml:"lease"`
	ShutdownGrace duration         `yaml:"shutdown_grace"`
	MaxParallel   integer          `yaml:"max_parallel"`
	Heartbeat     duration         `yaml:"heartbeat"`
	Defaults      rawDefaults      `yaml:"defaults"`
	Jobs          []*rawJob        `yaml:"jobs" want:"must be a list of jobs (each starting with \"- name:\"), not %s"`
}

// rawLease is the lease section.
type rawLease struct {
	TTL   duration `yaml:"ttl"`
	Renew duration `yaml:"renew"`
	Drift fraction `yaml:"drift"`
}

// rawDefaults is the defaults section: the job keys that may be defaulted.
type rawDefaults struct {
	Timezone     text            `yaml:"timezone"`
	KillGrace    duration        `yaml:"kill_grace"`
	Timeout      duration        `yaml:"timeout"`
	Overlap      overlapValue    `yaml:"overlap"`
	Deadline     duration        `yaml:"deadline"`
	Env          map[string]text `yaml:"env"`
	Dir          text            `yaml:"dir"`
	rawFleetKeys `yaml:",inline"`
	rawLimitKeys `yaml:",inline"`
	// rawOutputKeys: config_output.go
	rawOutputKeys `yaml:",inline"`
	rawHookKeys   `yaml:",inline"`
}

// rawFleetKeys are the job keys of "Operating a fleet" (retries, history,
// host targeting, spreading), which the defaults section may set too.
type rawFleetKeys struct {
	Retries        integer  `yaml:"retries"`
	RetryBackoff   duration `yaml:"retry_backoff"`
	RetryOnTimeout boolean  `yaml:"retry_on_timeout"`
	HistoryLimit   integer  `yaml:"history_limit"`
	RunOn          rawRunOn `yaml:"run_on"`
	Candidates     integer  `yaml:"candidates"`
	StandbyDelay   duration `yaml:"standby_delay"`
	Jitter         duration `yaml:"jitter"`
}

// rawRunOn is a job's run_on: which hosts may run it.
type rawRunOn struct {
	Labels map[string]text `yaml:"labels"`
	Hosts  []*text         `yaml:"hosts" want:"must be a list of host name patterns, such as [\"web-*\"], not %s"`
}

// fleetField returns the leaf (or mapping) of a fleet key in r.
func fleetField(r *rawFleetKeys, key string) any {
	return map[string]any{
		"retries": &r.Retries, "retry_backoff": &r.RetryBackoff, "retry_on_timeout": &r.RetryOnTimeout,
		"history_limit": &r.HistoryLimit, "run_on": &r.RunOn, "candidates": &r.Candidates,
		"standby_delay": &r.StandbyDelay, "jitter": &r.Jitter,
	}[key]
}

// rawJob is one item of the jobs list.
type rawJob struct {
	Name         text            `yaml:"name"`
	Schedule     text            `yaml:"schedule"`
	Command      []*text         `yaml:"command" want:"must be a list (exec form), such as [\"/usr/bin/backup\", \"--full\"]; use shell: for a command line"`
	Shell        text            `yaml:"shell"`
	Timeout      duration        `yaml:"timeout"`
	Overlap      overlapValue    `yaml:"overlap"`
	Deadline     duration        `yaml:"deadline"`
	KillGrace    duration        `yaml:"kill_grace"`
	Timezone     text            `yaml:"timezone"`
	Env          map[string]text `yaml:"env"`
	Dir          text            `yaml:"dir"`
	rawFleetKeys `yaml:",inline"`
	rawLimitKeys `yaml:",inline"`
	// rawOutputKeys: config_output.go
	rawOutputKeys `yaml:",inline"`
	rawHookKeys   `yaml:",inline"`
}

// field returns the leaf (or list, or map) of key in r, a *rawJob or a
// *rawDefaults.
func field(r any, key string) any {
	switch r := r.(type) {
	case *rawJob:
		if v := fleetField(&r.rawFleetKeys, key); v != nil {
			return v
		}
		if v := limitField(&r.rawLimitKeys, key); v != nil {
			return v
		}
		if v := outputField(&r.rawOutputKeys, key); v != nil {
			return v
		}
		if v := hookField(&r.rawHookKeys, key); v != nil {
			return v
		}
		return map[string]any{
			"name": &r.Name, "schedule": &r.Schedule, "command": &r.Command, "shell": &r.Shell,
			"timeout": &r.Timeout, "overlap": &r.Overlap, "deadline": &r.Deadline, "kill_grace": &r.KillGrace,
			"timezone": &r.Timezone, "env": &r.Env, "dir": &r.Dir,
		}[key]
	case *rawDefaults:
		if v := fleetField(&r.rawFleetKeys, key); v != nil {
			return v
		}
		if v := limitField(&r.rawLimitKeys, key); v != nil {
			return v
		}
		if v := outputField(&r.rawOutputKeys, key); v != nil {
			return v
		}
		if v := hookField(&r.rawHookKeys, key); v != nil {
			return v
		}
		return map[string]any{
			"timezone": &r.Timezone, "kill_grace": &r.KillGrace, "timeout": &r.Timeout, "overlap": &r.Overlap,
			"deadline": &r.Deadline, "env": &r.Env, "dir": &r.Dir,
		}[key]
	}
	return nil
}

// leaf is what every single value of the file knows about itself. A null
// value is never decoded (yaml.v3 leaves the zero leaf), so it is unset.
type leaf struct {
	set bool   // a value was read
	bad string // why the value could not be read, for a person
}

// scalar returns n's text, or records that n is not a single value.
func (l *leaf) scalar(n *yaml.Node) (string, bool) {
	if n.Kind != yaml.ScalarNode {
		l.bad = "must be a single value, not " + kind(n)
		return "", false
	}
	return n.Value, true
}

// readLeaf reads n into *v with parse, which gets the value as written
// and says in its error, for a person, why it cannot be read; it records
// that (or a value that is not a single one) in l, never fails.
func readLeaf[T any](l *leaf, n *yaml.Node, v *T, parse func(string) (T, error)) error {
	s, ok := l.scalar(n)
	if !ok {
		return nil
	}
	x, err := parse(s)
	if err != nil {
		l.bad = err.Error()
		return nil
	}
	*v, l.set = x, true
	return nil
}

// text is a single value as written: "1.50", "yes" and "007" stay as they
// are.
type text struct {
	leaf
	v string
}

// UnmarshalYAML reads a single value; it records other kinds, never fails.
func (t *text) UnmarshalYAML(n *yaml.Node) error {
	if s, ok := t.scalar(n); ok {
		t.v, t.set = s, true
	}
	return nil
}

// duration is a Go duration such as "30s".
type duration struct {
	leaf
	v time.Duration
}

// UnmarshalYAML reads a Go duration; it records a bad one, never fails.
func (d *duration) UnmarshalYAML(n *yaml.Node) error {
	return readLeaf(&d.leaf, n, &d.v, func(s string) (time.Duration, error) {
		v, err := time.ParseDuration(strings.TrimSpace(s))
		if err != nil {
			return 0, fmt.Errorf("bad duration %q: use a Go duration such as 500ms, 30s, 4m or 1h30m", s)
		}
		return v, nil
	})
}

// fraction is a number such as 0.01.
type fraction struct {
	leaf
	v float64
}

// UnmarshalYAML reads a number; it records a bad one, never fails.
func (f *fraction) UnmarshalYAML(n *yaml.Node) error {
	return readLeaf(&f.leaf, n, &f.v, func(s string) (float64, error) {
		v, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
		if err != nil {
			return 0, fmt.Errorf("bad number %q: want a fraction such as 0.01", s)
		}
		return v, nil
	})
}

// integer is a whole number such as 3.
type integer struct {
	leaf
	v int
}

// UnmarshalYAML reads a whole number; it records a bad one, never fails.
func (i *integer) UnmarshalYAML(n *yaml.Node) error {
	return readLeaf(&i.leaf, n, &i.v, func(s string) (int, error) {
		v, err := strconv.ParseInt(strings.TrimSpace(s), 10, 32)
		if err != nil {
			return 0, fmt.Errorf("bad number %q: want a whole number such as 3", s)
		}
		return int(v), nil
	})
}

// boolean is true or false.
type boolean struct {
	leaf
	v bool
}

// UnmarshalYAML reads true or false; it records anything else, never fails.
func (b *boolean) UnmarshalYAML(n *yaml.Node) error {
	return readLeaf(&b.leaf, n, &b.v, func(s string) (bool, error) {
		switch strings.TrimSpace(s) {
		case "true":
			return true, nil
		case "false":
			return false, nil
		}
		return false, fmt.Errorf("want true or false, not %q", s)
	})
}

// overlapValue is "skip" or "wait".
type overlapValue struct {
	leaf
	v Overlap
}

// UnmarshalYAML reads skip or wait; it records anything else, never fails.
func (o *overlapValue) UnmarshalYAML(n *yaml.Node) error {
	return readLeaf(&o.leaf, n, &o.v, func(s string) (Overlap, error) {
		v, ok := parseOverlap(strings.TrimSpace(s))
		if !ok {
			return v, fmt.Errorf("overlap must be skip or wait, not %q", s)
		}
		return v, nil
	})
}

// unknownKey says that key is not allowed, listing what is, with a guess
// at what was meant.
func unknownKey(key string, allowed []string) string {
	msg := fmt.Sprintf("unknown key %q (allowed: %s)", key, strings.Join(allowed, ", "))
	if strings.Contains(strings.ToLower(key), "pass") && slices.Contains(allowed, "password_file") {
		return msg + "; put the password in the URL or in a file named by password_file"
	}
	best, bestDist := "", 3
	for _, a := range allowed {
		if dist := editDistance(strings.ToLower(key), a); dist < bestDist {
			best, bestDist = a, dist
		}
	}
	if best != "" {
		msg += fmt.Sprintf("; did you mean %q?", best)
	}
	return msg
}

// editDistance is the Levenshtein distance of two short strings.
func editDistance(a, b string) int {
	if len(a) > 64 || len(b) > 64 {
		return math.MaxInt
	}
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// parent is the path of the mapping or list that holds path.
func parent(path string) string {
	if i := strings.LastIndexAny(path, ".["); i >= 0 {
		return path[:i]
	}
	return ""
}

// hasDuplicateKeys reports whether yaml.v3 refuses to decode mapping n
// because a key appears twice in it.
func hasDuplicateKeys(n *yaml.Node) bool {
	if n == nil || n.Kind != yaml.MappingNode {
		return false
	}
	for i := 0; i < len(n.Content); i += 2 {
		for j := i + 2; j < len(n.Content); j += 2 {
			if a, b := n.Content[i], n.Content[j]; a.Kind == b.Kind && a.Value == b.Value {
				return true
			}
		}
	}
	return false
}

// yamlKey is the key of struct field f in the file.
func yamlKey(f reflect.StructField) string {
	name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
	return name
}

// keysOf lists the keys of struct type t in the order of its fields (those
// of an inlined struct at its place).
func keysOf(t reflect.Type) []string {
	var keys []string
	for _, f := range yamlFields(t) {
		keys = append(keys, yamlKey(f))
	}
	return keys
}

// yamlFields lists the fields of struct type t that are keys in the file,
// with the fields of inlined structs (`yaml:",inline"`) in their place.
func yamlFields(t reflect.Type) []reflect.StructField {
	if t == nil || t.Kind() != reflect.Struct {
		return nil
	}
	var out []reflect.StructField
	for i := range t.NumField() {
		f := t.Field(i)
		if _, opts, _ := strings.Cut(f.Tag.Get("yaml"), ","); opts == "inline" {
			out = append(out, yamlFields(f.Type)...)
			continue
		}
		if k := yamlKey(f); k != "" && k != "-" {
			out = append(out, f)
		}
	}
	return out
}

// resolve follows aliases.
func resolve(n *yaml.Node) *yaml.Node {
	for i := 0; n != nil && n.Kind == yaml.AliasNode && i < 64; i++ {
		n = n.Alias
	}
	if n != nil && n.Kind == yaml.AliasNode {
		return nil
	}
	return n
}

// isNull reports whether n is absent or an explicit null ("key:" or "~").
func isNull(n *yaml.Node) bool {
	n = resolve(n)
	return n == nil || (n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null")
}

// kind names n's kind for messages.
func kind(n *yaml.Node) string {
	n = resolve(n)
	if n == nil {
		return "an alias that cannot be resolved"
	}
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	}
	return "a single value"
}

// join appends key to the field path.
func join(field, key string) string {
	if field == "" {
		return key
	}
	return field + "." + key
}

// typeOf is the reflect.Type of T.
func typeOf[T any]() reflect.Type { return reflect.TypeOf((*T)(nil)).Elem() }
