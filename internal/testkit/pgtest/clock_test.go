package pgtest_test

import (
	"testing"
	"time"

	"github.com/leasecron/leasecron/internal/testkit/pgtest"
)

// TestStepClock: a server started WithClockStep reports clock_timestamp()
// an hour ahead after StepClock(1h), in a connection opened before the
// step, and the true time again after StepClock(0).
func TestStepClock(t *testing.T) {
	s := pgtest.Start(t, pgtest.WithClockStep())
	skew := func() time.Duration {
		var epoch float64
		s.QueryRow("SELECT extract(epoch FROM clock_timestamp())::float8", nil, &epoch)
		return time.Until(time.Unix(0, int64(epoch*1e9))) * -1
	}
	if d := skew(); d.Abs() > 5*time.Second {
		t.Fatalf("before any step the server's clock is off by %s", d)
	}
	s.StepClock(time.Hour)
	if d := -skew(); d < time.Hour-5*time.Second || d > time.Hour+5*time.Second {
		t.Fatalf("after a 1h step the server's clock is ahead by %s", d)
	}
	s.StepClock(0)
	if d := skew(); d.Abs() > 5*time.Second {
		t.Fatalf("after stepping back the server's clock is off by %s", d)
	}
}
