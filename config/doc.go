// Package config reads and checks a leasecron config file: the jobs, the
// lease timing and the one backend section that says where the leases
// live.
//
// Load and Parse read the YAML file (see jobs.example.yaml) over Default
// and validate it: unknown keys, bad durations, bad cron expressions,
// duplicate job names and lease timings that cannot stop a job before its
// lease runs out are all reported at once, each as an *Error naming the
// file, line and field:
//
//	jobs.yaml:12: jobs[2].schedule: bad cron expression "* *": expected 5 or 6 fields, found 2
//
// # Backends
//
// Each backend has one section type implementing Section (RedisConfig,
// PostgresConfig, MySQLConfig, EtcdConfig, ZooKeeperConfig): it is
// checked without connecting, compared with another for a reload
// (Equal), gives its request timeout to the timing rule, and opens the
// store as a lease.Backend (Config.Open). The backends are registered
// once, one line each, in the backends struct of backends.go; nothing
// else in leasecron names them.
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
package config
