package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/leasecron/leasecron/internal/testkit/etcdtest"
	"github.com/leasecron/leasecron/internal/testkit/pgtest"
	"github.com/leasecron/leasecron/internal/testkit/redistest"
	"github.com/leasecron/leasecron/internal/testkit/zktest"
)

// execBackends are the backend sections the exec tests run on, each
// starting its servers. No test here faults a server, so etcd and
// ZooKeeper run one each: how a client rides out a member's loss, and
// reads through a server other than the writer's, are their packages'
// and the fault suite's to test (its fleets run on several).
var execBackends = map[string]func(t *testing.T) string{
	"redis": func(t *testing.T) string {
		return "redis:\n  nodes: [" + strings.Join(redistest.Start(t, 3).URLs(), ", ") + "]\n"
	},
	"postgres": func(t *testing.T) string {
		return fmt.Sprintf("postgres:\n  url: %q\n  timeout: 500ms\n", pgtest.Start(t).URL())
	},
	"etcd": func(t *testing.T) string {
		return "etcd:\n  endpoints: [" + strings.Join(etcdtest.Start(t, etcdtest.WithMembers(1)).Endpoints(), ", ") + "]\n"
	},
	"zookeeper": func(t *testing.T) string {
		return "zookeeper:\n  servers: [" + strings.Join(zktest.Start(t, 1).Addrs(), ", ") + "]\n  timeout: 500ms\n"
	},
}

// execConfig is a config with a job "slot" whose settings exec's runs
// use (kill_grace), and recorder is the command that records each run's
// start and end (slot, host, pid, unix ns) in log.
func execConfig(section string) string {
	return section + `lease:
  ttl: 10s
  renew: 2s
jobs:
  - {name: slot, schedule: "@yearly", kill_grace: 1s, shell: "true"}
`
}

// recorder is the command that records each run's start and end (slot:
// $SLOT when the cron loop sets it, else the lease's tick; host; pid; unix
// ns) in log.
func recorder(log string) []string {
	return []string{"sh", "-c", fmt.Sprintf(`s=${SLOT:-$LEASECRON_TICK_UNIX}; echo "start $s $LEASECRON_HOST $$ $(date +%%s%%N)" >> %[1]s; sleep 1; echo "end $s $LEASECRON_HOST $$ $(date +%%s%%N)" >> %[1]s`, log)}
}

// execProc starts `leasecron exec` as its own process, as cron would.
func execProc(path string, args ...string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], append([]string{"exec", "-c", path}, args...)...)
	cmd.Env = append(os.Environ(), cliEnv+"=1")
	return cmd
}

// TestExecSlotsOnce: three hosts run `leasecron exec --schedule` from
// cron-like loops, with clocks skewed by -1.5 s, 0 and +1.5 s and
// start times jittered by up to 300 ms; every slot runs exactly once,
// runs never overlap, and none runs after its slot completed — on every
// backend.
func TestExecSlotsOnce(t *testing.T) {
	t.Parallel()
	for name, section := range execBackends {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			log := filepath.Join(t.TempDir(), "runs")
			path := writeConfig(t, execConfig(section(t)))
			waitVoting(t, path)
			start, codes := cronLoops(t, path, log, execSlots, true)
			runs := readRuns(t, log)
			for _, p := range oncePerSlot(runs, start, execPeriod, execSlots) {
				t.Error(p)
			}
			t.Logf("%d runs, exit codes %v", len(runs), codes)
		})
	}
}

// TestExecNegativeControlNoSchedule: the same cron loops with exec as a
// plain mutex (no --schedule, as flock or etcdctl lock would be) run
// slots more than once — the check above can fail.
func TestExecNegativeControlNoSchedule(t *testing.T) {
	t.Parallel()
	log := filepath.Join(t.TempDir(), "runs")
	path := writeConfig(t, execConfig(execBackends["redis"](t)))
	waitVoting(t, path)
	start, _ := cronLoops(t, path, log, controlSlots, false)
	if problems := oncePerSlot(readRuns(t, log), start, execPeriod, controlSlots); len(problems) == 0 {
		t.Error("a mutex without slots ran every slot once: the check cannot tell")
	} else {
		t.Logf("found, as expected: %s", problems[0])
	}
}

