package scheduler

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"

	"gopkg.in/yaml.v3"

	"github.com/leasecron/leasecron/lease"
)

// Documented defaults. DefaultConfig and Parse apply them; TestDefaults
// pins each one.
const (
	defaultPrefix        = "leasecron"
	defaultRedisTimeout  = 50 * time.Millisecond
	defaultTTL           = 30 * time.Second
	defaultDrift         = 0.01
	defaultShutdownGrace = 30 * time.Second
	defaultKillGrace     = 5 * time.Second
	defaultTimezone      = "UTC"

	// maxConfigSize bounds what Parse reads.
	maxConfigSize = 8 << 20
	// maxNodes bounds the YAML nodes Parse walks, aliases and merge keys
	// included, so that a small file cannot make it walk a huge tree
	// ("billion laughs").
	maxNodes = 1_000_000
)

// Config is a parsed, validated leasecron config file. Build it with Load or
// Parse, which apply the defaults and call Validate; a Config built in code
// from DefaultConfig must be passed through Validate before use (Validate
// compiles the job schedules).
type Config struct {
	File          string        // path it was loaded from (for messages)
	ID            string        // yaml: id; this host's name in leases, logs and status; default os.Hostname()
	Redis         RedisConfig   // yaml: redis
	Lease         LeaseConfig   // yaml: lease
	ShutdownGrace time.Duration // yaml: shutdown_grace, default 30s: how long running jobs may finish on SIGTERM
	Jobs          []*Job        // yaml: jobs
	// Warnings are problems that do not stop the daemon, such as an even
	// number of Redis nodes; Validate sets them, each naming file, line and
	// field like a ConfigError.
	Warnings []string

	src *source // where each field was in the file; nil for a Config built in code
}

// RedisConfig is the "redis" section: the Redlock nodes.
type RedisConfig struct {
	// Nodes are the URLs of independent Redis masters (redis://, rediss://,
	// redis+sentinel://, redis+cluster://); a lease needs len(Nodes)/2+1 of
	// them. At least one is required.
	Nodes []string
	// Prefix starts every lease key; default "leasecron".
	Prefix string
	// Timeout bounds each request to one node; default 50ms. It must be
	// less than a tenth of Lease.TTL.
	Timeout time.Duration
}

// LeaseConfig is the "lease" section: the Redlock timing.
type LeaseConfig struct {
	// TTL is the validity of one acquisition or renewal; default 30s. It
	// must be at least Renew + the largest KillGrace + a safety margin of
	// 2*Redis.Timeout + TTL*Drift + 2ms + 1s, so that a job whose lease
	// cannot be renewed is dead before the lease runs out.
	TTL time.Duration
	// Renew is how often a held lease is renewed; default TTL/3.
	Renew time.Duration
	// Drift is the clock rate drift allowed between hosts and nodes, as a
	// fraction of TTL; default 0.01, at most 0.1 (exclusive).
	Drift float64
}

// Overlap says what a tick does when the previous run of its job still holds
// the job's lease.
type Overlap int

const (
	// OverlapSkip gives the tick up (the default; yaml "skip").
	OverlapSkip Overlap = iota
	// OverlapWait retries the tick until its deadline (yaml "wait").
	OverlapWait
)

// String returns the yaml spelling: "skip" or "wait".
func (o Overlap) String() string {
	switch o {
	case OverlapSkip:
		return "skip"
	case OverlapWait:
		return "wait"
	}
	return fmt.Sprintf("Overlap(%d)", int(o))
}

// parseOverlap reads the yaml spelling of an Overlap.
func parseOverlap(s string) (Overlap, bool) {
	switch s {
	case "skip":
		return OverlapSkip, true
	case "wait":
		return OverlapWait, true
	}
	return 0, false
}

// Job is one scheduled job. Every field except Name, Schedule, Command and
// Shell may be given a default in the file's "defaults" section; the
// defaults below are those Parse applies when neither sets it.
type Job struct {
	Name     string        // [A-Za-z0-9_.-]+, unique
	Schedule string        // as written: 5 or 6 cron fields, @hourly etc., "@every 30s", with an optional CRON_TZ= prefix
	Command  []string      // exec form (no shell); or
	Shell    string        // a command line run via /bin/sh -c
	Timeout  time.Duration // hard limit for one run; 0 = none
	Overlap  Overlap       // OverlapSkip (default) or OverlapWait
	Deadline time.Duration // how long after its tick a run may still start or be taken over; 0 = until the next tick
	// KillGrace is the time between SIGTERM and SIGKILL when the job is
	// stopped; default 5s.
	KillGrace time.Duration
	// Timezone is the IANA zone the cron spec is read in; default "UTC". A
	// CRON_TZ= or TZ= prefix in the spec wins. "@every" ignores zones.
	Timezone string
	Env      map[string]string // extra environment (defaults.env merged in, the job's own keys win)
	Dir      string            // working directory; "" = the daemon's
	Line     int               // line of the job in the file; 0 for a Job built in code

	sched *schedule // compiled by Validate
	path  string    // "jobs[i]" as in the file, for messages
}

// DefaultConfig returns a Config with every documented default set and no
// nodes or jobs: ID is the hostname, Redis.Prefix "leasecron",
// Redis.Timeout 50ms, Lease.TTL 30s, Lease.Renew 10s (TTL/3), Lease.Drift
// 0.01, ShutdownGrace 30s. Parse decodes a file over it.
func DefaultConfig() *Config {
	host, _ := os.Hostname() // an empty ID is reported by Validate
	return &Config{
		ID:            host,
		Redis:         RedisConfig{Prefix: defaultPrefix, Timeout: defaultRedisTimeout},
		Lease:         LeaseConfig{TTL: defaultTTL, Renew: defaultTTL / 3, Drift: defaultDrift},
		ShutdownGrace: defaultShutdownGrace,
	}
}

