package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"
	"unicode"
)

// Documented defaults. Default, the sections' constructors and Parse
// apply them; TestDefaults pins each one.
const (
	defaultPrefix          = "leasecron"
	defaultRedisTimeout    = 50 * time.Millisecond
	defaultPostgresTable   = "leasecron_leases"
	defaultPostgresTimeout = 2 * time.Second
	defaultMySQLTable      = "leasecron_leases"
	defaultMySQLTimeout    = 2 * time.Second
	defaultEtcdPrefix      = "/leasecron/"
	defaultEtcdTimeout     = 500 * time.Millisecond
	defaultZooKeeperRoot   = "/leasecron"
	defaultZKTimeout       = time.Second
	defaultTTL             = 30 * time.Second
	defaultDrift           = 0.01
	defaultShutdownGrace   = 30 * time.Second
	defaultKillGrace       = 5 * time.Second
	defaultTimezone        = "UTC"
	defaultRetryBackoff    = 10 * time.Second
	defaultHistoryLimit    = 50
	defaultCandidates      = 3
	defaultHeartbeat       = 5 * time.Second

	// maxConfigSize bounds what Parse reads.
	maxConfigSize = 8 << 20
	// maxNodes bounds the YAML nodes Parse walks, aliases and merge keys
	// expanded, so that a small file cannot make it walk a huge tree
	// ("billion laughs").
	maxNodes = 1_000_000
)

// Config is a parsed, validated leasecron config file. Build it with Load or
// Parse, which apply the defaults and call Validate; a Config built in code
// from Default (with a Backend such as NewRedis) must be passed through
// Validate before use (Validate compiles the job schedules and reads the
// password files).
type Config struct {
	File string // path it was loaded from (for messages)
	ID   string // yaml: id; this host's name in leases, logs and status; default os.Hostname()
	// Backend is the one backend section the file has (yaml: redis,
	// postgres, mysql, etcd or zookeeper; see Section): the store that
	// holds the leases. Open opens it.
	Backend       Section
	Lease         LeaseConfig   // yaml: lease
	ShutdownGrace time.Duration // yaml: shutdown_grace, default 30s: how long running jobs may finish on SIGTERM
	// MaxParallel bounds how many jobs this host runs at once (0: no
	// bound); a tick that finds the host full is left to other hosts.
	// yaml: max_parallel; the --max-parallel flag and LEASECRON_MAX_PARALLEL
	// override it per host.
	MaxParallel int
	// Heartbeat is how often the host announces itself in the backend
	// (host, labels, version, load); an announcement expires after three
	// of them. yaml: heartbeat, default 5s.
	Heartbeat time.Duration
	// Labels are this host's labels, from --label k=v and LEASECRON_LABELS
	// (never from the file: it is the same on every host). Jobs' run_on
	// matches them.
	Labels map[string]string
	Jobs   []*Job // yaml: jobs
	// Warnings are problems that do not stop the daemon, such as an even
	// number of Redis nodes; Validate sets them, each naming file, line and
	// field like an Error.
	Warnings []string

	src *source // where each field was in the file; nil for a Config built in code
}

// LeaseConfig is the "lease" section: the lease timing.
type LeaseConfig struct {
	// TTL is the validity of one acquisition or renewal; default 30s.
	// TTL*(1-Drift) must be at least Renew + the largest KillGrace + the
	// kill margin (200ms + 2*Timeout()) + 2*Timeout(), so that a renewal
	// reaches the job's supervisor before SIGTERM and a job whose lease
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

	// Retries is how many times a failed run (non-zero exit or signal;
	// a timeout only with RetryOnTimeout) of a tick is retried, on any
	// eligible host, within the tick's deadline; default 0.
	Retries int
	// RetryBackoff is the wait before the first retry, doubling for each
	// later one up to maxRetryBackoff; default (and 0) 10s.
	RetryBackoff time.Duration
	// RetryOnTimeout makes a run that hit Timeout a failure to retry.
	RetryOnTimeout bool
	// HistoryLimit is how many run records of the job the backend keeps
	// (`leasecron history`); default (and 0) 50.
	HistoryLimit int
	// RunOn restricts which hosts may run the job; empty: every host.
	RunOn RunOn
	// Candidates is how many hosts (the first of a rendezvous hash of job
	// and host over the live eligible hosts) try each tick at once; the
	// others stand by. 0: every eligible host tries; default 3.
	Candidates int
	// StandbyDelay is how long after the tick the standby hosts try when
	// the tick is still neither held nor completed; 0: a tenth of the
	// tick's deadline, at least 1s and at most 1m.
	StandbyDelay time.Duration
	// Jitter spreads the job's start: each tick T starts at T plus a delay
	// in [0, Jitter) that is the same on every host (a hash of the job
	// and T). The tick (epoch, LEASECRON_TICK) stays T.
	Jitter time.Duration
	// MemoryMax (bytes), CPUMax (a share of one core: 0.5 is half a core)
	// and TasksMax (processes and threads) are the limits of the job's
	// cgroup v2; 0: no limit. A host that cannot apply a job's limits
	// does not run it. At least 4MiB, 0.01 and 4 (see checkLimitField).
	MemoryMax int64
	CPUMax    float64
	TasksMax  int
	// Hooks run on the job's events (on_start, on_success, on_failure,
	// on_missed), each on one host once per event (see hooks.go).
	Hooks Hooks

	// OutputLimit is how many bytes of each run's output (the last ones,
	// cut at a line) its history record keeps; default (and 0) 64KiB.
	OutputLimit int
	// Redact are regular expressions whose matches in the job's output
	// are replaced by [REDACTED] before it is logged, stored or published.
	Redact []string
	// SecretEnv names environment variables whose values are replaced by
	// [REDACTED] in the job's output, like Redact's matches.
	SecretEnv []string

	sched *schedule // compiled by Validate
	path  string    // "jobs[i]" as in the file, for messages
}