// The cron loops' schedule: execSlots slots of execPeriod, and the
// negative control's controlSlots (a plain mutex runs each slot once per
// host whose cron fires after the previous run ended: two show it).
const (
	execPeriod   = 5 * time.Second
	execSlots    = 5
	controlSlots = 2
)

// cronLoops runs three hosts' cron-like loops of `leasecron exec` for
// n slots, with clocks skewed by -1.5 s, 0 and +1.5 s and start
// times jittered by up to 300 ms; slots passes --schedule. It returns the
// first slot and the exit codes seen.
func cronLoops(t *testing.T, path, log string, n int, slots bool) (time.Time, map[int]int) {
	start := time.Now().Truncate(execPeriod).Add(2 * execPeriod)
	var wg sync.WaitGroup
	var mu sync.Mutex
	codes := map[int]int{}
	for h, skew := range []time.Duration{-1500 * time.Millisecond, 0, 1500 * time.Millisecond} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range n {
				// This host's cron fires when its own clock (real + skew)
				// reaches the slot, a little late.
				slot := start.Add(time.Duration(i) * execPeriod)
				time.Sleep(time.Until(slot.Add(-skew + rand.N(300*time.Millisecond))))
				args := []string{"--name", "slot", "--id", fmt.Sprintf("h%d", h), "--test-clock-offset", skew.String()}
				if slots {
					args = append(args, "--schedule", "@every 5s", "--grace", "2s")
				}
				cmd := execProc(path, append(append(args, "--"), recorder(log)...)...)
				if !slots {
					// The lease knows no slot: the loop says which it is.
					cmd.Env = append(cmd.Env, fmt.Sprintf("SLOT=%d", slot.Unix()))
				}
				var errOut bytes.Buffer
				cmd.Stderr = &errOut
				err := cmd.Run()
				var ee *exec.ExitError
				if err != nil && !errors.As(err, &ee) {
					t.Errorf("exec: %v", err)
					return
				}
				c := cmd.ProcessState.ExitCode()
				mu.Lock()
				codes[c]++
				mu.Unlock()
				if c != 0 {
					t.Errorf("host h%d slot %d: exit %d: %s", h, i, c, errOut.String())
				}
			}
		}()
	}
	wg.Wait()
	return start, codes
}

// execRun is one run of the slot job, from its start and end lines.
type execRun struct {
	slot       int64
	host       string
	start, end time.Time
}

func readRuns(t *testing.T, path string) []execRun {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatalf("no run recorded: %v", err)
	}
	defer f.Close()
	byPID := map[string]*execRun{}
	var order []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var what, host, pid string
		var slot, ns int64
		if _, err := fmt.Sscanf(sc.Text(), "%s %d %s %s %d", &what, &slot, &host, &pid, &ns); err != nil {
			t.Fatalf("bad run line %q: %v", sc.Text(), err)
		}
		r := byPID[pid]
		if r == nil {
			r = &execRun{slot: slot, host: host}
			byPID[pid] = r
			order = append(order, pid)
		}
		if what == "start" {
			r.start = time.Unix(0, ns)
		} else {
			r.end = time.Unix(0, ns)
		}
	}
	runs := make([]execRun, 0, len(order))
	for _, pid := range order {
		runs = append(runs, *byPID[pid])
	}
	sort.Slice(runs, func(i, j int) bool { return runs[i].start.Before(runs[j].start) })
	return runs
}

