package config

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// The order of the job keys, as the docs list them.
var (
	defaultsKeys = keysOf(typeOf[rawDefaults]())
	jobKeys      = keysOf(typeOf[rawJob]())
)

// take reports whether leaf l of field holds a value; a value it could not
// read is reported here.
func (d *decoder) take(field string, l leaf) bool {
	if l.bad != "" {
		d.fail(d.src.lines[field], field, l.bad)
		return false
	}
	return l.set
}

// present reports whether the file has field (null or not).
func (d *decoder) present(field string) bool {
	_, ok := d.src.lines[field]
	return ok
}

// build copies raw, the decoded file, into c.
func (d *decoder) build(raw *rawConfig, c *Config) {
	if d.take("id", raw.ID.leaf) && raw.ID.v != "" {
		c.ID = raw.ID.v
	}
	d.backends(raw, c)
	l := &raw.Lease
	if d.take("lease.ttl", l.TTL.leaf) {
		c.Lease.TTL = l.TTL.v
	}
	d.src.renewDefault = !l.Renew.set && l.Renew.bad == ""
	if d.take("lease.renew", l.Renew.leaf) {
		c.Lease.Renew = l.Renew.v
	}
	if d.src.renewDefault {
		c.Lease.Renew = c.Lease.TTL / 3
	}
	if d.take("lease.drift", l.Drift.leaf) {
		c.Lease.Drift = l.Drift.v
	}
	if d.take("shutdown_grace", raw.ShutdownGrace.leaf) {
		c.ShutdownGrace = raw.ShutdownGrace.v
	}
	if d.take("max_parallel", raw.MaxParallel.leaf) {
		c.MaxParallel = raw.MaxParallel.v
	}
	if d.take("heartbeat", raw.Heartbeat.leaf) {
		c.Heartbeat = raw.Heartbeat.v
	}
	defaults, set := d.defaults(&raw.Defaults)
	// yaml.v3 leaves out of raw.Jobs the items it could not decode at all:
	// those that are not mappings, and mappings with a duplicate key.
	k := 0
	for i, item := range d.itemsOf("jobs") {
		if r := resolve(item); !isNull(r) && (r.Kind != yaml.MappingNode || hasDuplicateKeys(r)) {
			continue
		}
		if k >= len(raw.Jobs) {
			break // cannot happen; never index past yaml.v3's list
		}
		r := raw.Jobs[k]
		k++
		path := fmt.Sprintf("jobs[%d]", i)
		switch {
		case r == nil:
			d.fail(item.Line, path, "empty job: a job is a mapping with name, schedule and command or shell")
		case !d.src.failed[path]:
			c.Jobs = append(c.Jobs, d.job(r, path, defaults, set))
		}
	}
}

// itemsOf returns the items of the list at field path.
func (d *decoder) itemsOf(path string) []*yaml.Node {
	if n := d.seqs[path]; n != nil {
		return n.Content
	}
	return nil
}

// texts reads a list of single values at field (redis.nodes,
// jobs[i].command); a null item is reported with ifNull. It returns nil
// when the list is absent, null or not a list.
func (d *decoder) texts(field string, items []*text, ifNull string) []string {
	if items == nil || d.src.failed[field] {
		return nil
	}
	out := make([]string, 0, len(items))
	for i, t := range items {
		f := fmt.Sprintf("%s[%d]", field, i)
		if t == nil { // null
			d.fail(d.src.lines[f], f, ifNull)
			t = &text{}
		}
		d.take(f, t.leaf)
		out = append(out, t.v)
	}
	return out
}

// defaults reads the defaults section into a Job holding the defaults,
// and the set of keys it sets. Bad values are reported here, once.
func (d *decoder) defaults(r *rawDefaults) (Job, map[string]bool) {
	j := DefaultJob()
	set := map[string]bool{}
	for _, key := range defaultsKeys {
		f := "defaults." + key
		if !d.present(f) || !d.jobField(&j, key, field(r, key), f) {
			continue
		}
		set[key] = true
		if key == "env" {
			continue // checked by jobField
		}
		for _, msg := range checkJobField(&j, key) {
			d.fail(d.src.lines[f], f, msg)
		}
	}
	return j, set
}