// defaultJob returns a Job with the built-in defaults of the fields that
// may be defaulted.
func defaultJob() Job {
	return Job{KillGrace: defaultKillGrace, Timezone: defaultTimezone, Overlap: OverlapSkip}
}

// Job returns the job named name, or nil.
func (c *Config) Job(name string) *Job {
	for _, j := range c.Jobs {
		if j.Name == name {
			return j
		}
	}
	return nil
}

// ConfigError is one problem with a config file. Parse, Load and Validate
// return all of them at once, sorted by line, joined with errors.Join; use
// errors.As to get at one. Its text is
//
//	FILE:LINE: FIELD: MESSAGE
//
// as in `jobs.yaml:12: jobs[2].schedule: bad cron expression "* *":
// expected 5 or 6 fields, found 2`. File, Line and Field are left out when
// unknown. It never contains a password from a node URL.
type ConfigError struct {
	File  string // the config file, as given to Load or Parse
	Line  int    // 1-based; 0 if unknown
	Field string // path of the field, such as "jobs[2].schedule" or "lease.ttl"
	Msg   string // what is wrong, for a person
	Err   error  // underlying error, if any (for errors.Is / errors.As)
}

// Error returns "FILE:LINE: FIELD: MESSAGE".
func (e *ConfigError) Error() string {
	var parts []string
	switch {
	case e.File != "" && e.Line > 0:
		parts = append(parts, e.File+":"+strconv.Itoa(e.Line))
	case e.File != "":
		parts = append(parts, e.File)
	case e.Line > 0:
		parts = append(parts, "line "+strconv.Itoa(e.Line))
	}
	if e.Field != "" {
		parts = append(parts, e.Field)
	}
	msg := e.Msg
	if msg == "" && e.Err != nil {
		msg = e.Err.Error()
	}
	return strings.Join(append(parts, msg), ": ")
}

// Unwrap returns the underlying error.
func (e *ConfigError) Unwrap() error { return e.Err }

// Load reads the config file at path and parses it (see Parse). A file that
// cannot be read is an error that names path.
func Load(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("load config: %w", err)
	}
	return Parse(bytes.NewReader(data), path)
}

// Parse reads a YAML config from r; file names it in messages. It decodes
// the document over DefaultConfig, applies the "defaults" section to every
// job, and validates the result (see Validate). Unknown keys, values of the
// wrong type and bad durations are errors, with the line where they are.
// Every problem found is reported, not just the first: the error is the
// errors.Join of *ConfigError values sorted by line.
//
// YAML anchors, aliases and merge keys ("<<: *common") may be used.
func Parse(r io.Reader, file string) (*Config, error) {
	data, err := io.ReadAll(io.LimitReader(r, maxConfigSize+1))
	if err != nil {
		return nil, joinSorted([]*ConfigError{{File: file, Msg: "cannot read: " + err.Error(), Err: err}})
	}
	if len(data) > maxConfigSize {
		return nil, joinSorted([]*ConfigError{{File: file, Msg: fmt.Sprintf("larger than %d MiB", maxConfigSize>>20)}})
	}
	root, cerr := parseYAML(data, file)
	if cerr != nil {
		return nil, joinSorted([]*ConfigError{cerr})
	}
	c := DefaultConfig()
	c.File = file
	d := &decoder{file: file, src: newSource(), budget: maxNodes}
	d.config(root, c)
	c.src = d.src
	errs := append(d.errs, c.validate()...)
	if len(errs) > 0 {
		return nil, joinSorted(errs)
	}
	return c, nil
}

// yamlLine finds the line number in a yaml.v3 error message.
var yamlLine = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// parseYAML returns the root node of the only document in data (nil for an
// empty file).
func parseYAML(data []byte, file string) (root *yaml.Node, cerr *ConfigError) {
	defer func() {
		if r := recover(); r != nil {
			root, cerr = nil, &ConfigError{File: file, Msg: fmt.Sprintf("not valid YAML (%v)", r)}
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
			e := &ConfigError{File: file, Msg: "not valid YAML: " + strings.TrimPrefix(err.Error(), "yaml: "), Err: err}
			if m := yamlLine.FindStringSubmatch(err.Error()); m != nil {
				e.Line, _ = strconv.Atoi(m[1])
				e.Msg = "not valid YAML: " + m[2]
			}
			return nil, e
		}
		if n > 0 {
			return nil, &ConfigError{File: file, Line: next.Line, Msg: "more than one YAML document (\"---\"); a config file holds one"}
		}
		doc = next
	}
	if doc.Kind == yaml.DocumentNode && len(doc.Content) > 0 {
		return doc.Content[0], nil
	}
	return nil, nil
}

// source remembers where the fields of a parsed Config were, so that
// Validate can name the line.
type source struct {
	lines map[string]int // field path -> line
	// inherited maps a job field that came from the defaults section to
	// the defaults field ("jobs[1].kill_grace" -> "defaults.kill_grace"):
	// a bad default is reported once, where it is written.
	inherited map[string]string
	// failed holds fields that failed to decode: Validate does not report
	// them a second time.
	failed map[string]bool
	// renewDefault is set when the file has no lease.renew (Renew = TTL/3).
	renewDefault bool
}

func newSource() *source {
	return &source{lines: map[string]int{}, inherited: map[string]string{}, failed: map[string]bool{}}
}

