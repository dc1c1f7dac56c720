package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// TestExecPauseStop: `leasecron exec` honours the pause flags as the
// daemon does, on every backend: `pause NAME` alone lets a running
// command go on (the negative control) and skips the next exec of NAME;
// `pause --stop NAME` stops the running command within a few heartbeats —
// exec exits with 75 and records the run as stopped — and after `resume`
// exec runs again.
func TestExecPauseStop(t *testing.T) {
	t.Parallel()
	for name, section := range everyBackend() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			pidFile := filepath.Join(dir, "pid")
			path := writeConfig(t, limitsConfig(section(t), `  - {name: long, schedule: "@yearly", shell: "true"}
`))
			waitVoting(t, path)
			cmd := execProc(path, "--name", "long", "--", "sh", "-c", fmt.Sprintf(`echo $$ > %s.tmp && mv %[1]s.tmp %[1]s; exec sleep 120`, pidFile))
			var errOut bytes.Buffer
			cmd.Stderr = &errOut
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			exited := make(chan int, 1)
			go func() { _ = cmd.Wait(); exited <- cmd.ProcessState.ExitCode() }()
			t.Cleanup(func() { _ = cmd.Process.Kill() })
			var pid int
			waitFor(t, 30*time.Second, "the command started", func() bool {
				b, err := os.ReadFile(pidFile)
				return err == nil && len(b) > 0 && func() bool { _, err := fmt.Sscanf(string(b), "%d", &pid); return err == nil }()
			})
			alive := func() bool { return syscall.Kill(pid, 0) == nil }

			if code, _, e := cli(t, "pause", "-c", path, "long", "--reason", "test"); code != 0 {
				t.Fatalf("pause: exit %d: %s", code, e)
			}
			time.Sleep(3 * time.Second) // three heartbeats
			if !alive() {
				t.Fatalf("a pause without --stop ended the command; exec's stderr:\n%s", errOut.String())
			}
			marker := filepath.Join(dir, "ran")
			if code, _, e := cli(t, "exec", "-c", path, "--name", "long", "--skipped-exit", "7", "--", "touch", marker); code != 7 {
				t.Errorf("exec of a paused job: exit %d, want 7 (skipped): %s", code, e)
			}
			if _, err := os.Stat(marker); err == nil {
				t.Error("exec of a paused job ran its command")
			}

			if code, _, e := cli(t, "pause", "-c", path, "long", "--stop", "--reason", "stop it"); code != 0 {
				t.Fatalf("pause --stop: exit %d: %s", code, e)
			}
			select {
			case code := <-exited:
				if code != exitNoLease {
					t.Errorf("exec stopped by pause --stop: exit %d, want %d; stderr:\n%s", code, exitNoLease, errOut.String())
				}
			case <-time.After(30 * time.Second):
				t.Fatalf("exec still runs 30s after pause --stop; stderr:\n%s", errOut.String())
			}
			if alive() {
				t.Errorf("the command (pid %d) outlived its exec", pid)
			}
			if recs := historyOf(t, path, "long"); len(recs) == 0 || recs[0].Result != "stopped" {
				t.Errorf("history: %+v; want the run recorded as stopped", recs)
			}

			if code, _, e := cli(t, "resume", "-c", path, "long"); code != 0 {
				t.Fatalf("resume: exit %d: %s", code, e)
			}
			if code, _, e := cli(t, "exec", "-c", path, "--name", "long", "--", "touch", marker); code != 0 {
				t.Errorf("exec after resume: exit %d: %s", code, e)
			}
			if _, err := os.Stat(marker); err != nil {
				t.Errorf("exec after resume did not run its command: %v", err)
			}
		})
	}
}
