package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestSystemdUnit checks systemd/leasecron.service with systemd-analyze
// verify (ExecStart pointed at this test binary, since leasecron is not
// installed here) and logs its `systemd-analyze security` exposure score.
// Machines without systemd-analyze skip it (it checks a shipped file, not
// the daemon), except in CI (CI=true), where `make test` installs it and a
// missing one is a failure.
func TestSystemdUnit(t *testing.T) {
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("systemd-analyze not installed: make test installs it (scripts/deps.sh systemd, Debian package systemd)")
		}
		t.Skip("systemd-analyze not installed")
	}
	unit, err := os.ReadFile(filepath.Join("..", "..", "systemd", "leasecron.service"))
	if err != nil {
		t.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	text := string(unit)
	for _, want := range []string{"Type=notify", "KillMode=mixed", "ExecReload=", "WatchdogSec=", "User=leasecron", "TimeoutStopSec=",
		// The daemon creates a cgroup per job in the delegated subtree.
		"Delegate=yes"} {
		if !strings.Contains(text, "\n"+want) {
			t.Errorf("unit lacks %s", want)
		}
	}
	// When every leasecron process is SIGKILLed at once, only the unit's
	// cgroup kill reaches the job's orphaned children (docs/guarantees.md,
	// "Something kills the job when every leasecron process dies at once"): with KillMode=mixed systemd SIGKILLs what is left of
	// the cgroup as soon as the main process is gone. These settings would
	// leave them running.
	for _, bad := range []string{"KillMode=process", "KillMode=none", "SendSIGKILL=no"} {
		if strings.Contains(text, "\n"+bad) {
			t.Errorf("unit sets %s: a job's children could outlive every leasecron process", bad)
		}
	}
	// A read-only cgroup file system would leave the daemon without job
	// cgroups (the process-tree fallback) despite Delegate=yes.
	if strings.Contains(text, "\nProtectControlGroups=yes") {
		t.Errorf("unit sets ProtectControlGroups=yes: the daemon cannot create its jobs' cgroups")
	}
	path := filepath.Join(t.TempDir(), "leasecron.service")
	if err := os.WriteFile(path, []byte(strings.ReplaceAll(text, "/usr/local/bin/leasecron", self)), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(analyze, "verify", path).CombinedOutput()
	if err != nil || len(strings.TrimSpace(string(out))) > 0 {
		t.Errorf("systemd-analyze verify: %v\n%s", err, out)
	}
	// --offline needs systemd >= 250; older ones cannot score a unit file.
	out, err = exec.Command(analyze, "security", "--offline=true", path).CombinedOutput()
	if err == nil {
		if i := strings.LastIndex(string(out), "Overall exposure level"); i >= 0 {
			t.Log(strings.TrimSpace(string(out[i:])))
		}
	}
}
