package scheduler

import "github.com/leasecron/leasecron/internal/supervisor"

// forceProcessTree makes s contain its jobs by the process tree, as on a
// host without cgroup v2: the fallback, where limits cannot be applied.
func forceProcessTree(s *Scheduler) { s.contain = supervisor.Containment{} }