// Allowed keys, in the order the docs list them.
var (
	topKeys      = []string{"id", "redis", "lease", "shutdown_grace", "defaults", "jobs"}
	redisKeys    = []string{"nodes", "prefix", "timeout"}
	leaseKeys    = []string{"ttl", "renew", "drift"}
	defaultsKeys = []string{"timezone", "kill_grace", "timeout", "overlap", "deadline", "env", "dir"}
	jobKeys      = []string{"name", "schedule", "command", "shell", "timeout", "overlap", "deadline", "kill_grace", "timezone", "env", "dir"}
)

// decoder walks the YAML node tree into a Config, collecting errors.
type decoder struct {
	file   string
	src    *source
	errs   []*ConfigError
	budget int // nodes left to walk
}

// fail records an error at line for field.
func (d *decoder) fail(line int, field, msg string) {
	d.errs = append(d.errs, &ConfigError{File: d.file, Line: line, Field: field, Msg: msg})
	d.src.failed[field] = true
}

// entry is one key of a mapping.
type entry struct {
	k, v *yaml.Node
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

// spend takes n nodes from the budget; false (reported once) when it is
// used up.
func (d *decoder) spend(line, n int) bool {
	if d.budget < 0 {
		return false
	}
	d.budget -= n + 1
	if d.budget < 0 {
		d.fail(line, "", "too large: too many aliases or merge keys")
		return false
	}
	return true
}

// mapping returns the keys of n, a mapping, with merge keys ("<<") applied.
// allowed lists the accepted keys (nil: any); others are reported with
// their line. A null n is an empty mapping. ok is false when n is not a
// mapping (reported at line, for field).
func (d *decoder) mapping(n *yaml.Node, line int, field string, allowed []string) (m map[string]entry, ok bool) {
	m = map[string]entry{}
	if isNull(n) {
		return m, true
	}
	n = resolve(n)
	if n.Kind != yaml.MappingNode {
		what := "a mapping"
		if allowed != nil {
			what = "a mapping (keys: " + strings.Join(allowed, ", ") + ")"
		}
		d.fail(line, field, fmt.Sprintf("must be %s, not %s", what, kind(n)))
		return nil, false
	}
	d.collect(n, field, allowed, m, 0)
	return m, true
}

// collect adds the keys of mapping n to m. Keys already in m win (they come
// from the mapping that merges n); duplicates within n are errors.
func (d *decoder) collect(n *yaml.Node, field string, allowed []string, m map[string]entry, depth int) {
	if !d.spend(n.Line, len(n.Content)) {
		return
	}
	own := map[string]int{}
	var merges []*yaml.Node
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		rk := resolve(k)
		if rk == nil || rk.Kind != yaml.ScalarNode {
			d.fail(k.Line, field, "a key must be a plain word, not "+kind(k))
			continue
		}
		key := rk.Value
		if key == "<<" && rk.ShortTag() == "!!merge" {
			merges = append(merges, v)
			continue
		}
		path := join(field, key)
		if first, dup := own[key]; dup {
			d.fail(k.Line, path, fmt.Sprintf("duplicate key %q (first at line %d)", key, first))
			continue
		}
		own[key] = k.Line
		if allowed != nil && !slices.Contains(allowed, key) {
			d.fail(k.Line, path, unknownKey(key, allowed))
			continue
		}
		if depth == 0 {
			m[key] = entry{k, v}
		} else if _, set := m[key]; !set {
			m[key] = entry{k, v}
		}
	}
	// Merged mappings: earlier ones win over later ones, and all lose to
	// the keys written here.
	for _, v := range merges {
		if depth >= 16 {
			d.fail(v.Line, field, "merge keys (<<) nested too deeply")
			return
		}
		rv := resolve(v)
		var srcs []*yaml.Node
		switch {
		case rv != nil && rv.Kind == yaml.MappingNode:
			srcs = []*yaml.Node{rv}
		case rv != nil && rv.Kind == yaml.SequenceNode:
			if !d.spend(rv.Line, len(rv.Content)) {
				return
			}
			for _, s := range rv.Content {
				srcs = append(srcs, resolve(s))
			}
		}
		for _, s := range srcs {
			if s == nil || s.Kind != yaml.MappingNode {
				d.fail(v.Line, field, "a merge key (<<) takes a mapping or a list of mappings")
				break
			}
			d.collect(s, field, allowed, m, depth+1)
		}
		if srcs == nil {
			d.fail(v.Line, field, "a merge key (<<) takes a mapping or a list of mappings")
		}
	}
}

// join appends key to the field path.
func join(field, key string) string {
	if field == "" {
		return key
	}
	return field + "." + key
}

