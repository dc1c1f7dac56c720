//go:build linux

package supervisor_test

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/leasecron/leasecron/internal/supervisor"
)

// A daemon runs a job under a supervisor and keeps moving its kill deadline
// while it holds the job's lease. If it stopped extending — lease lost,
// daemon paused or killed — the job would be killed at the last deadline.
// The binary's main must start with:
//
//	if len(os.Args) > 1 && os.Args[1] == supervisor.Arg {
//		os.Exit(supervisor.Main(os.Args[2:]))
//	}
func Example() {
	self, err := os.Executable()
	if err != nil {
		fmt.Println(err)
		return
	}
	const window = 10 * time.Second // e.g. the lease validity minus a margin
	p, err := supervisor.Start(context.Background(), self, supervisor.Spec{
		Path:      "/bin/sh",
		Args:      []string{"-c", "sleep 0.3; echo hello from the job"},
		KillGrace: 2 * time.Second,
		Deadline:  supervisor.BootDeadline(time.Now().Add(window)),
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	go func() { _, _ = io.Copy(os.Stderr, p.Stderr()) }()

	// The lease keeper: each successful renewal moves the deadline.
	done := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
				_ = p.Extend(supervisor.BootNow() + int64(window))
			}
		}
	}()

	out, _ := io.ReadAll(p.Stdout())
	exit, err := p.Wait()
	close(done)
	<-stopped
	fmt.Print(string(out))
	fmt.Println(exit.Code, exit.Reason, err)
	// Output:
	// hello from the job
	// 0 exited <nil>
}