// job reads one item of the jobs list over the defaults.
func (d *decoder) job(r *rawJob, path string, defaults Job, set map[string]bool) *Job {
	j := defaults
	j.Env = maps.Clone(defaults.Env)
	j.Line, j.path = d.src.lines[path], path
	for _, key := range jobKeys {
		f := path + "." + key
		if !d.present(f) {
			if set[key] {
				d.src.inherited[f] = "defaults." + key
			}
			continue
		}
		d.jobField(&j, key, field(r, key), f)
	}
	if d.src.failed["defaults.env"] {
		d.src.failed[path+".env"] = true // reported once, at the defaults
	}
	return &j
}

// jobField copies one job (or defaults) key, v from field(), into j. It
// returns false if the value was null or bad (bad values are reported).
func (d *decoder) jobField(j *Job, key string, v any, field string) bool {
	if ok, handled := d.outputJobField(j, key, v, field); handled {
		return ok
	}
	switch v := v.(type) {
	case *text:
		if !d.take(field, v.leaf) {
			return false
		}
		*map[string]*string{"name": &j.Name, "schedule": &j.Schedule, "shell": &j.Shell, "timezone": &j.Timezone, "dir": &j.Dir}[key] = v.v
	case *duration:
		if !d.take(field, v.leaf) {
			return false
		}
		*map[string]*time.Duration{"timeout": &j.Timeout, "deadline": &j.Deadline, "kill_grace": &j.KillGrace,
			"retry_backoff": &j.RetryBackoff, "standby_delay": &j.StandbyDelay, "jitter": &j.Jitter}[key] = v.v
	case *integer:
		if !d.take(field, v.leaf) {
			return false
		}
		*map[string]*int{"retries": &j.Retries, "history_limit": &j.HistoryLimit, "candidates": &j.Candidates,
			"tasks_max": &j.TasksMax}[key] = v.v
	case *fraction:
		if !d.take(field, v.leaf) {
			return false
		}
		j.CPUMax = v.v // cpu_max, the only job key that is a number
	case *size:
		if !d.take(field, v.leaf) {
			return false
		}
		j.MemoryMax = v.v // memory_max
	case *boolean:
		if !d.take(field, v.leaf) {
			return false
		}
		j.RetryOnTimeout = v.v
	case *rawRunOn:
		return d.runOn(j, v, field)
	case **rawHook:
		return d.hook(j, key, *v, field)
	case *overlapValue:
		if !d.take(field, v.leaf) {
			return false
		}
		j.Overlap = v.v
	case *[]*text:
		cmd := d.texts(field, *v, "empty argument; quote it (\"\") if it is meant to be empty")
		if cmd == nil {
			return false
		}
		j.Command = cmd
	case *map[string]text:
		if *v == nil || d.src.isFailed(field) {
			return false
		}
		own := map[string]string{}
		for _, k := range slices.Sorted(maps.Keys(*v)) {
			t := (*v)[k]
			d.take(field+"."+k, t.leaf) // null: ""
			own[k] = t.v
		}
		for _, msg := range checkJobField(&Job{Env: own}, "env") {
			d.fail(d.src.lines[field], field, msg)
		}
		if j.Env == nil {
			j.Env = map[string]string{}
		}
		maps.Copy(j.Env, own)
	default:
		return false
	}
	return true
}

// checkJobField returns what is wrong with field key of j, a job or the
// defaults, apart from the checks that need the whole job.
func checkJobField(j *Job, key string) []string {
	if msgs, ok := checkFleetField(j, key); ok {
		return msgs
	}
	if msgs, ok := checkLimitField(j, key); ok {
		return msgs
	}
	if msgs, ok := checkOutputField(j, key); ok {
		return msgs
	}
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
		for _, k := range slices.Sorted(maps.Keys(j.Env)) {
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
