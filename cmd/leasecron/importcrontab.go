package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/leasecron/leasecron/internal/crontab"
)

// ImportCrontabCommand turns crontabs into a jobs file.
type ImportCrontabCommand struct {
	stdout, stderr io.Writer
	stdin          io.Reader
}

// Usage prints the command's help.
func (c *ImportCrontabCommand) Usage() {
	fmt.Fprint(c.stderr, `Usage: leasecron import-crontab [--system | --user] [FILE|- ...]

Reads crontabs (a user's crontab by default, or standard input with -;
/etc/crontab and /etc/cron.d/* have a user column and are read as such)
and prints a jobs file for leasecron on standard output: each schedule
line a job with its schedule, command (shell: where the line needs a
shell, the crontab's SHELL where it sets one), env from NAME=value lines
and timezone from CRON_TZ, the comments above it kept. Lines no job can
express (@reboot, a % that feeds standard input) are listed at the top of
the file and on standard error with the reason; none is dropped silently.
The file has a placeholder backend section to edit; it passes 'check'.

  --system   every file has a user column
  --user     no file has a user column (default: by path, /etc/crontab
             and /etc/cron.d/ have one)
`)
}

// Run reads the crontabs and writes the jobs file.
func (c *ImportCrontabCommand) Run(_ context.Context, args []string) error {
	fs := newFlagSet("import-crontab")
	system := fs.Bool("system", false, "")
	user := fs.Bool("user", false, "")
	files, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if *system && *user {
		return usageErrorf("--system and --user exclude each other")
	}
	if len(files) == 0 {
		files = []string{"-"}
	}
	var imp crontabImport
	for _, f := range files {
		if cronIgnores(f) {
			imp.notes = append(imp.notes, importNote{f, "", "cron ignores files of /etc/cron.d whose name has a dot or ends in '~'; not imported"})
			continue
		}
		sys := *system || (!*user && isSystemCrontab(f))
		if err := imp.read(f, c.stdin, sys); err != nil {
			return &configError{err: err}
		}
	}
	if err := imp.write(c.stdout); err != nil {
		return err
	}
	for _, s := range imp.skipped {
		fmt.Fprintf(c.stderr, "not imported: %s: %s\n", s.where, s.reason)
	}
	for _, s := range imp.notes {
		fmt.Fprintf(c.stderr, "note: %s: %s\n", s.where, s.reason)
	}
	fmt.Fprintf(c.stderr, "%s imported, %d lines not imported\n", plural(len(imp.jobs), "job"), len(imp.skipped))
	return nil
}

// hostZone is this host's time zone when it is not UTC ($TZ, else
// /etc/timezone), "" otherwise.
func hostZone() string {
	tz := strings.TrimPrefix(os.Getenv("TZ"), ":")
	if tz == "" {
		b, _ := os.ReadFile("/etc/timezone")
		tz = strings.TrimSpace(string(b))
	}
	switch tz {
	case "", "UTC", "Etc/UTC", "UCT", "Etc/UCT", "GMT", "Etc/GMT", "Universal", "Zulu":
		return ""
	}
	return tz
}

// perHost reports whether a command runs a host's own maintenance
// (run-parts over a cron directory), which must stay in every host's cron.
func perHost(cmd string) bool {
	for _, w := range strings.Fields(cmd) {
		if filepath.Base(strings.Trim(w, `"'();{}`)) == "run-parts" {
			return true
		}
	}
	return false
}

// cronIgnores reports whether cron itself skips this file of
// /etc/cron.d: names with a dot (package leftovers such as .dpkg-old) or
// ending in '~'.
func cronIgnores(path string) bool {
	base := filepath.Base(path)
	return strings.HasPrefix(filepath.Clean(path), "/etc/cron.d/") && (strings.Contains(base, ".") || strings.HasSuffix(base, "~"))
}

// isSystemCrontab reports whether path is a crontab with a user column.
func isSystemCrontab(path string) bool {
	p := filepath.Clean(path)
	return p == "/etc/crontab" || strings.HasPrefix(p, "/etc/cron.d/")
}

