// Command leasecron is a job-coordination daemon for a server fleet: every
// host runs it with the same schedule, and each tick of each job runs on
// exactly one host, under a lease kept in Redis (Redlock), PostgreSQL,
// MySQL, etcd or ZooKeeper.
//
// Usage:
//
//	leasecron <command> [arguments]
//
// Commands:
//
//	run       run the daemon (until SIGTERM/SIGINT; SIGHUP reloads)
//	check     validate a config file
//	status    show every job's lease, next tick and last run, and node health
//	trigger   run one job now, under its lease, and wait for it
//	pause     pause jobs on every host (a fleet-wide flag in the backend)
//	resume    resume paused jobs
//	history   show the last runs of a job, from any host
//	logs      show a job's run output from any host; -f follows a running one
//	exec      run a command under a job's lease, in front of a crontab line
//	import-crontab  turn crontabs into a jobs file
//	version   print the version
//
// Exit codes, for every command:
//
//	0  success
//	1  runtime failure (backend unreachable, lease held, job failed to start, ...)
//	2  usage or config error (bad flags, unknown command or job, invalid config file)
//
// `trigger` exits with the job's own exit code when the job ran and failed
// (128+n when it died of signal n; 1 when it ended without an exit code).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync/atomic"

	"github.com/redis/go-redis/v9"

	"github.com/leasecron/leasecron/config"
	"github.com/leasecron/leasecron/internal/supervisor"
)

// Exit codes of every command.
const (
	exitOK      = 0 // success
	exitFailure = 1 // runtime failure
	exitUsage   = 2 // usage or config error
)

// defaultConfig is the config file used when -c is not given.
const defaultConfig = "/etc/leasecron/jobs.yaml"

func main() {
	// The daemon re-executes itself as the per-job supervisor; that copy must
	// do nothing else.
	if len(os.Args) > 1 && os.Args[1] == supervisor.Arg {
		os.Exit(supervisor.Main(os.Args[2:]))
	}
	// go-redis logs connection-pool retries through a package-level
	// logger (stderr by default); route them into the daemon's log instead.
	rl := &redisLogger{}
	redis.SetLogger(rl)
	m := NewMain(os.Stdout, os.Stderr)
	m.redisLog = rl
	os.Exit(m.Run(context.Background(), os.Args[1:]))
}

// redisLogger passes go-redis's internal log lines to a command's slog
// logger at debug level (the lease client reports the same failures as
// errors); until a command sets its logger they are dropped.
type redisLogger struct {
	log atomic.Pointer[slog.Logger]
}

// Printf implements go-redis's internal logging interface.
func (l *redisLogger) Printf(_ context.Context, format string, v ...any) {
	if lg := l.log.Load(); lg != nil {
		lg.Debug("redis: " + fmt.Sprintf(format, v...))
	}
}

// use makes log the destination of go-redis's log lines (l may be nil).
func (l *redisLogger) use(log *slog.Logger) {
	if l != nil {
		l.log.Store(log)
	}
}

// Main is the leasecron command line: it dispatches to a subcommand and maps
// its error to an exit code. Tests drive the CLI through Main.Run.
type Main struct {
	Stdout io.Writer
	Stderr io.Writer

	// notify replaces sd_notify in `run` (tests); nil means daemon.SdNotify.
	notify func(state string) error
	// redisLog, when set, receives go-redis's log lines (see main).
	redisLog *redisLogger
}

// NewMain returns a Main writing to stdout and stderr.
func NewMain(stdout, stderr io.Writer) *Main {
	return &Main{Stdout: stdout, Stderr: stderr}
}

// command is one subcommand: litestream-style, a type with Run and Usage.
type command interface {
	Run(ctx context.Context, args []string) error
	Usage()
}

func (m *Main) command(name string) command {
	switch name {
	case "run":
		return &RunCommand{stdout: m.Stdout, stderr: m.Stderr, notify: m.notify, redisLog: m.redisLog}
	case "check":
		return &CheckCommand{stdout: m.Stdout, stderr: m.Stderr}
	case "status":
		return &StatusCommand{stdout: m.Stdout, stderr: m.Stderr}
	case "trigger":
		return &TriggerCommand{stdout: m.Stdout, stderr: m.Stderr, redisLog: m.redisLog}
	case "pause":
		return &PauseCommand{stdout: m.Stdout, stderr: m.Stderr}
	case "resume":
		return &PauseCommand{stdout: m.Stdout, stderr: m.Stderr, resume: true}
	case "history":
		return &HistoryCommand{stdout: m.Stdout, stderr: m.Stderr}
	case "logs":
		return &LogsCommand{stdout: m.Stdout, stderr: m.Stderr}
	case "exec":
		return &ExecCommand{stdout: m.Stdout, stderr: m.Stderr, redisLog: m.redisLog}
	case "import-crontab":
		return &ImportCrontabCommand{stdout: m.Stdout, stderr: m.Stderr, stdin: os.Stdin}
	case "version":
		return &VersionCommand{stdout: m.Stdout}
	}
	return nil
}

