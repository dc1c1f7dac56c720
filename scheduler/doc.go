// Package scheduler runs the jobs of a leasecron config so that each tick of
// each job runs on exactly one host of a fleet, under a lease in the
// configured store (see package lease and its drivers).
//
// # Config
//
// Load and Parse read the YAML config file (see jobs.example.yaml) over
// DefaultConfig and validate it: unknown keys, bad durations, bad cron
// expressions, duplicate job names and lease timings that cannot stop a job
// before its lease runs out are all reported at once, each as a
// *ConfigError naming the file, line and field:
//
//	jobs.yaml:12: jobs[2].schedule: bad cron expression "* *": expected 5 or 6 fields, found 2
//
// # Ticks
//
// Every host computes the same ticks from its own clock. A job's schedule is
// a cron spec with 5 fields, or 6 with leading seconds ("*/10 * * * * *"),
// a descriptor (@hourly, @daily, @weekly, @monthly, @yearly), or
// "@every D". Cron specs are read in the job's timezone (default UTC) unless
// they start with CRON_TZ= or TZ=; where the zone springs forward, times
// that do not exist are skipped, and where it falls back, a repeated
// wall-clock time runs once. "@every D" ticks are the multiples of D since
// 1970-01-01T00:00:00Z, unlike robfig/cron's Every, which counts from when
// the process started; D is a whole number of seconds, at least 1s. See
// Job.Next, Job.Prev and Job.DeadlineFor.
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
// (LiveTail, ReadLiveTail) for `leasecron logs -f`. WriteOutputTail writes
// a run's tail to a file, for hooks.
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
