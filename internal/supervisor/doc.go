// Package supervisor runs one job under a small watchdog process that kills
// the job when its deadline passes, even when the process that started it
// (the leasecron daemon) is paused or dead.
//
// It is somewhat like exec.CommandContext with cmd.Cancel and cmd.WaitDelay,
// except that the cancellation is enforced by a separate process: the daemon
// binary re-executes itself with [Arg] as its first argument, and that copy
// (the supervisor, see [Main]) starts the job in its own process group, holds
// an absolute kill deadline, and kills the group when the deadline passes. The
// daemon moves the deadline forward through a pipe with [Process.Extend]
// while it keeps renewing the job's lease. If the daemon stops extending —
// because renewal failed, or because it is stopped by SIGSTOP, stuck in a
// long pause, or killed — the job is still dead at the deadline.
//
// # Deadlines
//
// Deadlines are absolute CLOCK_BOOTTIME readings in nanoseconds ([BootNow]).
// That clock is shared by every process on the host, so a deadline computed
// by the daemon means the same instant to the supervisor, and a daemon paused
// between computing and writing a deadline cannot make it later. Unlike
// CLOCK_MONOTONIC it advances while the host is suspended, as the lease
// servers' clocks do. [BootDeadline] converts a time.Time (with its monotonic
// reading) into such a deadline.
//
// At Deadline-KillGrace the supervisor sends SIGTERM to the job's process
// group; at Deadline it sends SIGKILL. The group is confirmed dead (every
// process gone and reaped) within [KillSlack] after the SIGKILL on a healthy
// host, so a caller that must have the job dead by instant V passes a
// deadline of at most V-KillSlack (leasecron leaves a larger margin).
//
// # Suspend
//
// Go's timers, the daemon's included, run on CLOCK_MONOTONIC, which stops
// during a suspend: after a resume every timer is late by the time
// suspended, and deadlines the daemon computes from a lease's validity are
// too. The supervisor therefore compares the two clocks every 250ms while
// the job runs: when CLOCK_BOOTTIME has gained more than 100ms on
// CLOCK_MONOTONIC since the job started, the host was suspended, the lease
// may have expired on the servers meanwhile, and the job is SIGKILLed at
// once ([ReasonSuspended]). A VM frozen by its hypervisor, where both
// clocks stop (or jump together), cannot be told and is not covered.
//
// # Daemon gone
//
// When the control pipe closes — [Process.Close], or the daemon exited or
// was killed — the supervisor sends SIGTERM at once and SIGKILL after
// min(KillGrace, Deadline-now): the job never outlives its deadline and is
// not left running without anyone to extend it.
//
// # What is killed
//
// The supervisor is a child subreaper (PR_SET_CHILD_SUBREAPER): every
// process the job starts and orphans is re-parented to it. When the job
// leader exits, or when the job is killed, the supervisor SIGKILLs the job's
// process group and every remaining descendant (also those that left the
// group with setsid), reaps them, and reports the instant at which none was
// left ([Exit].DeadTime).
//
// # Containment
//
// With the cgroup containment ([DetectContainment]: a cgroup v2 hierarchy
// the daemon may write to, as root or in a systemd unit with Delegate=yes)
// every job runs in a cgroup of its own, created by the daemon below its
// own cgroup (leasecron-jobs/NAME-PID-RANDOM); the supervisor starts the job
// in it with clone3 (CLONE_INTO_CGROUP), so nothing the job forks is ever
// outside. Its kill also writes cgroup.kill, and the job counts as dead only
// once cgroup.events says "populated 0"; the daemon checks that again
// after the supervisor's report and removes the cgroup.
//
// If the supervisor is SIGKILLed, the job leader gets SIGKILL through
// PR_SET_PDEATHSIG and the rest of the job comes to the daemon, a child
// subreaper from [Prepare] on: [Process.Wait] returns as soon as the
// supervisor is gone (it does not wait for the job's output to end) after
// killing everything the job started: with cgroups, by freezing the job's
// cgroup, writing cgroup.kill and waiting until it is empty; without (the
// process-tree fallback), by SIGKILLing the job's process group and every
// process the daemon adopted since the supervisor started that is not a
// supervisor, with all their descendants, until none is alive. What cannot
// be confirmed dead within [ConfirmTimeout] leaves Exit.DeadTime 0, and the
// caller must not hand the job's lease on (leasecron lets it run out).
//
// # Resource limits
//
// [Spec].Limits (memory, a share of CPU, tasks) are written to the job's
// cgroup (memory.max with memory.swap.max 0, cpu.max, pids.max) before the
// job starts, so it never runs a line without them. [DetectContainment]
// enables the memory, cpu and pids controllers for the jobs' cgroups: in
// the daemon's cgroup and in leasecron-jobs; a daemon alone in a non-root
// cgroup first moves itself into the leaf leasecron-daemon beside
// leasecron-jobs ("no internal processes"). A controller bound to a cgroup
// v1 hierarchy, not delegated, or in a cgroup shared with other processes
// is not enabled; [Containment.CanLimit] says so, and a Spec whose limits
// cannot be applied fails with [ErrLimits] instead of running unlimited.
// After the job, [Exit].Limit names the limit it ran into, from the
// cgroup's memory.events (oom_kill), pids.events (max) and cpu.stat
// (nr_throttled).
//
// # Limits
//
// The supervisor itself must run: a SIGSTOP sent to the supervisor (it is
// in its own process group, so a terminal's Ctrl-Z or a signal to the
// daemon's group does not reach it) delays the kill. If the daemon and the
// supervisor are both SIGKILLed, the job leader's children are left to the
// environment (a systemd unit's cgroup kill, which includes the jobs'
// cgroups; a container's PID namespace). A process that leaves both the
// job's cgroup and its process tree — moved to another cgroup by a
// privileged job, or started through another service (systemd-run, at,
// ssh) — is outside either containment. A process stuck in uninterruptible
// sleep cannot be killed by anyone; the supervisor then gives up after
// [ConfirmTimeout] and reports the job as not confirmed dead.
//
// The package is Linux-only.
package supervisor
