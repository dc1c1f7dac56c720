package scheduler

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// rawOutputKeys are the job keys of a run's output kept in the history
// (output_limit, redact, secret_env), which the defaults section may set
// too.
type rawOutputKeys struct {
	OutputLimit byteSize `yaml:"output_limit"`
	Redact      []*text  `yaml:"redact" want:"must be a list of regular expressions, such as [\"token=\\\\S+\"], not %s"`
	SecretEnv   []*text  `yaml:"secret_env" want:"must be a list of environment variable names, such as [DB_PASSWORD], not %s"`
}

// outputKeys are the job keys checkOutputField knows.
var outputKeys = []string{"output_limit", "redact", "secret_env"}

// outputField returns the leaf (or list) of an output key in r.
func outputField(r *rawOutputKeys, key string) any {
	return map[string]any{"output_limit": &r.OutputLimit, "redact": &r.Redact, "secret_env": &r.SecretEnv}[key]
}

// outputJobField copies output key key, v from outputField, into j;
// handled is false when key is not an output key.
func (d *decoder) outputJobField(j *Job, key string, v any, field string) (ok, handled bool) {
	switch key {
	case "output_limit":
		s := v.(*byteSize)
		if !d.take(field, s.leaf) {
			return false, true
		}
		j.OutputLimit = s.v
	case "redact", "secret_env":
		items := d.texts(field, *v.(*[]*text), "empty item")
		if items == nil {
			return false, true
		}
		if key == "redact" {
			j.Redact = items
		} else {
			j.SecretEnv = items
		}
		// Each item at its own line (Validate then finds them failed).
		for i, item := range items {
			if msg := checkOutputItem(key, item); msg != "" {
				f := fmt.Sprintf("%s[%d]", field, i)
				d.fail(d.src.lines[f], f, msg)
			}
		}
	default:
		return false, false
	}
	return true, true
}

// outputChecks reports what is wrong with j's output keys, each bad
// redact pattern or secret_env name at its own line; f names j's fields.
// Values j inherited from the defaults section were reported there.
func (v *validator) outputChecks(j *Job, f func(string) string) {
	for _, key := range outputKeys {
		if src := v.c.src; src != nil && src.inherited[f(key)] != "" {
			continue
		}
		if key == "output_limit" {
			msgs, _ := checkOutputField(j, key)
			for _, msg := range msgs {
				v.errorf(f(key), j.Line, "%s", msg)
			}
			continue
		}
		for i, item := range map[string][]string{"redact": j.Redact, "secret_env": j.SecretEnv}[key] {
			if msg := checkOutputItem(key, item); msg != "" {
				v.errorf(fmt.Sprintf("%s[%d]", f(key), i), j.Line, "%s", msg)
			}
		}
	}
}

// checkOutputItem returns what is wrong with one item of redact or
// secret_env.
func checkOutputItem(key, item string) string {
	switch key {
	case "redact":
		if item == "" {
			return "empty redact pattern: it would match everywhere"
		}
		if _, err := regexp.Compile(item); err != nil {
			return fmt.Sprintf("bad redact pattern %q: %v", item, err)
		}
	case "secret_env":
		if item == "" || strings.ContainsAny(item, "=\x00") {
			return fmt.Sprintf("bad environment variable name %q in secret_env", item)
		}
	}
	return ""
}

// checkOutputField returns what is wrong with output key key of j; ok is
// false when key is not an output key.
func checkOutputField(j *Job, key string) (msgs []string, ok bool) {
	switch key {
	case "output_limit":
		if j.OutputLimit < 0 || j.OutputLimit > maxOutputLimit {
			msgs = append(msgs, fmt.Sprintf("output_limit %d: want 1 to %d bytes (%s; 0 or unset: the default %s)",
				j.OutputLimit, maxOutputLimit, formatSize(maxOutputLimit), formatSize(defaultOutputLimit)))
		}
	case "redact", "secret_env":
		// Item by item where they are read (outputJobField) and in
		// Validate (outputChecks), each at its own line.
	default:
		return nil, false
	}
	return msgs, true
}

// byteSize is a number of bytes: 65536, 64KiB, 64K, 1MiB, 1M (K and M are
// binary: 1024 and 1048576).
type byteSize struct {
	leaf
	v int
}

// UnmarshalYAML reads a size; it records a bad one, never fails.
func (b *byteSize) UnmarshalYAML(n *yaml.Node) error {
	s, ok := b.scalar(n)
	if !ok {
		return nil
	}
	v, err := parseSize(s)
	if err != nil {
		b.bad = err.Error()
		return nil
	}
	b.v, b.set = v, true
	return nil
}

// parseSize reads a byteSize.
func parseSize(s string) (int, error) {
	t := strings.TrimSpace(s)
	mult := 1
	for _, u := range []struct {
		suffix string
		mult   int
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"KB", 1 << 10}, {"MB", 1 << 20}, {"K", 1 << 10}, {"M", 1 << 20}, {"B", 1}} {
		if strings.HasSuffix(t, u.suffix) {
			t, mult = strings.TrimSpace(strings.TrimSuffix(t, u.suffix)), u.mult
			break
		}
	}
	v, err := strconv.ParseInt(t, 10, 32)
	if err != nil || v < 0 || v*int64(mult) > 1<<30 {
		return 0, fmt.Errorf("bad size %q: want bytes such as 65536, 64KiB or 1MiB", s)
	}
	return int(v) * mult, nil
}

// formatSize is n bytes as KiB or MiB when whole.
func formatSize(n int) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return strconv.Itoa(n>>20) + "MiB"
	case n >= 1<<10 && n%(1<<10) == 0:
		return strconv.Itoa(n>>10) + "KiB"
	}
	return strconv.Itoa(n) + "B"
}
