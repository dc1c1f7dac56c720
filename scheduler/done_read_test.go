package scheduler

import (
	"context"
	"testing"
	"time"

	"github.com/leasecron/leasecron/internal/testkit/redistest"
)

// TestDoneMarkReadAskedAgain: the store frozen (SIGSTOP) for 2.5 s
// while a host holding a hook's guard reads the event's done mark; the
// read is asked again and answers once the store is back, so the hook is
// not dropped for one slow answer. Control: a single read in the same
// freeze fails.
func TestDoneMarkReadAskedAgain(t *testing.T) {
	t.Parallel()
	node := redistest.Start(t, 1)
	s, _ := oneNodeScheduler(t, node, &Job{Name: "hooked", Schedule: "@every 1m", Shell: "true", Deadline: time.Second})
	name := s.doneName("hooked", "hook.failure", time.Now().Truncate(time.Minute))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	node.Nodes[0].Pause()
	if _, err := s.isDone(ctx, name); err == nil {
		t.Error("control: a single read of the done mark answered while the store was frozen: the test cannot see a retry")
	}
	const freeze = 2500 * time.Millisecond // past two reads' bounds (1 s each)
	start := time.Now()
	time.AfterFunc(freeze, node.Nodes[0].Resume)
	done, err := s.readDone(ctx, name)
	if err != nil || done {
		t.Errorf("read of the done mark through a %s freeze: done=%v err=%v; want false, nil", freeze, done, err)
	}
	if d := time.Since(start); d < freeze {
		t.Errorf("the read answered %s into a %s freeze: it cannot have been asked again", d, freeze)
	}
}
