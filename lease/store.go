package lease

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Spaces of entries leasecron keeps beside its leases (Backend.Put). A
// backend stores any space name the same way; these are the ones the
// scheduler and the CLI use.
const (
	// SpacePause holds the fleet-wide pause flags: one entry per job, and
	// PauseAll for `leasecron pause --all`.
	SpacePause = "pause"
	// SpaceHosts holds the hosts' heartbeats (entries with a TTL).
	SpaceHosts = "hosts"
	// SpaceRetry holds each job's retry state: the last failed attempt of
	// its current tick.
	SpaceRetry = "retry"
)

// Entry is a named value in a space of entries (see Backend.Put): a pause
// flag, a host's heartbeat, a job's retry state.
type Entry struct {
	// Name is unique in its space: a job name or a host id.
	Name string
	// Version orders the writes of one entry: Put keeps the entry with the
	// highest version (an expired entry counts as absent).
	Version int64
	// Data is the value, at most MaxEntrySize bytes.
	Data []byte
	// TTL, when positive, makes the entry expire TTL after the Put that
	// stored it, on the store's clock (whole seconds on etcd, rounded up);
	// zero keeps it until a newer version replaces it. Get and List report
	// the TTL it was stored with.
	TTL time.Duration
}

// Record is one entry of a bounded log (see Backend.Append): a run of a
// job.
type Record struct {
	// ID is unique in its log; appending a record whose ID is already in
	// the log changes nothing (a retried Append is harmless).
	ID string
	// At orders the log: Append keeps the newest records by At (ties by
	// ID) and Log returns them newest first. Stores keep it to the
	// millisecond.
	At time.Time
	// Data is the record, at most MaxRecordSize bytes (a run's record
	// holds the tail of the run's output).
	Data []byte
}

// Limits on what Put and Append accept.
const (
	// MaxEntrySize bounds Entry.Data.
	MaxEntrySize = 16 << 10
	// MaxRecordSize bounds Record.Data. It fits every store with room to
	// spare: ZooKeeper's znode data (jute.maxbuffer, 1 MiB by default),
	// etcd's request (--max-request-bytes, 1.5 MiB by default, the record
	// put with its ID key in one transaction), a MySQL MEDIUMBLOB (16 MiB)
	// and max_allowed_packet, PostgreSQL's bytea and a Redis string.
	MaxRecordSize = 512 << 10
	// MaxNameSize bounds space, entry, log and record names.
	MaxNameSize = 200
	// MaxLogLimit bounds the limit of Append (and the n of Log).
	MaxLogLimit = 10_000
)

// Entries is the part of a Backend that keeps small named values beside
// the leases: fleet-wide flags, heartbeats and retry state. On a Redlock
// (several independent servers), a write must reach a quorum and a read
// merges the answers of a quorum or more, keeping the highest version of
// each name, so that a read after a successful write sees it while a
// quorum is up. Names and spaces hold letters, digits, '.', '_', '-', ':',
// '*' and '@' only (see CheckName).
type Entries interface {
	// Put stores e in space unless an entry of the same name with a
	// version >= e.Version is stored there and not expired (then it is a
	// no-op, not an error).
	Put(ctx context.Context, space string, e Entry) error
	// Get returns the entry name of space; ok is false when there is none
	// or it expired.
	Get(ctx context.Context, space, name string) (e Entry, ok bool, err error)
	// List returns the live entries of space, sorted by name.
	List(ctx context.Context, space string) ([]Entry, error)
}

// Logs is the part of a Backend that keeps bounded logs beside the
// leases: the run history of each job.
type Logs interface {
	// Append adds rec to the log named log and then drops its oldest
	// records (by At, then ID) beyond limit, so that a log never holds
	// much more than limit records (concurrent appenders may leave a few
	// more until the next Append). 1 <= limit <= MaxLogLimit.
	Append(ctx context.Context, log string, rec Record, limit int) error
	// Log returns up to n of the newest records of log, newest first (an
	// unknown log is empty, not an error). 1 <= n <= MaxLogLimit.
	Log(ctx context.Context, log string, n int) ([]Record, error)
}

// ErrBadName is matched by the error of a call with an empty, too long or
// ill-formed space, entry, log or record name.
var ErrBadName = errors.New("backend: bad name")

// CheckName returns an error matching ErrBadName unless name is 1 to
// MaxNameSize bytes of letters, digits, '.', '_', '-', ':', '*' and '@'
// and is neither "." nor "..". what says what the name is, for the
// message ("entry name", "log", ...).
func CheckName(what, name string) error {
	if name == "" || len(name) > MaxNameSize || name == "." || name == ".." {
		return fmt.Errorf("%w: %s %q: want 1 to %d characters, not \".\" or \"..\"", ErrBadName, what, name, MaxNameSize)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9',
			c == '.', c == '_', c == '-', c == ':', c == '*', c == '@':
		default:
			return fmt.Errorf("%w: %s %q: character %q at %d: want letters, digits, '.', '_', '-', ':', '*' or '@'", ErrBadName, what, name, c, i)
		}
	}
	return nil
}

// CheckEntry checks what Put accepts: a good space and name, Data within
// MaxEntrySize and a TTL that is not negative.
func CheckEntry(space string, e Entry) error {
	if err := CheckName("space", space); err != nil {
		return err
	}
	if err := CheckName("entry name", e.Name); err != nil {
		return err
	}
	if len(e.Data) > MaxEntrySize {
		return fmt.Errorf("backend: entry %s/%s: %d bytes of data, at most %d", space, e.Name, len(e.Data), MaxEntrySize)
	}
	if e.TTL < 0 {
		return fmt.Errorf("backend: entry %s/%s: negative TTL %s", space, e.Name, e.TTL)
	}
	return nil
}

// CheckRecord checks what Append accepts: a good log name and record ID,
// Data within MaxRecordSize, a non-zero At and 1 <= limit <= MaxLogLimit.
func CheckRecord(log string, rec Record, limit int) error {
	if err := CheckName("log", log); err != nil {
		return err
	}
	if err := CheckName("record id", rec.ID); err != nil {
		return err
	}
	if len(rec.Data) > MaxRecordSize {
		return fmt.Errorf("backend: record %s/%s: %d bytes of data, at most %d", log, rec.ID, len(rec.Data), MaxRecordSize)
	}
	if rec.At.IsZero() {
		return fmt.Errorf("backend: record %s/%s: zero At", log, rec.ID)
	}
	return CheckLimit(limit)
}

// CheckLimit checks the limit of Append or the n of Log.
func CheckLimit(n int) error {
	if n < 1 || n > MaxLogLimit {
		return fmt.Errorf("backend: log limit %d: want 1 to %d", n, MaxLogLimit)
	}
	return nil
}
