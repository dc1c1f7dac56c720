package scheduler

import (
	"os"
	"regexp"
	"slices"
	"strings"
)

// redacted replaces what a job's redact patterns and secret env values
// match in its output.
const redacted = "[REDACTED]"

// redactor applies a job's redact patterns (regular expressions, RE2
// syntax) and the values of its secret_env variables to each line of its
// output before the line is logged, stored or published. A nil redactor
// changes nothing.
type redactor struct {
	patterns []*regexp.Regexp
	secrets  []string // longest first, so that a secret containing another goes first
}

// newRedactor compiles j's redact patterns (Validate checked them) and
// collects the values of its secret_env variables: from the job's env, or
// else the daemon's environment, which the job inherits.
func newRedactor(j *Job) *redactor {
	r := &redactor{}
	for _, p := range j.Redact {
		if re, err := regexp.Compile(p); err == nil {
			r.patterns = append(r.patterns, re)
		}
	}
	for _, k := range j.SecretEnv {
		v, ok := j.Env[k]
		if !ok {
			v = os.Getenv(k)
		}
		if v != "" {
			r.secrets = append(r.secrets, v)
		}
	}
	slices.SortFunc(r.secrets, func(a, b string) int { return len(b) - len(a) })
	if len(r.patterns) == 0 && len(r.secrets) == 0 {
		return nil
	}
	return r
}

// apply returns line with every secret value and every match of a
// pattern replaced by [REDACTED]. A secret split across two lines (or two
// pieces of a line longer than maxLineBytes) is not seen.
func (r *redactor) apply(line string) string {
	if r == nil {
		return line
	}
	for _, s := range r.secrets {
		line = strings.ReplaceAll(line, s, redacted)
	}
	for _, re := range r.patterns {
		line = re.ReplaceAllLiteralString(line, redacted)
	}
	return line
}
