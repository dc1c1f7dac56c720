package scheduler

import (
	"testing"
	"time"

	"github.com/leasecron/leasecron/config"
)

// TestKillMarginIsTheConfigRule: the kill margin the scheduler times its
// kills by is the one the config's timing rule counts.
func TestKillMarginIsTheConfigRule(t *testing.T) {
	for _, timeout := range []time.Duration{0, 50 * time.Millisecond, 2 * time.Second} {
		if got, want := killMarginFor(timeout), config.KillMargin(timeout); got != want {
			t.Errorf("timeout %s: scheduler kill margin %s, config's %s", timeout, got, want)
		}
	}
}
