// Command recorder is the job the fleet tests schedule. It appends one JSON
// line per event to a log file shared by every host of the fleet: "start"
// (with the LEASECRON_* environment the daemon gave it), a heartbeat "hb"
// every --hb while it runs, then "end" when it ran to completion, or "term"
// when it was stopped by SIGTERM. Every line carries LEASECRON_ATTEMPT; the
// "end" line carries the exit status the run is about to exit with
// (--fail-attempts, --fail-hosts and --fail make it non-zero). The file is opened with O_APPEND|O_SYNC
// so the lines of concurrent runs interleave whole and survive a SIGKILL.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

type event struct {
	Ev    string `json:"ev"`
	Job   string `json:"job"`
	Tick  int64  `json:"tick"`
	Host  string `json:"host"`
	Token int64  `json:"token"`
	PID   int    `json:"pid"`
	T     int64  `json:"t"` // unix nanoseconds
	// Attempt is LEASECRON_ATTEMPT (0 when unset).
	Attempt int `json:"attempt,omitempty"`
	// Exit is the exit status of a run that ends ("end" lines only).
	Exit int `json:"exit,omitempty"`
}

// failCode is the exit status of a run made to fail.
const failCode = 3

func main() {
	logPath := flag.String("log", "", "shared log file (required)")
	sleep := flag.Duration("sleep", time.Second, "how long the job runs")
	hb := flag.Duration("hb", 20*time.Millisecond, "heartbeat interval")
	ignoreTerm := flag.Bool("ignore-term", false, "log SIGTERM but keep running (only SIGKILL stops it)")
	failAttempts := flag.String("fail-attempts", "", "comma-separated attempts (LEASECRON_ATTEMPT) that exit non-zero at their end")
	failHosts := flag.String("fail-hosts", "", "comma-separated hosts (LEASECRON_HOST) on which runs exit non-zero at their end")
	failAlways := flag.Bool("fail", false, "every run exits non-zero at its end")
	escapee := flag.Duration("escapee", 0, "start a child in its own session (setsid) that logs heartbeats as part of this run until this long after its start")
	escapeeOf := flag.Int("escapee-of", 0, "(the escapee itself) the PID of the run it belongs to")
	escapeeUntil := flag.Int64("escapee-until", 0, "(the escapee itself) when to stop, unix nanoseconds")
	flag.Parse()
	if *logPath == "" {
		fmt.Fprintln(os.Stderr, "recorder: --log is required")
		os.Exit(2)
	}
	f, err := os.OpenFile(*logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND|os.O_SYNC, 0o644)
	if err != nil {
		fmt.Fprintln(os.Stderr, "recorder:", err)
		os.Exit(2)
	}
	tick, _ := strconv.ParseInt(os.Getenv("LEASECRON_TICK_UNIX"), 10, 64)
	token, _ := strconv.ParseInt(os.Getenv("LEASECRON_FENCING_TOKEN"), 10, 64)
	attempt, _ := strconv.Atoi(os.Getenv("LEASECRON_ATTEMPT"))
	base := event{Job: os.Getenv("LEASECRON_JOB"), Tick: tick, Host: os.Getenv("LEASECRON_HOST"), Token: token, PID: os.Getpid(), Attempt: attempt}
	exit := 0
	if *failAlways || slices.Contains(split(*failAttempts), strconv.Itoa(attempt)) || slices.Contains(split(*failHosts), base.Host) {
		exit = failCode
	}
	write := func(ev string) {
		e := base
		e.Ev, e.T = ev, time.Now().UnixNano()
		if ev == "end" {
			e.Exit = exit
		}
		b, _ := json.Marshal(e)
		if _, err := f.Write(append(b, '\n')); err != nil {
			fmt.Fprintln(os.Stderr, "recorder:", err)
			os.Exit(2)
		}
	}

	if *escapeeOf != 0 {
		base.PID = *escapeeOf
		runEscapee(write, *hb, time.Unix(0, *escapeeUntil))
		return
	}
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM)
	write("start")
	if *escapee > 0 {
		startEscapee(*logPath, *hb, time.Now().Add(*escapee))
	}
	fmt.Printf("recorder: job %s tick %d token %d started\n", base.Job, tick, token)
	end := time.NewTimer(*sleep)
	beat := time.NewTicker(*hb)
	defer beat.Stop()
	for {
		select {
		case <-beat.C:
			write("hb")
		case <-sigs:
			write("term")
			if !*ignoreTerm {
				os.Exit(143)
			}
		case <-end.C:
			write("end")
			fmt.Printf("recorder: job %s tick %d attempt %d done, exit %d\n", base.Job, tick, attempt, exit)
			os.Exit(exit)
		}
	}
}

// split reads a comma-separated list, dropping empty items.
func split(s string) []string {
	var out []string
	for _, x := range strings.Split(s, ",") {
		if x = strings.TrimSpace(x); x != "" {
			out = append(out, x)
		}
	}
	return out
}

// startEscapee starts this program again, in a session of its own
// (setsid), as the escapee of this run, and does not wait for it.
func startEscapee(logPath string, hb time.Duration, until time.Time) {
	cmd := exec.Command(os.Args[0], "--log", logPath, "--hb", hb.String(),
		"--escapee-of", strconv.Itoa(os.Getpid()), "--escapee-until", strconv.FormatInt(until.UnixNano(), 10))
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		fmt.Fprintln(os.Stderr, "recorder: escapee:", err)
		return
	}
	_ = cmd.Process.Release()
}

// runEscapee logs a heartbeat of the run every hb until until; only
// SIGKILL stops it earlier.
func runEscapee(write func(string), hb time.Duration, until time.Time) {
	signal.Ignore(syscall.SIGTERM, syscall.SIGHUP, syscall.SIGINT)
	for time.Now().Before(until) {
		write("hb")
		time.Sleep(hb)
	}
}
