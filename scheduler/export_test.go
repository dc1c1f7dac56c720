package scheduler

// setTestHooks lets a test change the switches of s (testHooks) before s
// runs: the one place tests reach into them.
func (s *Scheduler) setTestHooks(set func(h *testHooks)) { set(&s.test) }