// oncePerSlot checks that each of the slots from start ran exactly once,
// to its end, and that no two runs overlap; it returns what it found wrong.
func oncePerSlot(runs []execRun, start time.Time, period time.Duration, slots int) []string {
	var problems []string
	per := map[int64]int{}
	for i, r := range runs {
		per[r.slot]++
		if r.end.IsZero() {
			problems = append(problems, fmt.Sprintf("run of slot %d on %s never ended", r.slot, r.host))
		}
		if i > 0 && r.start.Before(runs[i-1].end) {
			problems = append(problems, fmt.Sprintf("overlap: slot %d on %s started at %s, before slot %d on %s ended at %s",
				r.slot, r.host, r.start.Format("15:04:05.000"), runs[i-1].slot, runs[i-1].host, runs[i-1].end.Format("15:04:05.000")))
		}
	}
	for i := range slots {
		slot := start.Add(time.Duration(i) * period).Unix()
		if per[slot] != 1 {
			problems = append(problems, fmt.Sprintf("slot %s ran %d times, want once", time.Unix(slot, 0).Format("15:04:05"), per[slot]))
		}
		delete(per, slot)
	}
	if len(per) > 0 {
		problems = append(problems, fmt.Sprintf("runs of slots outside the window: %v", per))
	}
	return problems
}

// TestExecKilledLeavesCommandDead: `kill -9` of an exec process leaves its
// command — and a child that left its process group with setsid — dead
// before the lease can move: a second exec waiting for the lease starts
// only after both are gone.
func TestExecKilledLeavesCommandDead(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	pids := filepath.Join(dir, "pids")
	path := writeConfig(t, execBackends["redis"](t)+`lease:
  ttl: 10s
  renew: 2s
jobs: []
`)
	waitVoting(t, path)
	first := execProc(path, "--name", "mutex", "--", "sh", "-c",
		fmt.Sprintf(`setsid sleep 300 & echo "$$ $!" > %s; sleep 300`, pids))
	if err := first.Start(); err != nil {
		t.Fatal(err)
	}
	var killed []int
	waitFor(t, 20*time.Second, "the first command started", func() bool {
		b, err := os.ReadFile(pids)
		if err != nil || !bytes.HasSuffix(b, []byte("\n")) {
			return false
		}
		for _, f := range strings.Fields(string(b)) {
			n, _ := strconv.Atoi(f)
			killed = append(killed, n)
		}
		return len(killed) == 2
	})
	// The second runs the moment the lease moves to it, and looks then
	// whether any process of the first command is still alive.
	alive := filepath.Join(dir, "alive")
	second := execProc(path, "--name", "mutex", "--overlap", "wait", "--deadline", "40s", "--", "sh", "-c",
		fmt.Sprintf(`for p in %d %d; do if [ -e /proc/$p ] && ! grep -q '^State:[[:space:]]*Z' /proc/$p/status 2>/dev/null; then echo "alive $p"; fi; done > %s`,
			killed[0], killed[1], alive))
	var out bytes.Buffer
	second.Stderr = &out
	if err := second.Start(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond) // the second is waiting for the lease
	if err := first.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = first.Wait()
	killedAt := time.Now()
	if err := second.Wait(); err != nil {
		t.Fatalf("second exec: %v\n%s", err, out.String())
	}
	t.Logf("the second exec ran within %s of the kill", time.Since(killedAt).Round(time.Millisecond))
	b, err := os.ReadFile(alive)
	if err != nil {
		t.Fatalf("the second command did not run: %v", err)
	}
	if len(b) > 0 {
		t.Errorf("when the lease moved, the killed exec's command was still running: %s", b)
	}
}