// importedJob is one job of the output, with where it came from.
type importedJob struct {
	crontab.Entry
	name  string
	where string
}

type importNote struct{ where, text, reason string }

// crontabImport collects the jobs of every file read.
type crontabImport struct {
	jobs           []importedJob
	skipped, notes []importNote
	names          map[string]bool
	users          map[string]int
}

func (imp *crontabImport) read(path string, stdin io.Reader, system bool) error {
	r, name := stdin, "<stdin>"
	if path != "-" {
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		r, name = f, path
	}
	t, err := crontab.Parse(r, system)
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	if imp.names == nil {
		imp.names, imp.users = map[string]bool{}, map[string]int{}
	}
	for _, s := range t.Skipped {
		imp.skipped = append(imp.skipped, importNote{fmt.Sprintf("%s:%d", name, s.Line), strings.TrimSpace(s.Text), s.Reason})
	}
	for _, s := range t.Notes {
		imp.notes = append(imp.notes, importNote{fmt.Sprintf("%s:%d", name, s.Line), strings.TrimSpace(s.Text), s.Reason})
	}
	for _, e := range t.Entries {
		where := fmt.Sprintf("%s:%d", name, e.Line)
		if perHost(e.Command) {
			imp.skipped = append(imp.skipped, importNote{where, e.Command,
				"run-parts runs a host's own maintenance (logrotate, apt, tmp cleanup): every host must run it, not one host for the fleet; keep it in the host's cron"})
			continue
		}
		j := importedJob{Entry: e, where: where}
		j.name = imp.uniqueName(jobName(e.Command))
		if e.User != "" {
			imp.users[e.User]++
		}
		imp.jobs = append(imp.jobs, j)
	}
	return nil
}

var nameUnsafe = regexp.MustCompile(`[^A-Za-z0-9_.-]+`)

// wrapper is a word in front of the program that says what a line does
// ("cd /srv && ./backup" is "backup", "nice -n 10 flock x rsync" is
// "rsync"): how many operands of its own come before that program, and
// which of its flags take the next word as their value.
type wrapper struct {
	operands   int
	valueFlags string // e.g. "-n -c"
}

var wrappers = map[string]wrapper{
	"cd": {1, ""}, "flock": {1, "-w -E"}, "timeout": {1, "-s -k"}, "sleep": {1, ""}, "test": {1, ""},
	"[": {1, ""}, "]": {}, "!": {}, "&&": {}, "||": {}, ";": {}, "nice": {0, "-n"}, "ionice": {0, "-c -n -p"},
	"env": {}, "sudo": {0, "-u -g"}, "exec": {}, "if": {}, "then": {}, "chronic": {}, "sh": {}, "bash": {},
}

// jobName derives a job name from a command line.
func jobName(cmd string) string {
	words := strings.Fields(cmd)
	var cur wrapper
	skipNext := false
	for i, w := range words {
		w = strings.Trim(w, `"'(){};`)
		base := filepath.Base(w)
		if wr, ok := wrappers[w]; ok || wrappers[base] != (wrapper{}) {
			if !ok {
				wr = wrappers[base]
			}
			cur, skipNext = wr, false
			continue
		}
		switch {
		case skipNext:
			skipNext = false
		case strings.HasPrefix(w, "-"):
			skipNext = cur.valueFlags != "" && strings.Contains(" "+cur.valueFlags+" ", " "+w+" ")
		case cur.operands > 0:
			cur.operands--
		case strings.Contains(w, "=") || w == "":
		case base == "run-parts":
			// Named after the directory it runs.
			for _, d := range words[i+1:] {
				if d = strings.Trim(d, `;}"'`); strings.HasPrefix(d, "/") {
					return sanitizeName("run-parts-" + filepath.Base(d))
				}
			}
			return "run-parts"
		default:
			if n := sanitizeName(base); n != "" {
				return n
			}
		}
	}
	return "job"
}

func sanitizeName(s string) string {
	return strings.Trim(nameUnsafe.ReplaceAllString(s, "-"), "-.")
}

func (imp *crontabImport) uniqueName(base string) string {
	name := base
	for i := 2; imp.names[name]; i++ {
		name = fmt.Sprintf("%s-%d", base, i)
	}
	imp.names[name] = true
	return name
}

