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
package scheduler