// waitVoting waits until the servers of the config at path vote (fresh
// Redis nodes wait out their restart guard, lease.ttl).
func waitVoting(t *testing.T, path string) {
	t.Helper()
	var last string
	deadline := time.Now().Add(40 * time.Second)
	for {
		code, _, errOut := cli(t, "status", "-c", path, "--timeout", "5s")
		if code == 0 {
			return
		}
		last = errOut
		if time.Now().After(deadline) {
			t.Fatalf("the servers do not vote after 40 s; status:\n%s", last)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func waitFor(t *testing.T, bound time.Duration, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(bound)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s", what, bound)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestExecSkipsAndExits: the command's output and exit code come back as
// its own, a completed slot is skipped with --skipped-exit, a paused job
// is skipped, and the run is in the job's history.
func TestExecSkipsAndExits(t *testing.T) {
	t.Parallel()
	path := writeConfig(t, execBackends["redis"](t)+`lease:
  ttl: 10s
  renew: 2s
jobs:
  - {name: held-back, schedule: "@yearly", shell: "true"}
`)
	waitVoting(t, path)
	run := func(args ...string) (int, string, string) {
		cmd := execProc(path, args...)
		var out, errOut bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errOut
		err := cmd.Run()
		var ee *exec.ExitError
		if err != nil && !errors.As(err, &ee) {
			t.Fatal(err)
		}
		return cmd.ProcessState.ExitCode(), out.String(), errOut.String()
	}
	awaitExecSlot()
	daily := append([]string{"--name", "daily"}, execSlotArgs...)
	if code, out, errOut := run(append(daily, "--", "sh", "-c", "echo hello; echo oops >&2; exit 3")...); code != 3 || out != "hello\n" || !strings.Contains(errOut, "oops") {
		t.Fatalf("first run: exit %d, stdout %q, stderr %q; want 3 and the command's output", code, out, errOut)
	}
	if code, out, errOut := run(append(append([]string{"--skipped-exit", "9"}, daily...), "--", "sh", "-c", "echo again")...); code != 9 || out != "" || skippedLate(errOut) {
		t.Errorf("the completed slot again: exit %d, stdout %q, stderr %q; want 9 and no run, not for the deadline", code, out, errOut)
	}
	code, out, errOut := cli(t, "history", "-c", path, "daily", "--json")
	if code != 0 || !strings.Contains(out, `"result": "failed"`) || !strings.Contains(out, `"exit": 3`) {
		t.Errorf("history of the exec'd job: exit %d\n%s\n%s", code, out, errOut)
	}
	if code, _, errOut := cli(t, "pause", "-c", path, "held-back", "--reason", "test"); code != 0 {
		t.Fatalf("pause: exit %d: %s", code, errOut)
	}
	awaitExecSlot() // a slot of its own, far from its deadline
	heldBack := append(append([]string{"--name", "held-back", "--skipped-exit", "7"}, execSlotArgs...), "--", "echo", "ran")
	if code, out, errOut := run(heldBack...); code != 7 || out != "" || skippedLate(errOut) {
		t.Errorf("a paused job: exit %d, stdout %q, stderr %q; want 7 and no run, not for the deadline", code, out, errOut)
	}
}

// execSlot is the slot of the exec tests that run a command twice in one
// slot, and execSlotArgs are its exec flags: a run may start until a
// second before the slot ends (the default deadline is half of it), so
// that a second run skipped on a loaded machine is skipped because the
// slot completed, not because it was late (skippedLate tells).
const execSlot = 10 * time.Second

var execSlotArgs = []string{"--schedule", "@every " + execSlot.String(), "--deadline", (execSlot - time.Second).String(), "--grace", "1s"}

// awaitExecSlot waits until 100 ms into the next slot and returns it: a
// slot that begins after the servers vote (a fresh server's data is
// younger than earlier slots: it does not vote for them).
func awaitExecSlot() time.Time {
	slot := time.Now().Truncate(execSlot).Add(execSlot)
	time.Sleep(time.Until(slot.Add(100 * time.Millisecond)))
	return slot
}

// skippedLate reports whether exec's stderr says it skipped the slot for
// its deadline.
func skippedLate(stderr string) bool {
	return strings.Contains(stderr, "deadline had passed")
}

// TestExecNoBackend: a config without a backend section is a config
// error (exit 2) and nothing runs.
func TestExecNoBackend(t *testing.T) {
	marker := filepath.Join(t.TempDir(), "ran")
	path := writeConfig(t, "lease:\n  ttl: 10s\njobs: []\n")
	code, _, errOut := cli(t, "exec", "-c", path, "--name", "x", "--", "touch", marker)
	if code != exitUsage || !strings.Contains(errOut, path) {
		t.Errorf("exit %d, want %d naming %s: %s", code, exitUsage, path, errOut)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Error("the command ran")
	}
}