// Default returns a Config with every documented default set and no
// backend or jobs: ID is the hostname, Lease.TTL 30s, Lease.Renew 10s
// (TTL/3), Lease.Drift 0.01, ShutdownGrace 30s, Heartbeat 5s. Parse
// decodes a file over it; each backend section starts from its own
// defaults (see NewRedis, NewPostgres, NewMySQL, NewEtcd, NewZooKeeper).
func Default() *Config {
	host, _ := os.Hostname() // an empty ID is reported by Validate
	return &Config{
		ID:            host,
		Lease:         LeaseConfig{TTL: defaultTTL, Renew: defaultTTL / 3, Drift: defaultDrift},
		ShutdownGrace: defaultShutdownGrace,
		Heartbeat:     defaultHeartbeat,
	}
}

// DefaultJob returns a Job with the built-in defaults of the fields that
// may be defaulted: KillGrace 5s, Timezone UTC, Overlap skip, RetryBackoff
// 10s, HistoryLimit 50, Candidates 3.
func DefaultJob() Job {
	return Job{KillGrace: defaultKillGrace, Timezone: defaultTimezone, Overlap: OverlapSkip,
		RetryBackoff: defaultRetryBackoff, HistoryLimit: defaultHistoryLimit, Candidates: defaultCandidates}
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

// Error is one problem with a config file. Parse, Load and Validate
// return all of them at once, sorted by line, joined with errors.Join; use
// errors.As to get at one. Its text is
//
//	FILE:LINE: FIELD: MESSAGE
//
// as in `jobs.yaml:12: jobs[2].schedule: bad cron expression "* *":
// expected 5 or 6 fields, found 2`. File, Line and Field are left out when
// unknown. It never contains a password from a node URL, a postgres URL or
// a password file.
type Error struct {
	File  string // the config file, as given to Load or Parse
	Line  int    // 1-based; 0 if unknown
	Field string // path of the field, such as "jobs[2].schedule" or "lease.ttl"
	Msg   string // what is wrong, for a person
	Err   error  // underlying error, if any (for errors.Is / errors.As)
}

// Error returns "FILE:LINE: FIELD: MESSAGE".
func (e *Error) Error() string {
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
func (e *Error) Unwrap() error { return e.Err }

// Load reads the config file at path and parses it (see Parse). A file that
// cannot be read is an error that names path.
func Load(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("load config: %w", err)
	}
	return Parse(bytes.NewReader(data), path)
}

// Parse reads a YAML config from r; file names it in messages (and
// relative password_file paths are read from file's directory). It
// decodes the document over Default, applies the "defaults" section
// to every job, and validates the result (see Validate). Unknown keys,
// values of the wrong type and bad durations are errors, with the line
// where they are. Every problem found is reported, not just the first: the
// error is the errors.Join of *Error values sorted by line.
//
// The file has exactly one backend section (redis, postgres, mysql, etcd or
// zookeeper); it sets Backend. YAML anchors, aliases and merge keys ("<<: *common") may
// be used.
func Parse(r io.Reader, file string) (*Config, error) {
	data, err := io.ReadAll(io.LimitReader(r, maxConfigSize+1))
	if err != nil {
		return nil, joinSorted([]*Error{{File: file, Msg: "cannot read: " + err.Error(), Err: err}})
	}
	if len(data) > maxConfigSize {
		return nil, joinSorted([]*Error{{File: file, Msg: fmt.Sprintf("larger than %d MiB", maxConfigSize>>20)}})
	}
	c, errs := decode(data, file)
	if c == nil {
		return nil, joinSorted(errs)
	}
	errs = append(errs, c.validate()...)
	if len(errs) > 0 {
		return nil, joinSorted(errs)
	}
	return c, nil
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

// plural is "1 node", "3 nodes".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return strconv.Itoa(n) + " " + noun + "s"
}
