package config

import (
	"fmt"
	"regexp"
	"strings"
)

// Output limits.
const (
	// DefaultOutputLimit is output_limit's default: bytes of output kept
	// per run.
	DefaultOutputLimit = 64 << 10
	// MaxOutputLimit is the largest output_limit: with the line framing
	// and JSON escapes the record stays within lease.MaxRecordSize (the
	// encoder drops more lines in the rare case it would not).
	MaxOutputLimit = 256 << 10
)

// rawOutputKeys are the job keys of a run's output kept in the history
// (output_limit, redact, secret_env), which the defaults section may set
// too.
type rawOutputKeys struct {
	OutputLimit size    `yaml:"output_limit"` // limits.go
	Redact      []*text `yaml:"redact" want:"must be a list of regular expressions, such as [\"token=\\\\S+\"], not %s"`
	SecretEnv   []*text `yaml:"secret_env" want:"must be a list of environment variable names, such as [DB_PASSWORD], not %s"`
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
		s := v.(*size)
		if !d.take(field, s.leaf) {
			return false, true
		}
		j.OutputLimit = int(min(s.v, 1<<40)) // checkOutputField reports a limit too large
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
		if j.OutputLimit < 0 || j.OutputLimit > MaxOutputLimit {
			msgs = append(msgs, fmt.Sprintf("output_limit %d: want 1 to %d bytes (%s; 0 or unset: the default %s)",
				j.OutputLimit, MaxOutputLimit, formatSize(MaxOutputLimit), formatSize(DefaultOutputLimit)))
		}
	case "redact", "secret_env":
		// Item by item where they are read (outputJobField) and in
		// Validate (outputChecks), each at its own line.
	default:
		return nil, false
	}
	return msgs, true
}
