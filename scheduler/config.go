package scheduler

import "github.com/leasecron/leasecron/config"

// Config is the parsed config a Scheduler runs: the file's jobs, lease
// timing and backend section, read by package config (config.Load).
type Config = config.Config

// Job is one job of a Config (config.Job): its schedule and how it runs.
type Job = config.Job

// Hook and Hooks are a job's hooks (config.Hook, config.Hooks).
type (
	Hook  = config.Hook
	Hooks = config.Hooks
)

// The hook events (config.EventStart, ...).
const (
	EventStart   = config.EventStart
	EventSuccess = config.EventSuccess
	EventFailure = config.EventFailure
	EventMissed  = config.EventMissed
)
