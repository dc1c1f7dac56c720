// Package scheduler runs the jobs of a leasecron config (package config) so
// that each tick of each job runs on exactly one host of a fleet, under a
// lease in the config's backend (the lease.Backend that config.Config.Open
// returns; package lease and its drivers).
//
// The scheduler takes a parsed config (Config and Job are package
// config's) and sees the backend only through lease.Backend: it imports
// no driver and names no backend. A reload (Scheduler.Reload) applies a
// new schedule and keeps the backend and lease sections, which need a
// restart.
//
// # Run output
//
// A run's stdout and stderr are read line by line (lines longer than 16
// KiB in pieces): each line goes to the log (or, for `leasecron exec`, raw
// to Options.JobStdout and JobStderr) and, after the job's redact patterns
// and secret_env values are replaced, into a tail bounded by the job's
// output_limit. The tail is stored with the run's record in the job's
// history (RunRecord.Output, within lease.MaxRecordSize) and, while the
// job runs, published about once a second in the SpaceOutput entries
// (LiveTail, ReadLiveTail) for `leasecron logs -f`; a command hook gets
// it in the file LEASECRON_OUTPUT_FILE names.
//
// # Missed ticks and hooks
//
// A tick whose deadline passes without a run is recorded once across the
// fleet in the job's history (result missed, or skipped, with a reason:
// see missed.go), and a job's hooks (on_start, on_success, on_failure,
// on_missed: a command or a signed webhook) fire once per event on one
// host, queued so that they never hold the scheduler up (see hooks.go).
// Both are guarded by leases on keys derived from the job's, with the
// tick as their epoch, like the tick itself.
package scheduler