// plainWord is a word a shell would pass on unchanged.
var plainWord = regexp.MustCompile(`^[A-Za-z0-9_./:,@+=-]+$`)

// commandOf returns the job's command in exec form when the line needs
// no shell, else nil and the shell line. A shell is needed for quoting,
// redirections and the like, for a leading NAME=value (an environment
// setting, not a program), and when the crontab sets PATH (a program is
// looked up in the job's PATH only by a shell).
func commandOf(e crontab.Entry) ([]string, string) {
	if e.Shell != "" {
		return []string{e.Shell, "-c", e.Command}, ""
	}
	words := strings.Fields(e.Command)
	if len(words) == 0 || strings.Contains(words[0], "=") {
		return nil, e.Command
	}
	for _, v := range e.Env {
		if v.Name == "PATH" && !strings.Contains(words[0], "/") {
			return nil, e.Command
		}
	}
	for _, w := range words {
		if !plainWord.MatchString(w) {
			return nil, e.Command
		}
	}
	return words, ""
}

// write prints the jobs file.
func (imp *crontabImport) write(w io.Writer) error {
	var b strings.Builder
	b.WriteString("# Imported by `leasecron import-crontab`. Every host runs this same file.\n")
	b.WriteString("# The backend: edit it to your servers (see docs/backends.md).\n")
	b.WriteString("redis:\n  nodes: [redis://127.0.0.1:6379/0]\n")
	if len(imp.skipped) > 0 {
		b.WriteString("\n# Not imported; each needs a decision of yours:\n")
		for _, s := range imp.skipped {
			fmt.Fprintf(&b, "#   %s: %s\n#     (%s)\n", s.where, s.text, s.reason)
		}
	}
	if tz := hostZone(); tz != "" {
		fmt.Fprintf(&b, "\n# cron read the schedules in this host's local time, %s:\ndefaults:\n  timezone: %s\n", tz, quoteYAML(tz))
	} else {
		b.WriteString("\n# Schedules are read in UTC unless a job says timezone: (cron reads them in\n# each host's local time, UTC here).\n")
	}
	if len(imp.users) > 0 {
		users := make([]string, 0, len(imp.users))
		for u, n := range imp.users {
			users = append(users, fmt.Sprintf("%s (%d)", u, n))
		}
		sort.Strings(users)
		fmt.Fprintf(&b, "\n# The crontabs ran these jobs as %s; leasecron runs every job as the\n# daemon's user (the shipped unit: leasecron).\n", strings.Join(users, ", "))
	}
	b.WriteString("\njobs:")
	if len(imp.jobs) == 0 {
		b.WriteString(" []")
	}
	b.WriteString("\n")
	for _, j := range imp.jobs {
		for _, c := range j.Comments {
			fmt.Fprintf(&b, "  # %s\n", c)
		}
		user := ""
		if j.User != "" {
			user = ", ran as " + j.User
		}
		fmt.Fprintf(&b, "  - name: %s  # %s%s\n", j.name, j.where, user)
		fmt.Fprintf(&b, "    schedule: %s\n", quoteYAML(j.Schedule))
		if argv, line := commandOf(j.Entry); argv != nil {
			q := make([]string, len(argv))
			for i, a := range argv {
				q[i] = quoteYAML(a)
			}
			fmt.Fprintf(&b, "    command: [%s]\n", strings.Join(q, ", "))
		} else {
			fmt.Fprintf(&b, "    shell: %s\n", quoteYAML(line))
		}
		if j.TimeZone != "" {
			fmt.Fprintf(&b, "    timezone: %s\n", quoteYAML(j.TimeZone))
		}
		if len(j.Env) > 0 {
			b.WriteString("    env:\n")
			for _, v := range j.Env {
				fmt.Fprintf(&b, "      %s: %s\n", quoteYAML(v.Name), quoteYAML(v.Value))
			}
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// quoteYAML is s as a double-quoted YAML scalar (Go's escapes are
// YAML's).
func quoteYAML(s string) string { return strconv.Quote(s) }
