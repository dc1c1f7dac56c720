package redistest

import (
	"context"
	"fmt"
	"time"
)

// poll calls check every 50 ms until it reports done or timeout passes; the
// error then quotes what check last saw. Each check gets a context bounded
// by the same timeout.
func poll(timeout time.Duration, check func(ctx context.Context) (done bool, seen string)) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	last := "nothing checked yet"
	for {
		done, seen := check(ctx)
		if done {
			return nil
		}
		if seen != "" {
			last = seen
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("not within %s; last seen: %s", timeout, last)
		case <-time.After(50 * time.Millisecond):
		}
	}
}
