package config

import (
	"errors"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/leasecron/leasecron/lease"
)

// validator collects the problems of a Config.
type validator struct {
	c    *Config
	errs []*Error
}

// lineOf finds the line of field, or of the closest enclosing field.
func (v *validator) lineOf(field string, fallback int) int {
	if v.c.src == nil {
		return fallback
	}
	for f := field; f != ""; f = parent(f) {
		if l, ok := v.c.src.lines[f]; ok {
			return l
		}
	}
	return fallback
}

// problem builds the Error for field; nil if the field already
// failed to decode.
func (v *validator) problem(field string, fallback int, msg string, err error) *Error {
	if src := v.c.src; src != nil {
		if d, ok := src.inherited[field]; ok {
			field = d
		}
		if src.isFailed(field) {
			return nil
		}
	}
	return &Error{File: v.c.File, Line: v.lineOf(field, fallback), Field: field, Msg: msg, Err: err}
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
	return v.c.src != nil && v.c.src.isFailed(field)
}

// Validate checks the whole config, compiles the job schedules and reads
// the backend's password file. It reports every problem, each naming file,
// line and field, as the errors.Join of *Error values sorted by line;
// it sets Warnings.
//
// Rules: an ID without spaces; the backend's section (see RedisConfig and
// PostgresConfig); 0 < Timeout() < Lease.TTL/10; 0 < Renew < TTL;
// 0 <= Drift < 0.1; TTL*(1-Drift) >= Renew + the largest KillGrace + the
// kill margin (200ms + 2*Timeout()) + 2*Timeout(); ShutdownGrace >= 0; for each job a unique name of
// [A-Za-z0-9_.-], a schedule that parses and fires, exactly one of a
// non-empty Command or Shell, a loadable Timezone, overlap skip or wait,
// and no negative durations.
//
// Validate changes the jobs' compiled schedules and the password read
// from a password_file: do not call it on a Config that is in use.
func (c *Config) Validate() error {
	return joinSorted(c.validate())
}

func (c *Config) validate() []*Error {
	v := &validator{c: c}
	c.Warnings = nil
	v.host()
	v.backend()
	v.lease()
	v.jobs()
	v.hooks()
	v.fleet()
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

// timeoutField is the key of the backend's request timeout.
func (c *Config) timeoutField() string { return c.backendName() + ".timeout" }

// timeoutOK reports whether the backend's timeout is known and sane
// (else it was reported).
func (v *validator) timeoutOK() bool {
	c := v.c
	t := c.Timeout()
	return c.Backend != nil && !v.failed(c.timeoutField()) && t > 0 && (c.Lease.TTL <= 0 || t < c.Lease.TTL/10)
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
	if c.Backend == nil {
		return // reported
	}
	t, f, dflt := c.Timeout(), c.timeoutField(), ""
	if c.src != nil && c.src.lines[f] == 0 {
		dflt = " (the default)"
	}
	switch {
	case t <= 0:
		v.errorf(f, 0, "timeout %s must be positive", t)
	case l.TTL > 0 && t >= l.TTL/10:
		v.errorf(f, 0, "timeout %s%s must be less than a tenth of lease.ttl (%s): a slow server would use up the lease", t, dflt, l.TTL/10)
	}
}

// timing checks that a job whose lease cannot be renewed is stopped before
// the lease runs out, and that a healthy job is never stopped: ttl·(1−drift)
// ≥ renew + kill_grace + kill margin + 2×timeout. A renewal is due renew
// after the start of the previous one (whose validity is ttl·(1−drift)
// from that start, less the time its round took, up to one timeout) and
// its reply lands within another timeout; SIGTERM comes kill_grace before
// the kill deadline, which is the kill margin before the validity ends.
func (v *validator) timing() {
	c := v.c
	l, t := c.Lease, c.Timeout()
	if l.TTL <= 0 || l.Renew <= 0 || l.Renew >= l.TTL || !(l.Drift >= 0 && l.Drift < 0.1) || !v.timeoutOK() ||
		v.failed("lease.ttl") || v.failed("lease.renew") || v.failed("lease.drift") {
		return // reported already
	}
	var grace time.Duration
	var worst *Job
	for _, j := range c.Jobs {
		if j.KillGrace > grace {
			grace, worst = j.KillGrace, j
		}
	}
	kill := lease.KillMargin(t)
	usable := lease.Usable(l.TTL, l.Drift)
	need := lease.RenewalNeed(l.Renew, grace, t)
	if lease.RenewalFits(l.TTL, l.Drift, l.Renew, grace, t) {
		return
	}
	// The smallest ttl that passes (with a default renew growing with it).
	minTTL, renewNote := ceilMS(float64(need)/(1-l.Drift)), ""
	if c.src != nil && c.src.renewDefault {
		minTTL, renewNote = ceilMS(float64(lease.RenewalNeed(0, grace, t))/(2.0/3-l.Drift)), " (renew stays at its default ttl/3)"
	}
	graceFrom := ""
	if worst != nil {
		graceFrom = fmt.Sprintf(", %s %q", worst.field(c), worst.Name)
	}
	ms := func(d time.Duration) time.Duration { return d.Round(time.Millisecond) }
	msg := fmt.Sprintf("ttl %s is too short: ttl×(1−drift %g) = %s must cover renew (%s) + the largest kill_grace (%s%s) + the kill margin (%s = 200ms + 2×%s) + 2×%s (%s) = %s, so that a renewal's reply reaches the job's supervisor before SIGTERM and a job whose lease cannot be renewed is dead before the lease runs out; the minimum ttl is %s%s, or lower kill_grace or renew",
		l.TTL, l.Drift, ms(usable), ms(l.Renew), grace, graceFrom, ms(kill), c.timeoutField(), c.timeoutField(), ms(2*t), ms(need), minTTL, renewNote)
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
	v.errs = append(v.errs, &Error{File: c.File, Line: line, Field: "lease.ttl", Msg: msg})
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

// ValidJobName reports whether name is a valid job name: letters, digits,
// '_', '.' and '-'.
func ValidJobName(name string) bool { return validJobName.MatchString(name) }

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
		v.command(j, f)
		for _, key := range append(append([]string{"timeout", "deadline", "kill_grace", "overlap", "env", "dir"}, fleetKeys...), limitKeys...) {
			for _, msg := range checkJobField(j, key) {
				v.errorf(f(key), j.Line, "%s", msg)
			}
		}
		v.outputChecks(j, f) // config_output.go
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

// command checks a job's command and shell; f makes a key its field path.
func (v *validator) command(j *Job, f func(string) string) {
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
}

// joinSorted sorts errs by line (stable), drops repeats and joins them;
// nil if there are none.
func joinSorted(errs []*Error) error {
	if len(errs) == 0 {
		return nil
	}
	slices.SortStableFunc(errs, func(a, b *Error) int { return a.Line - b.Line })
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
