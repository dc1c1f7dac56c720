// Command tickstamp is the job leasebench schedules with the leasecron
// daemon: it appends one line "JOB TICK_UNIX HOST START_UNIX_NANO" to the
// file named by its first argument, with the time taken as its first act,
// and exits.
package main

import (
	"fmt"
	"os"
	"time"
)

func main() {
	now := time.Now().UnixNano()
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: tickstamp FILE")
		os.Exit(2)
	}
	line := fmt.Sprintf("%s %s %s %d\n", os.Getenv("LEASECRON_JOB"), os.Getenv("LEASECRON_TICK_UNIX"), os.Getenv("LEASECRON_HOST"), now)
	f, err := os.OpenFile(os.Args[1], os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		fmt.Fprintln(os.Stderr, "tickstamp:", err)
		os.Exit(1)
	}
	// One write of a short line with O_APPEND: lines of concurrent jobs do
	// not interleave.
	if _, err := f.WriteString(line); err != nil {
		fmt.Fprintln(os.Stderr, "tickstamp:", err)
		os.Exit(1)
	}
	if err := f.Close(); err != nil {
		fmt.Fprintln(os.Stderr, "tickstamp:", err)
		os.Exit(1)
	}
}