// unknownKey says that key is not allowed, listing what is, with a guess
// at what was meant.
func unknownKey(key string, allowed []string) string {
	msg := fmt.Sprintf("unknown key %q (allowed: %s)", key, strings.Join(allowed, ", "))
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

// str decodes a single value as a string; ok is false for null or errors.
func (d *decoder) str(e entry, field string) (string, bool) {
	d.src.lines[field] = e.k.Line
	return d.scalar(e.v, e.k.Line, field)
}

// scalar decodes n as a string, reporting other kinds at line.
func (d *decoder) scalar(n *yaml.Node, line int, field string) (string, bool) {
	if isNull(n) {
		return "", false
	}
	r := resolve(n)
	if r.Kind != yaml.ScalarNode {
		d.fail(line, field, "must be a single value, not "+kind(n))
		return "", false
	}
	return r.Value, true
}

// duration decodes a Go duration string such as "30s".
func (d *decoder) duration(e entry, field string) (time.Duration, bool) {
	s, ok := d.str(e, field)
	if !ok {
		return 0, false
	}
	v, err := time.ParseDuration(strings.TrimSpace(s))
	if err != nil {
		d.fail(e.k.Line, field, fmt.Sprintf("bad duration %q: use a Go duration such as 500ms, 30s, 4m or 1h30m", s))
		return 0, false
	}
	return v, true
}

// config decodes the top level of the file into c.
func (d *decoder) config(root *yaml.Node, c *Config) {
	line := 1
	if root != nil {
		line = root.Line
	}
	top, ok := d.mapping(root, line, "", topKeys)
	if !ok {
		return
	}
	if e, ok := top["id"]; ok {
		if s, ok := d.str(e, "id"); ok && s != "" {
			c.ID = s
		}
	}
	d.src.renewDefault = true
	if e, ok := top["redis"]; ok {
		d.redis(e, &c.Redis)
	}
	if e, ok := top["lease"]; ok {
		d.lease(e, &c.Lease)
	}
	if d.src.renewDefault {
		c.Lease.Renew = c.Lease.TTL / 3
	}
	if e, ok := top["shutdown_grace"]; ok {
		if v, ok := d.duration(e, "shutdown_grace"); ok {
			c.ShutdownGrace = v
		}
	}
	defaults, set := d.defaults(top["defaults"])
	if e, ok := top["jobs"]; ok {
		d.src.lines["jobs"] = e.k.Line
		if !isNull(e.v) {
			seq := resolve(e.v)
			if seq.Kind != yaml.SequenceNode {
				d.fail(e.k.Line, "jobs", "must be a list of jobs (each starting with \"- name:\"), not "+kind(e.v))
				return
			}
			if !d.spend(seq.Line, len(seq.Content)) {
				return
			}
			for i, item := range seq.Content {
				if j := d.job(item, fmt.Sprintf("jobs[%d]", i), defaults, set); j != nil {
					c.Jobs = append(c.Jobs, j)
				}
			}
		}
	}
}

// redis decodes the redis section.
func (d *decoder) redis(e entry, r *RedisConfig) {
	d.src.lines["redis"] = e.k.Line
	m, ok := d.mapping(e.v, e.k.Line, "redis", redisKeys)
	if !ok {
		return
	}
	if e, ok := m["nodes"]; ok {
		d.src.lines["redis.nodes"] = e.k.Line
		if !isNull(e.v) {
			seq := resolve(e.v)
			if seq.Kind != yaml.SequenceNode {
				d.fail(e.k.Line, "redis.nodes", "must be a list of URLs such as redis://host:6379/0, not "+kind(e.v))
			} else if d.spend(seq.Line, len(seq.Content)) {
				for i, item := range seq.Content {
					field := fmt.Sprintf("redis.nodes[%d]", i)
					d.src.lines[field] = item.Line
					if s, ok := d.scalar(item, item.Line, field); ok {
						r.Nodes = append(r.Nodes, s)
					} else if isNull(item) {
						d.fail(item.Line, field, "empty node URL")
					}
				}
			}
		}
	}
	if e, ok := m["prefix"]; ok {
		if s, ok := d.str(e, "redis.prefix"); ok {
			r.Prefix = s
		}
	}
	if e, ok := m["timeout"]; ok {
		if v, ok := d.duration(e, "redis.timeout"); ok {
			r.Timeout = v
		}
	}
}

// lease decodes the lease section.
func (d *decoder) lease(e entry, l *LeaseConfig) {
	d.src.lines["lease"] = e.k.Line
	m, ok := d.mapping(e.v, e.k.Line, "lease", leaseKeys)
	if !ok {
		return
	}
	if e, ok := m["ttl"]; ok {
		if v, ok := d.duration(e, "lease.ttl"); ok {
			l.TTL = v
		}
	}
	if e, ok := m["renew"]; ok {
		if v, ok := d.duration(e, "lease.renew"); ok {
			l.Renew = v
			d.src.renewDefault = false
		} else if d.src.failed["lease.renew"] {
			d.src.renewDefault = false
		}
	}
	if e, ok := m["drift"]; ok {
		if s, ok := d.str(e, "lease.drift"); ok {
			v, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
			if err != nil {
				d.fail(e.k.Line, "lease.drift", fmt.Sprintf("bad number %q: want a fraction such as 0.01", s))
			} else {
				l.Drift = v
			}
		}
	}
}

// defaults decodes the defaults section into a Job holding the defaults,
// and the set of keys it sets. Bad values are reported here, once.
func (d *decoder) defaults(e entry) (Job, map[string]bool) {
	j := defaultJob()
	set := map[string]bool{}
	if e.k == nil {
		return j, set
	}
	d.src.lines["defaults"] = e.k.Line
	m, ok := d.mapping(e.v, e.k.Line, "defaults", defaultsKeys)
	if !ok {
		return j, set
	}
	for _, key := range defaultsKeys {
		if e, ok := m[key]; ok {
			field := "defaults." + key
			if d.jobField(&j, key, e, field) {
				set[key] = true
				if key == "env" {
					continue // checked by jobField
				}
				for _, msg := range checkJobField(&j, key) {
					d.fail(e.k.Line, field, msg)
				}
			}
		}
	}
	return j, set
}

// job decodes one item of the jobs list over the defaults.
func (d *decoder) job(item *yaml.Node, path string, defaults Job, set map[string]bool) *Job {
	d.src.lines[path] = item.Line
	m, ok := d.mapping(item, item.Line, path, jobKeys)
	if !ok {
		return nil
	}
	j := defaults
	j.Env = nil
	if len(defaults.Env) > 0 {
		j.Env = make(map[string]string, len(defaults.Env))
		for k, v := range defaults.Env {
			j.Env[k] = v
		}
	}
	j.Line, j.path = item.Line, path
	for _, key := range jobKeys {
		e, ok := m[key]
		if !ok {
			if set[key] {
				d.src.inherited[path+"."+key] = "defaults." + key
			}
			continue
		}
		d.jobField(&j, key, e, path+"."+key)
	}
	if d.src.failed["defaults.env"] {
		d.src.failed[path+".env"] = true // reported once, at the defaults
	}
	return &j
}

// jobField decodes one job (or defaults) key into j. It returns false if
// the value was null or bad (bad values are reported).
func (d *decoder) jobField(j *Job, key string, e entry, field string) bool {
	switch key {
	case "name", "schedule", "shell", "timezone", "dir":
		s, ok := d.str(e, field)
		if !ok {
			return false
		}
		switch key {
		case "name":
			j.Name = s
		case "schedule":
			j.Schedule = s
		case "shell":
			j.Shell = s
		case "timezone":
			j.Timezone = s
		case "dir":
			j.Dir = s
		}
	case "timeout", "deadline", "kill_grace":
		v, ok := d.duration(e, field)
		if !ok {
			return false
		}
		switch key {
		case "timeout":
			j.Timeout = v
		case "deadline":
			j.Deadline = v
		case "kill_grace":
			j.KillGrace = v
		}
	case "overlap":
		s, ok := d.str(e, field)
		if !ok {
			return false
		}
		o, ok := parseOverlap(strings.TrimSpace(s))
		if !ok {
			d.fail(e.k.Line, field, fmt.Sprintf("overlap must be skip or wait, not %q", s))
			return false
		}
		j.Overlap = o
	case "command":
		d.src.lines[field] = e.k.Line
		if isNull(e.v) {
			return false
		}
		seq := resolve(e.v)
		if seq.Kind != yaml.SequenceNode {
			d.fail(e.k.Line, field, "must be a list (exec form), such as [\"/usr/bin/backup\", \"--full\"]; use shell: for a command line")
			return false
		}
		if !d.spend(seq.Line, len(seq.Content)) {
			return false
		}
		j.Command = []string{}
		for i, item := range seq.Content {
			s, ok := d.scalar(item, item.Line, fmt.Sprintf("%s[%d]", field, i))
			if !ok && isNull(item) {
				d.fail(item.Line, fmt.Sprintf("%s[%d]", field, i), "empty argument; quote it (\"\") if it is meant to be empty")
			}
			j.Command = append(j.Command, s)
		}
	case "env":
		d.src.lines[field] = e.k.Line
		m, ok := d.mapping(e.v, e.k.Line, field, nil)
		if !ok {
			return false
		}
		if isNull(e.v) {
			return false
		}
		own := map[string]string{}
		for k, kv := range m {
			s, _ := d.scalar(kv.v, kv.k.Line, field+"."+k) // null: ""
			d.src.lines[field+"."+k] = kv.k.Line
			own[k] = s
		}
		for _, msg := range checkJobField(&Job{Env: own}, "env") {
			d.fail(e.k.Line, field, msg)
		}
		if j.Env == nil {
			j.Env = map[string]string{}
		}
		for k, s := range own {
			j.Env[k] = s
		}
	}
	return true
}

// checkJobField returns what is wrong with field key of j, a job or the
// defaults, apart from the checks that need the whole job.
func checkJobField(j *Job, key string) []string {
	var msgs []string
	switch key {
	case "timeout", "deadline", "kill_grace":
		v := map[string]time.Duration{"timeout": j.Timeout, "deadline": j.Deadline, "kill_grace": j.KillGrace}[key]
		if v < 0 {
			msgs = append(msgs, fmt.Sprintf("%s %s is negative", key, v))
		}
	case "overlap":
		if j.Overlap != OverlapSkip && j.Overlap != OverlapWait {
			msgs = append(msgs, fmt.Sprintf("overlap must be skip or wait, not %s", j.Overlap))
		}
	case "timezone":
		if _, err := loadLocation(j.Timezone); err != nil {
			msgs = append(msgs, err.Error())
		}
	case "env":
		for _, k := range sortedKeys(j.Env) {
			if k == "" || strings.ContainsAny(k, "=\x00") {
				msgs = append(msgs, fmt.Sprintf("bad environment variable name %q", k))
			}
			if strings.ContainsRune(j.Env[k], 0) {
				msgs = append(msgs, fmt.Sprintf("environment variable %s contains a NUL byte", k))
			}
		}
	case "dir":
		if strings.ContainsRune(j.Dir, 0) {
			msgs = append(msgs, "dir contains a NUL byte")
		}
	}
	return msgs
}

// loadLocation loads a job's time zone ("" is UTC).
func loadLocation(name string) (*time.Location, error) {
	loc, err := time.LoadLocation(name)
	if err != nil {
		return nil, fmt.Errorf("unknown time zone %q: use an IANA name such as UTC or Europe/Berlin", name)
	}
	return loc, nil
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// validator collects the problems of a Config.
type validator struct {
	c    *Config
	errs []*ConfigError
}

// lineOf finds the line of field, or of the closest enclosing field.
func (v *validator) lineOf(field string, fallback int) int {
	if v.c.src == nil {
		return fallback
	}
	for f := field; f != ""; {
		if l, ok := v.c.src.lines[f]; ok {
			return l
		}
		i := strings.LastIndexAny(f, ".[")
		if i < 0 {
			break
		}
		f = f[:i]
	}
	return fallback
}

// problem builds the ConfigError for field; nil if the field already
// failed to decode.
func (v *validator) problem(field string, fallback int, msg string, err error) *ConfigError {
	if src := v.c.src; src != nil {
		if d, ok := src.inherited[field]; ok {
			field = d
		}
		if src.failed[field] {
			return nil
		}
	}
	return &ConfigError{File: v.c.File, Line: v.lineOf(field, fallback), Field: field, Msg: msg, Err: err}
}

func (v *validator) errorf(field string, fallback int, format string, args ...any) {
	if e := v.problem(field, fallback, fmt.Sprintf(format, args...), nil); e != nil {
		v.errs = append(v.errs, e)
	}
}

func (v *validator) warnf(field string, fallback int, format string, args ...any) {
	if e := v.problem(field, fallback, fmt.Sprintf(format, args...), nil); e != nil {
		v.c.Warnings = append(v.c.Warnings, e.Error())
	}
}

// failed reports whether field failed to decode.
func (v *validator) failed(field string) bool {
	return v.c.src != nil && v.c.src.failed[field]
}

// Validate checks the whole config and compiles the job schedules. It
// reports every problem, each naming file, line and field, as the
// errors.Join of *ConfigError values sorted by line; it sets Warnings.
//
// Rules: an ID without spaces; at least one Redis node, each a redis://,
// rediss://, redis+sentinel:// or redis+cluster:// URL with a host, none
// twice (an even number of nodes is only a warning); a non-empty prefix
// without braces; 0 < Redis.Timeout < Lease.TTL/10; 0 < Renew < TTL;
// 0 <= Drift < 0.1; TTL >= Renew + the largest KillGrace + 2*Redis.Timeout
// + TTL*Drift + 2ms + 1s; ShutdownGrace >= 0; for each job a unique name of
// [A-Za-z0-9_.-], a schedule that parses and fires, exactly one of a
// non-empty Command or Shell, a loadable Timezone, overlap skip or wait,
// and no negative durations.
//
// Validate changes the jobs' compiled schedules: do not call it on a Config
// that is in use.
func (c *Config) Validate() error {
	return joinSorted(c.validate())
}

func (c *Config) validate() []*ConfigError {
	v := &validator{c: c}
	c.Warnings = nil
	v.host()
	v.redis()
	v.lease()
	v.jobs()
	v.timing()
	if len(c.Jobs) == 0 && !v.failed("jobs") {
		v.warnf("jobs", 0, "no jobs: the daemon will only idle")
	}
	return v.errs
}

func (v *validator) host() {
	c := v.c
	switch {
	case c.ID == "":
		v.errorf("id", 0, "empty, and the hostname is unknown: set id (or run with --id)")
	default:
		if err := ValidateID(c.ID); err != nil {
			v.errorf("id", 0, "%v", err)
		}
	}
	if c.ShutdownGrace < 0 {
		v.errorf("shutdown_grace", 0, "shutdown_grace %s is negative", c.ShutdownGrace)
	}
}

func (v *validator) redis() {
	r := v.c.Redis
	if len(r.Nodes) == 0 && !v.failed("redis.nodes") {
		v.errorf("redis.nodes", 0, "at least one Redis node is needed (a list of URLs such as redis://127.0.0.1:6379/0)")
	}
	seen := map[string]int{}
	for i, raw := range r.Nodes {
		field := fmt.Sprintf("redis.nodes[%d]", i)
		key, msg := checkNode(raw)
		if msg == "" {
			// What the lease client would refuse at start: options
			// go-redis does not know, say.
			if err := lease.CheckURL(raw); err != nil {
				msg = err.Error()
			}
		}
		if msg != "" {
			v.errorf(field, 0, "%s: %s", lease.Redact(raw), msg)
			continue
		}
		if first, dup := seen[key]; dup {
			other := fmt.Sprintf("redis.nodes[%d]", first)
			where := ""
			if l := v.lineOf(other, 0); l > 0 {
				where = fmt.Sprintf(" (line %d)", l)
			}
			v.errorf(field, 0, "%s: duplicate node: the same server as %s%s; the nodes must be independent Redis masters", lease.Redact(raw), other, where)
			continue
		}
		seen[key] = i
	}
	if n := len(r.Nodes); n > 0 && n%2 == 0 {
		v.warnf("redis.nodes", 0, "%d nodes: an even number survives no more failures than %d would (quorum %d of %d); use an odd number", n, n-1, n/2+1, n)
	}
	switch {
	case r.Prefix == "":
		v.errorf("redis.prefix", 0, "empty key prefix")
	case strings.ContainsAny(r.Prefix, "{} \t\r\n"):
		v.errorf("redis.prefix", 0, "prefix %q must not contain braces or spaces (keys use {hash tags})", r.Prefix)
	}
}

// checkNode checks the syntax of a node URL. It returns a key that is the
// same for two URLs of the same server, or a message that does not quote
// the URL.
func checkNode(raw string) (key, msg string) {
	const want = "want redis://[user:password@]host:port[/db], rediss://, redis+sentinel:// or redis+cluster://"
	if strings.TrimSpace(raw) == "" {
		return "", "empty node URL"
	}
	u, err := url.Parse(raw)
	if err != nil {
		return "", "not a valid URL (" + want + ")"
	}
	switch u.Scheme {
	case "redis", "rediss", "redis+sentinel", "rediss+sentinel", "redis+cluster", "rediss+cluster":
	case "":
		return "", "missing scheme (" + want + ")"
	default:
		return "", fmt.Sprintf("unsupported scheme %q (use redis, rediss, redis+sentinel or redis+cluster)", u.Scheme)
	}
	if u.Opaque != "" || u.Host == "" {
		return "", "missing host:port (" + want + ")"
	}
	host, port := u.Hostname(), u.Port()
	if host == "" {
		return "", "missing host"
	}
	if strings.Contains(u.Host, ":") && port == "" && !strings.HasSuffix(u.Host, "]") {
		return "", "empty port"
	}
	if port == "" {
		port = "6379"
	}
	if p, err := strconv.Atoi(port); err != nil || p < 1 || p > 65535 {
		return "", fmt.Sprintf("bad port %q", port)
	}
	q := u.Query()
	for _, a := range q["addr"] {
		if _, p, err := net.SplitHostPort(a); err != nil || p == "" {
			return "", fmt.Sprintf("bad addr=%q: want host:port", a)
		}
	}
	key = strings.ToLower(host) + ":" + port
	_, kind, _ := strings.Cut(u.Scheme, "+")
	switch kind {
	case "sentinel":
		mn := q.Get("master_name")
		if mn == "" {
			return "", "a redis+sentinel node needs ?master_name=NAME"
		}
		key += "/" + mn
	case "":
		if db := strings.Trim(u.Path, "/"); db != "" {
			if n, err := strconv.Atoi(db); err != nil || n < 0 {
				return "", "bad database number: the path must be empty or a number such as /0"
			}
		}
	}
	return key, ""
}

func (v *validator) lease() {
	c := v.c
	l := c.Lease
	if v.failed("lease.ttl") {
		l.TTL = 0 // unknown: skip the checks against it
	} else if l.TTL <= 0 {
		v.errorf("lease.ttl", 0, "ttl %s must be positive", l.TTL)
	}
	switch {
	case l.Renew <= 0:
		v.errorf("lease.renew", 0, "renew %s must be positive", l.Renew)
	case l.TTL > 0 && l.Renew >= l.TTL:
		v.errorf("lease.renew", 0, "renew %s must be shorter than ttl %s (default ttl/3)", l.Renew, l.TTL)
	}
	if !(l.Drift >= 0 && l.Drift < 0.1) {
		v.errorf("lease.drift", 0, "drift %g must be at least 0 and less than 0.1 (default 0.01)", l.Drift)
	}
	switch t := c.Redis.Timeout; {
	case t <= 0:
		v.errorf("redis.timeout", 0, "timeout %s must be positive", t)
	case l.TTL > 0 && t >= l.TTL/10:
		v.errorf("redis.timeout", 0, "timeout %s must be less than a tenth of lease.ttl (%s): slow nodes would use up the lease", t, l.TTL/10)
	}
}

// timing checks that a job whose lease cannot be renewed can be stopped
// before the lease runs out: ttl >= renew + kill_grace + margin.
func (v *validator) timing() {
	c := v.c
	l, t := c.Lease, c.Redis.Timeout
	if l.TTL <= 0 || l.Renew <= 0 || l.Renew >= l.TTL || !(l.Drift >= 0 && l.Drift < 0.1) || t <= 0 || t >= l.TTL/10 ||
		v.failed("lease.ttl") || v.failed("lease.renew") || v.failed("lease.drift") || v.failed("redis.timeout") {
		return // reported already
	}
	var grace time.Duration
	var worst *Job
	for _, j := range c.Jobs {
		if j.KillGrace > grace {
			grace, worst = j.KillGrace, j
		}
	}
	fixed := 2*t + 2*time.Millisecond + time.Second
	margin := fixed + time.Duration(float64(l.TTL)*l.Drift)
	need := l.Renew + grace + margin
	if l.TTL >= need {
		return
	}
	// The smallest ttl that passes, with ttl*drift (and a default renew)
	// growing with it.
	minTTL, renewNote := ceilMS(float64(l.Renew+grace+fixed)/(1-l.Drift)), ""
	if c.src != nil && c.src.renewDefault {
		minTTL, renewNote = ceilMS(float64(grace+fixed)/(2.0/3-l.Drift)), " (renew stays at its default ttl/3)"
	}
	graceFrom := ""
	if worst != nil {
		graceFrom = fmt.Sprintf(", %s %q", worst.field(c), worst.Name)
	}
	ms := func(d time.Duration) time.Duration { return d.Round(time.Millisecond) }
	msg := fmt.Sprintf("ttl %s is too short: it must cover renew (%s) + the largest kill_grace (%s%s) + a margin of %s (2×redis.timeout + ttl×drift + 2ms + 1s) = %s, so that a job whose lease cannot be renewed is dead before the lease runs out; the minimum ttl is %s%s, or lower kill_grace",
		l.TTL, ms(l.Renew), grace, graceFrom, ms(margin), ms(need), minTTL, renewNote)
	// The line: the ttl if the file has one, else the largest kill_grace.
	line := 0
	if c.src != nil {
		line = c.src.lines["lease.ttl"]
	}
	if line == 0 && worst != nil {
		kg := worst.field(c) + ".kill_grace"
		if c.src != nil {
			if d, ok := c.src.inherited[kg]; ok {
				kg = d
			}
			line = c.src.lines[kg]
		}
		if line == 0 {
			line = worst.Line
		}
	}
	if line == 0 && c.src != nil {
		line = c.src.lines["lease"]
	}
	if !v.failed("lease.ttl") {
		v.errs = append(v.errs, &ConfigError{File: c.File, Line: line, Field: "lease.ttl", Msg: msg})
	}
}

// ceilMS rounds nanoseconds up to a whole millisecond.
func ceilMS(ns float64) time.Duration {
	return time.Duration(math.Ceil(ns/float64(time.Millisecond))) * time.Millisecond
}

// field is the job's path in the file, "jobs[i]".
func (j *Job) field(c *Config) string {
	if j.path != "" {
		return j.path
	}
	return fmt.Sprintf("jobs[%d]", slices.Index(c.Jobs, j))
}

// validJobName matches the characters allowed in a job name.
var validJobName = regexp.MustCompile(`^[A-Za-z0-9_.-]+$`)

func (v *validator) jobs() {
	c := v.c
	names := map[string]*Job{}
	for i, j := range c.Jobs {
		if j == nil {
			v.errorf(fmt.Sprintf("jobs[%d]", i), 0, "nil job")
			continue
		}
		p := j.field(c)
		f := func(key string) string { return p + "." + key }
		j.sched = nil
		switch {
		case j.Name == "":
			v.errorf(f("name"), j.Line, "missing name")
		case !validJobName.MatchString(j.Name):
			v.errorf(f("name"), j.Line, "name %q may only contain letters, digits, '_', '.' and '-'", j.Name)
		default:
			if first, dup := names[j.Name]; dup {
				where := first.field(c)
				if l := v.lineOf(where, first.Line); l > 0 {
					where += fmt.Sprintf(" at line %d", l)
				}
				v.errorf(f("name"), j.Line, "duplicate job name %q (first used by %s)", j.Name, where)
			} else {
				names[j.Name] = j
			}
		}
		hasCmd, hasShell := len(j.Command) > 0, strings.TrimSpace(j.Shell) != ""
		switch {
		case v.failed(f("command")) || v.failed(f("shell")):
		case hasCmd && hasShell:
			v.errorf(f("command"), j.Line, "set command or shell, not both")
		case j.Command != nil && !hasCmd:
			v.errorf(f("command"), j.Line, "command is an empty list")
		case !hasCmd && !hasShell && j.Shell != "":
			v.errorf(f("shell"), j.Line, "shell is blank")
		case !hasCmd && !hasShell:
			v.errorf(f("command"), j.Line, "missing command (exec form, a list) or shell (a command line for /bin/sh -c)")
		case hasCmd && j.Command[0] == "":
			v.errorf(f("command[0]"), j.Line, "the program to run is empty")
		}
		for k, a := range j.Command {
			if strings.ContainsRune(a, 0) {
				v.errorf(f(fmt.Sprintf("command[%d]", k)), j.Line, "contains a NUL byte")
			}
		}
		if strings.ContainsRune(j.Shell, 0) {
			v.errorf(f("shell"), j.Line, "contains a NUL byte")
		}
		for _, key := range []string{"timeout", "deadline", "kill_grace", "overlap", "env", "dir"} {
			for _, msg := range checkJobField(j, key) {
				v.errorf(f(key), j.Line, "%s", msg)
			}
		}
		loc, tzErr := loadLocation(j.Timezone)
		if tzErr != nil {
			if e := v.problem(f("timezone"), j.Line, tzErr.Error(), nil); e != nil {
				v.errs = append(v.errs, e)
			}
		}
		if loc == time.Local {
			v.warnf(f("timezone"), j.Line, "timezone Local depends on each host's TZ: hosts in different zones would compute different ticks")
		}
		if v.failed(f("schedule")) {
			continue
		}
		if strings.TrimSpace(j.Schedule) == "" {
			v.errorf(f("schedule"), j.Line, "missing schedule (such as \"*/5 * * * *\", \"@hourly\" or \"@every 30s\")")
			continue
		}
		sched, err := parseSchedule(j.Schedule, loc)
		if err != nil {
			what := "bad cron expression"
			if s := strings.TrimSpace(j.Schedule); strings.HasPrefix(s, "@every") || strings.HasPrefix(s, "CRON_TZ=") || strings.HasPrefix(s, "TZ=") {
				what = "bad schedule"
			}
			if e := v.problem(f("schedule"), j.Line, fmt.Sprintf("%s %q: %v", what, j.Schedule, err), err); e != nil {
				v.errs = append(v.errs, e)
			}
			continue
		}
		if tzErr == nil {
			j.sched = sched
		}
	}
}

// joinSorted sorts errs by line (stable), drops repeats and joins them;
// nil if there are none.
func joinSorted(errs []*ConfigError) error {
	if len(errs) == 0 {
		return nil
	}
	slices.SortStableFunc(errs, func(a, b *ConfigError) int { return a.Line - b.Line })
	seen := map[string]bool{}
	var out []error
	for _, e := range errs {
		if s := e.Error(); !seen[s] {
			seen[s] = true
			out = append(out, e)
		}
	}
	return errors.Join(out...)
}

// ValidateID reports whether id can name a host in leases, logs and
// status: not empty, at most 255 bytes, no spaces or control characters.
// Load checks the config's id with it; callers that override the id (the
// --id flag) check theirs.
func ValidateID(id string) error {
	switch {
	case id == "":
		return errors.New("host id is empty")
	case len(id) > 255:
		return fmt.Errorf("host id %.20q... is longer than 255 bytes", id)
	case strings.IndexFunc(id, func(r rune) bool { return r <= ' ' || r == 0x7f || !unicode.IsPrint(r) }) >= 0:
		return fmt.Errorf("host id %q contains spaces or control characters", id)
	}
	return nil
}