// Run runs the command named by args[0] with the rest of args and returns
// the process exit code (see the package documentation).
func (m *Main) Run(ctx context.Context, args []string) int {
	if len(args) == 0 {
		m.usage(m.Stderr)
		return exitUsage
	}
	name, rest := args[0], args[1:]
	switch name {
	case "-h", "-help", "--help", "help":
		if name == "help" && len(rest) > 0 {
			if c := m.command(rest[0]); c != nil {
				c.Usage()
				return exitOK
			}
			fmt.Fprintf(m.Stderr, "leasecron help: unknown command %q\n", rest[0])
			return exitUsage
		}
		m.usage(m.Stdout)
		return exitOK
	case "-version", "--version":
		name = "version"
	}
	c := m.command(name)
	if c == nil {
		fmt.Fprintf(m.Stderr, "leasecron: unknown command %q\nRun 'leasecron help' for usage.\n", name)
		return exitUsage
	}
	err := c.Run(ctx, rest)
	if err == nil {
		return exitOK
	}
	if errors.Is(err, flag.ErrHelp) {
		c.Usage()
		return exitOK
	}
	code := exitFailure
	var ue *usageError
	var ce *configError
	var xe *exitError
	switch {
	case errors.As(err, &ue):
		fmt.Fprintf(m.Stderr, "leasecron %s: %v\nRun 'leasecron %s -h' for usage.\n", name, ue.err, name)
		return exitUsage
	case errors.As(err, &xe):
		if xe.err == nil { // already reported by the command
			return xe.code
		}
		code = xe.code
	case errors.As(err, &ce):
		code = exitUsage
	}
	printError(m.Stderr, "leasecron "+name, err)
	return code
}

func (m *Main) usage(w io.Writer) {
	fmt.Fprint(w, `leasecron coordinates scheduled jobs across a fleet: each tick of each job
runs on exactly one host, under a lease kept in Redis (Redlock over N nodes),
PostgreSQL, MySQL, etcd or ZooKeeper: the one backend section of the config.

Usage:

	leasecron <command> [arguments]

Commands:

	run       run the daemon (until SIGTERM/SIGINT; SIGHUP reloads the config)
	check     validate a config file
	status    show every job's lease, next tick and last run, and node health
	trigger   run one job now, under its lease, and wait for it
	pause     pause jobs on every host (a fleet-wide flag in the backend)
	resume    resume paused jobs
	history   show the last runs of a job, from any host
	logs      show a job's run output from any host; -f follows a running one
	exec      run a command under a job's lease, in front of a crontab line
	import-crontab  turn crontabs into a jobs file
	version   print the version

Run 'leasecron help <command>' (or 'leasecron <command> -h') for details.

Exit codes: 0 success, 1 runtime failure, 2 usage or config error
('trigger' exits with the job's own exit code when the job fails).
`)
}

// usageError is a command-line mistake (exit code 2, with a hint to -h).
type usageError struct{ err error }

func (e *usageError) Error() string { return e.err.Error() }
func (e *usageError) Unwrap() error { return e.err }

// checkIDFlag validates an --id value; empty means the flag was not given.
func checkIDFlag(id string) error {
	if id == "" {
		return nil
	}
	if err := config.ValidateID(id); err != nil {
		return usageErrorf("--id: %w", err)
	}
	return nil
}

func usageErrorf(format string, a ...any) error {
	return &usageError{err: fmt.Errorf(format, a...)}
}

// configError is a config file that could not be loaded (exit code 2).
type configError struct{ err error }

func (e *configError) Error() string { return e.err.Error() }
func (e *configError) Unwrap() error { return e.err }

// exitError carries a specific exit code. A nil err means the command has
// already reported the failure itself.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit status %d", e.code)
	}
	return e.err.Error()
}
func (e *exitError) Unwrap() error { return e.err }

// printError writes err after prefix; the members of a joined error (such
// as a config file's list of problems) each go on their own line.
func printError(w io.Writer, prefix string, err error) {
	msgs := errorLines(err)
	if len(msgs) == 1 {
		fmt.Fprintf(w, "%s: %s\n", prefix, msgs[0])
		return
	}
	fmt.Fprintf(w, "%s: %d errors:\n", prefix, len(msgs))
	for _, s := range msgs {
		fmt.Fprintf(w, "  %s\n", s)
	}
}

// errorLines flattens err into one message per member of errors.Join (at
// any depth, through the cmd's own wrappers) and per line.
func errorLines(err error) []string {
	switch e := err.(type) {
	case *configError:
		return errorLines(e.err)
	case *exitError:
		if e.err != nil {
			return errorLines(e.err)
		}
	case interface{ Unwrap() []error }:
		var out []string
		for _, m := range e.Unwrap() {
			if m != nil {
				out = append(out, errorLines(m)...)
			}
		}
		return out
	}
	var out []string
	for _, line := range strings.Split(err.Error(), "\n") {
		if line != "" {
			out = append(out, line)
		}
	}
	return out
}

// newFlagSet returns a flag set that reports errors to the caller instead
// of printing them.
func newFlagSet(name string) *flag.FlagSet {
	fs := flag.NewFlagSet("leasecron "+name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	return fs
}

// configFlag registers -c and --config (the same flag) on fs.
func configFlag(fs *flag.FlagSet) *string {
	config := fs.String("config", defaultConfig, "")
	fs.StringVar(config, "c", defaultConfig, "")
	return config
}

// parseArgs parses flags and positional arguments in any order
// ("trigger JOB -c FILE" works as well as "trigger -c FILE JOB"); "--" ends
// the flags. A flag error is a usage error; -h returns flag.ErrHelp.
func parseArgs(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, err
			}
			return nil, &usageError{err: err}
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return pos, nil
		}
		// fs.Parse stops at the first non-flag argument, or after "--".
		if used := len(args) - len(rest); used > 0 && args[used-1] == "--" {
			return append(pos, rest...), nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

// loadConfig loads path; a failure is a config error (exit code 2).
func loadConfig(path string) (*config.Config, error) {
	cfg, err := config.Load(path)
	if err != nil {
		return nil, &configError{err: err}
	}
	return cfg, nil
}
