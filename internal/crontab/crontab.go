// Package crontab reads crontab files — a user's crontab (`crontab -l`),
// /etc/crontab and /etc/cron.d/* with their user column — into entries
// that leasecron can run as jobs, and says which lines it cannot express
// and why, so that nothing is dropped silently.
//
// It follows the cron of Debian (cronie and Vixie cron alike): NAME=value
// lines set the environment of the lines after them (CRON_TZ sets their
// time zone, SHELL their shell), an unescaped % in a command starts its
// standard input, \% is a literal %, and @reboot runs at boot.
package crontab

import (
	"bufio"
	"fmt"
	"io"
	"regexp"
	"strings"
)

// Entry is one schedule line.
type Entry struct {
	// Line is the 1-based line number in the file.
	Line int
	// Schedule is the five time fields joined by spaces, or a macro such
	// as "@daily".
	Schedule string
	// User is the user column of a system crontab ("" in a user crontab).
	User string
	// Command is the command line, with \% unescaped.
	Command string
	// Shell is the SHELL in force ("" when not set: /bin/sh).
	Shell string
	// TimeZone is the CRON_TZ in force ("" when not set).
	TimeZone string
	// Env is the other NAME=value settings in force, in the order set.
	Env []Var
	// Comments are the comment lines right above the entry, without "#".
	Comments []string
}

// Var is one NAME=value setting.
type Var struct{ Name, Value string }

// Skipped is a line that cannot become a job, with the reason.
type Skipped struct {
	Line   int
	Text   string
	Reason string
}

// Table is what Parse read from one file.
type Table struct {
	Entries []Entry
	// Skipped are the lines no job can express.
	Skipped []Skipped
	// Notes are settings without an equivalent that change no schedule
	// (MAILTO: leasecron keeps output in its journal, not in mail).
	Notes []Skipped
}

// macros are the @ schedules cron knows, as leasecron spells them.
var macros = map[string]string{
	"@yearly": "@yearly", "@annually": "@yearly", "@monthly": "@monthly", "@weekly": "@weekly",
	"@daily": "@daily", "@midnight": "@daily", "@hourly": "@hourly",
}

var envLine = regexp.MustCompile(`^([A-Za-z_][A-Za-z0-9_]*)\s*=\s*(.*)$`)

// Parse reads a crontab. system says whether lines have a user column
// after the schedule (/etc/crontab, /etc/cron.d/*).
func Parse(r io.Reader, system bool) (*Table, error) {
	t := &Table{}
	env := []Var{}
	var shell, tz string
	var comments []string
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	for n := 1; sc.Scan(); n++ {
		raw := sc.Text()
		line := strings.TrimSpace(raw)
		switch {
		case line == "":
			comments = nil
			continue
		case strings.HasPrefix(line, "#"):
			comments = append(comments, strings.TrimSpace(strings.TrimPrefix(line, "#")))
			continue
		}
		if m := envLine.FindStringSubmatch(line); m != nil && !strings.ContainsAny(m[1], " \t") {
			name, value := m[1], unquote(strings.TrimSpace(m[2]))
			switch name {
			case "CRON_TZ":
				tz = value
			case "SHELL":
				shell = value
				if value == "/bin/sh" {
					shell = ""
				}
			case "MAILTO", "MAILFROM":
				t.Notes = append(t.Notes, Skipped{n, raw, name + " has no equivalent: each run's output is in the journal of the host that ran it"})
			default:
				env = setVar(env, name, value)
			}
			comments = nil
			continue
		}
		e, reason := parseEntry(line, system)
		if reason != "" {
			t.Skipped = append(t.Skipped, Skipped{n, raw, reason})
			comments = nil
			continue
		}
		e.Line, e.Shell, e.TimeZone, e.Comments = n, shell, tz, comments
		e.Env = append([]Var(nil), env...)
		t.Entries = append(t.Entries, e)
		comments = nil
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading the crontab: %w", err)
	}
	return t, nil
}

// parseEntry splits a schedule line; a non-empty reason says why it
// cannot be a job.
func parseEntry(line string, system bool) (Entry, string) {
	var e Entry
	nfields := 5
	if strings.HasPrefix(line, "@") {
		nfields = 1
	}
	rest := line
	var fields []string
	for len(fields) < nfields {
		f, r, ok := cutField(rest)
		if !ok {
			return e, "too few fields: want a schedule, " + map[bool]string{true: "a user and ", false: ""}[system] + "a command"
		}
		fields, rest = append(fields, f), r
	}
	if nfields == 1 {
		if fields[0] == "@reboot" {
			return e, "@reboot runs once when a host boots; a fleet-wide schedule has no such tick (use the host's own cron or a systemd unit)"
		}
		m, ok := macros[fields[0]]
		if !ok {
			return e, "unknown schedule " + fields[0]
		}
		e.Schedule = m
	} else {
		e.Schedule = strings.Join(fields, " ")
	}
	if system {
		u, r, ok := cutField(rest)
		if !ok {
			return e, "no command after the user column"
		}
		e.User, rest = u, r
	}
	cmd, stdin := splitPercent(strings.TrimSpace(rest))
	if stdin {
		return e, "an unescaped % sends the rest of the line to the command's standard input, which a job cannot do (write it as a script, or escape it as \\%)"
	}
	if cmd == "" {
		return e, "no command"
	}
	e.Command = cmd
	return e, ""
}

// cutField returns the first whitespace-separated field of s and the rest.
func cutField(s string) (field, rest string, ok bool) {
	s = strings.TrimLeft(s, " \t")
	if s == "" {
		return "", "", false
	}
	i := strings.IndexAny(s, " \t")
	if i < 0 {
		return s, "", true
	}
	return s[:i], s[i:], true
}

// splitPercent unescapes \% and reports whether an unescaped % (the start
// of the command's standard input) is in cmd.
func splitPercent(cmd string) (string, bool) {
	var b strings.Builder
	for i := 0; i < len(cmd); i++ {
		switch {
		case cmd[i] == '\\' && i+1 < len(cmd) && cmd[i+1] == '%':
			b.WriteByte('%')
			i++
		case cmd[i] == '%':
			return b.String(), true
		default:
			b.WriteByte(cmd[i])
		}
	}
	return b.String(), false
}

// unquote strips one pair of matching quotes, as cron does.
func unquote(v string) string {
	if len(v) >= 2 && (v[0] == '"' || v[0] == '\'') && v[len(v)-1] == v[0] {
		return v[1 : len(v)-1]
	}
	return v
}

// setVar sets name in env, keeping the order of first setting.
func setVar(env []Var, name, value string) []Var {
	for i := range env {
		if env[i].Name == name {
			out := append([]Var(nil), env...)
			out[i].Value = value
			return out
		}
	}
	return append(env, Var{name, value})
}
