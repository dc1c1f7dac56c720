package scheduler

import "github.com/leasecron/leasecron/internal/supervisor"

// setTestHooks lets a test change the switches of s (testHooks) before s
// runs: the one place tests reach into them.
func (s *Scheduler) setTestHooks(set func(h *testHooks)) { set(&s.test) }

// forceProcessTree makes s contain its jobs by the process tree, as on a
// host without cgroup v2: the fallback, where limits cannot be applied.
func forceProcessTree(s *Scheduler) { s.contain = supervisor.Containment{} }
