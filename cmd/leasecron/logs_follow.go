package main

import (
	"context"
	"fmt"
	"time"

	"github.com/leasecron/leasecron/lease"
	"github.com/leasecron/leasecron/scheduler"
)

// follower prints a followed attempt's lines once each, by their number.
type follower struct {
	c    *LogsCommand
	next int64 // number of the next line to print (from 1)
}

// print writes out's lines numbered next or more; lines that were cut
// before they could be seen are said.
func (f *follower) print(out *scheduler.Output) {
	if out == nil {
		return
	}
	if out.First > f.next {
		fmt.Fprintf(f.c.stdout, "[... %d lines not shown: cut from the tail before they were read]\n", out.First-f.next)
		f.next = out.First
	}
	for i, l := range out.Lines {
		if n := out.First + int64(i); n >= f.next {
			fmt.Fprintln(f.c.stdout, scheduler.FormatLine(l))
			f.next = n + 1
		}
	}
}

// sameAttempt reports whether a and b are published by the same attempt.
func sameAttempt(a, b scheduler.LiveTail) bool {
	return a.Fence == b.Fence && a.Host == b.Host && a.Start.Equal(b.Start)
}

// follow waits for a running attempt of job (one that is not Done), prints
// its lines as its host publishes them, and when it ends prints the rest
// from its record and its result. timeout bounds each read.
func (c *LogsCommand) follow(ctx context.Context, be lease.Backend, job string, timeout time.Duration) error {
	read := func() (scheduler.LiveTail, bool, error) {
		rctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		return scheduler.ReadLiveTail(rctx, be, job)
	}
	var cur *scheduler.LiveTail
	f := &follower{c: c, next: 1}
	waiting, failing := false, false
	for {
		lt, ok, err := read()
		switch {
		case err != nil:
			if !failing {
				fmt.Fprintf(c.stderr, "leasecron logs: reading the output's tail: %v (trying again)\n", err)
			}
			failing = true
		case cur == nil && ok && !lt.Done:
			failing, cur = false, &lt
			fmt.Fprintln(c.stdout, runHeader(lt.Host, lt.Tick, lt.Attempt, lt.Fence, lt.Start))
			f.print(&lt.Output)
		case cur == nil:
			failing = false
			if !waiting {
				fmt.Fprintf(c.stderr, "leasecron logs: %s is not running; waiting for its next attempt on any host\n", job)
				waiting = true
			}
		case ok && sameAttempt(lt, *cur) && !lt.Done:
			failing = false
			f.print(&lt.Output)
		default:
			// Done, expired (its host stopped publishing) or replaced by
			// a later attempt: the rest comes from the record.
			if ok && sameAttempt(lt, *cur) {
				f.print(&lt.Output)
			}
			return c.finishFollow(ctx, be, job, *cur, f, timeout)
		}
		t := time.NewTimer(followPoll)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
}

// finishFollow prints the rest of the followed attempt's output and its
// result from its history record, looking for the record for a few polls
// (its host appends it before it publishes the end).
func (c *LogsCommand) finishFollow(ctx context.Context, be lease.Backend, job string, cur scheduler.LiveTail, f *follower, timeout time.Duration) error {
	for try := 0; try < 5; try++ {
		rctx, cancel := context.WithTimeout(ctx, timeout)
		recs, err := scheduler.ReadHistory(rctx, be, job, 20)
		cancel()
		if err == nil {
			for _, r := range recs {
				if r.Fence == cur.Fence && r.Host == cur.Host && r.Start.Equal(cur.Start) {
					f.print(r.Output)
					fmt.Fprintln(c.stdout, runFooter(r))
					return nil
				}
			}
		}
		t := time.NewTimer(time.Second)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
	return fmt.Errorf("%s on %s: %w", job, cur.Host, errTailLost)
}
