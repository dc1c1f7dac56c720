//go:build linux

package supervisor

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Arg is the first command-line argument that makes the daemon binary run as
// a supervisor: main calls os.Exit(supervisor.Main(os.Args[2:])) when
// os.Args[1] == Arg, before anything else.
const Arg = "__supervise"

// NoDeadlineKillEnv, set to "1" in the daemon's environment, turns the
// supervisor's deadline kill off: a paused or killed daemon's job then runs
// on past its lease. It exists only so tests can show that the fault suite
// catches the overlap that follows (a negative control); never set it in
// production.
const NoDeadlineKillEnv = "LEASECRON_TEST_NO_SUPERVISOR_KILL"

// KillSlack is how long after a deadline the job may still exist on a
// healthy host: the time from the supervisor's SIGKILL to every process of
// the job being gone and reaped. It is a documented bound that the tests
// assert, not a speed target; callers subtract it (or more) from the instant
// by which the job must be dead.
const KillSlack = 100 * time.Millisecond

// ConfirmTimeout bounds how long the supervisor waits, after killing, for
// the job's processes to disappear. A process that survives it is stuck in
// uninterruptible sleep; the exit is then reported with DeadTime 0.
const ConfirmTimeout = 10 * time.Second

// Reasons reported in [Exit].Reason.
const (
	// ReasonExited: the job exited on its own; the supervisor sent nothing.
	ReasonExited = "exited"
	// ReasonDeadline: the deadline came (SIGTERM at Deadline-KillGrace,
	// SIGKILL at Deadline) before the job exited.
	ReasonDeadline = "deadline"
	// ReasonTerminated: [Process.Terminate] was called or the supervisor got
	// SIGTERM.
	ReasonTerminated = "terminated"
	// ReasonDaemonGone: the control pipe closed ([Process.Close], or the
	// daemon exited or was killed).
	ReasonDaemonGone = "daemon-gone"
	// ReasonSuspended: the host was suspended while the job ran
	// (CLOCK_BOOTTIME ran ahead of CLOCK_MONOTONIC by more than 100ms):
	// its lease may have expired on the servers meanwhile, so the job was
	// SIGKILLed as soon as the supervisor saw it, whatever its deadline.
	ReasonSuspended = "suspended"
	// ReasonSupervisorLost: the supervisor died without reporting (it was
	// SIGKILLed, for example). The job's whole process group was SIGKILLed
	// by Wait, in the daemon.
	ReasonSupervisorLost = "supervisor-lost"
)

// Errors returned by this package; test them with errors.Is.
var (
	// ErrDeadlinePassed: the deadline had passed before the job could be
	// started, so it was not started.
	ErrDeadlinePassed = errors.New("supervisor: deadline already passed")
	// ErrStart: the supervisor could not start the job (no such program,
	// bad directory, ...). The error text says why.
	ErrStart = errors.New("supervisor: cannot start job")
	// ErrSupervisorLost: the supervisor exited without reporting the job's
	// exit.
	ErrSupervisorLost = errors.New("supervisor: supervisor exited without a report")
	// ErrNotConfirmedDead: the supervisor could not confirm, within
	// ConfirmTimeout after killing, that every process of the job was gone.
	ErrNotConfirmedDead = errors.New("supervisor: job processes not confirmed dead")
	// ErrClosed: the control pipe was closed by Close or Wait.
	ErrClosed = errors.New("supervisor: control pipe closed")
	// ErrLimits: the Spec's Limits cannot be applied with its Containment
	// (see Containment.CanLimit), or writing them to the job's cgroup
	// failed; the job was not started.
	ErrLimits = errors.New("supervisor: limits cannot be applied")
	// ErrInvalidSpec: the Spec has no Path or a negative KillGrace.
	ErrInvalidSpec = errors.New("supervisor: invalid spec")
)

// File descriptors of the pipes in the supervisor (exec.Cmd.ExtraFiles
// start at 3).
const (
	specFD    = 3 // daemon -> supervisor: one JSON wireSpec, then EOF
	controlFD = 4 // daemon -> supervisor: control lines
	statusFD  = 5 // supervisor -> daemon: JSON status lines
)

// exitSetup is the supervisor's exit code when it could not start the job.
const exitSetup = 125

// wireSpec is the JSON form of Spec sent to the supervisor.
type wireSpec struct {
	Path      string   `json:"path"`
	Args      []string `json:"args"`
	Env       []string `json:"env"`
	Dir       string   `json:"dir"`
	KillGrace int64    `json:"kill_grace_ns"`
	Deadline  int64    `json:"deadline_mono"`
	Cgroup    string   `json:"cgroup,omitempty"` // the job's cgroup, "" for none
}

// Status events, one JSON object per line.
const (
	eventStarted = "started"
	eventExit    = "exit"
	eventError   = "error"
)

// Error kinds in error events.
const (
	errKindDeadline = "deadline-passed"
	errKindStart    = "start"
	errKindSetup    = "setup"
)

// startedEvent: {"event":"started","pid":N,"start_mono":..}.
type startedEvent struct {
	Event     string `json:"event"`
	PID       int    `json:"pid"`
	StartMono int64  `json:"start_mono"`
}

// exitEvent: {"event":"exit","code":..,"signal":..,"reason":..,"dead_mono":..}.
type exitEvent struct {
	Event    string `json:"event"`
	Code     int    `json:"code"`
	Signal   string `json:"signal"`
	Reason   string `json:"reason"`
	DeadMono int64  `json:"dead_mono"`
	EndMono  int64  `json:"end_mono"`
	TermMono int64  `json:"term_mono"`
	KillMono int64  `json:"kill_mono"`
	Error    string `json:"error,omitempty"`
}

// errorEvent: {"event":"error","kind":..,"error":..}; the job was not
// started.
type errorEvent struct {
	Event string `json:"event"`
	Kind  string `json:"kind"`
	Error string `json:"error"`
}

// statusEvent is the union of all events, for decoding: the fields of an
// exit event plus those only the started and error events have.
type statusEvent struct {
	exitEvent        // event, code, signal, reason, *_mono, error
	PID       int    `json:"pid"`
	StartMono int64  `json:"start_mono"`
	Kind      string `json:"kind"`
}

// marshalLine encodes v as one JSON line.
func marshalLine(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		// Only plain structs of strings and integers are marshalled.
		panic("supervisor: marshal status event: " + err.Error())
	}
	return append(b, '\n')
}

// Control messages, one per line: "deadline <mono ns>" and
// "term <grace ns>". Unknown messages are ignored.
const (
	msgDeadline = "deadline"
	msgTerm     = "term"
)

// controlMsg is a parsed control line.
type controlMsg struct {
	kind  string
	value int64
}

func formatControl(kind string, value int64) []byte {
	return fmt.Appendf(nil, "%s %d\n", kind, value)
}

func parseControl(line string) (controlMsg, error) {
	kind, val, ok := strings.Cut(strings.TrimSpace(line), " ")
	if !ok {
		return controlMsg{}, fmt.Errorf("supervisor: malformed control line %q", line)
	}
	v, err := strconv.ParseInt(val, 10, 64)
	if err != nil {
		return controlMsg{}, fmt.Errorf("supervisor: malformed control line %q: %w", line, err)
	}
	switch kind {
	case msgDeadline, msgTerm:
		return controlMsg{kind: kind, value: v}, nil
	}
	return controlMsg{}, fmt.Errorf("supervisor: unknown control message %q", kind)
}
