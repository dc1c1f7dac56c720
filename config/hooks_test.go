package config

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestHookConfig: hooks in defaults and per job; a job's own hook
// replaces the default's; every documented default of a hook; the secret
// is read from secret_file relative to the config file.
func TestHookConfig(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "hook.key"), []byte("k3y\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	text := node1 + `defaults:
  on_failure: {url: "https://hooks.example.com/x", secret_file: hook.key}
  on_missed: {shell: "logger missed"}
jobs:
  - name: a
    schedule: "@hourly"
    shell: "true"
  - name: b
    schedule: "@hourly"
    shell: "true"
    on_failure: {command: [/bin/notify, --job], timeout: 2s, retries: 0}
    on_start: {url: "http://127.0.0.1:9/start"}
`
	c, err := Parse(strings.NewReader(text), filepath.Join(dir, "jobs.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	a, b := c.Job("a"), c.Job("b")
	f := a.Hooks.OnFailure
	if f == nil || f.URL != "https://hooks.example.com/x" || f.Timeout != 10*time.Second || f.Retries != 3 || f.key == nil || f.key.s != "k3y" {
		t.Errorf("a's on_failure: %+v; want the default's webhook, timeout 10s, retries 3, the key read", f)
	}
	if m := a.Hooks.OnMissed; m == nil || m.Shell != "logger missed" {
		t.Errorf("a's on_missed: %+v", m)
	}
	if a.Hooks.OnStart != nil || a.Hooks.OnSuccess != nil {
		t.Errorf("a has hooks it was not given: %+v", a.Hooks)
	}
	if f := b.Hooks.OnFailure; f == nil || f.URL != "" || len(f.Command) != 2 || f.Timeout != 2*time.Second || f.Retries != 0 {
		t.Errorf("b's own on_failure: %+v", f)
	}
	if s := b.Hooks.OnStart; s == nil || s.URL != "http://127.0.0.1:9/start" {
		t.Errorf("b's on_start: %+v", s)
	}
	if m := b.Hooks.OnMissed; m == nil || m.Shell != "logger missed" {
		t.Errorf("b's inherited on_missed: %+v", m)
	}
}

// TestHookConfigBad: `check` names the file, line and field of a bad
// URL, an unreadable secret_file, an unknown hook key and the other
// mistakes of a hook, and the content of a secret file appears in no
// message and no printed config.
func TestHookConfigBad(t *testing.T) {
	dir := t.TempDir()
	const secretText = "s3cr3t-hook-key-value"
	keyFile := filepath.Join(dir, "ok.key")
	if err := os.WriteFile(keyFile, []byte(secretText+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, hook string
		want       string // "LINE FIELD: message part"
	}{
		{"bad scheme", `{url: "ftp://example.com/x"}`, "8 jobs[0].on_failure.url: want an http:// or https:// URL"},
		{"unparsable url", `{url: "http://exa mple.com/%zz"}`, "8 jobs[0].on_failure.url: bad url"},
		{"no host", `{url: "https:///path"}`, "8 jobs[0].on_failure.url: no host"},
		{"password in url", `{url: "https://u:p@example.com/"}`, "8 jobs[0].on_failure.url: no user or password"},
		{"unreadable secret_file", `{url: "https://example.com/", secret_file: missing.key}`, "8 jobs[0].on_failure.secret_file: cannot read " + filepath.Join(dir, "missing.key")},
		{"secret_file without url", fmt.Sprintf(`{shell: "true", secret_file: %q}`, keyFile), "8 jobs[0].on_failure.secret_file: it needs url"},
		{"unknown hook key", `{url: "https://example.com/", retires: 2}`, "8 jobs[0].on_failure.retires: unknown key \"retires\""},
		{"nothing to run", `{timeout: 1s}`, "8 jobs[0].on_failure: a hook needs url"},
		{"two things to run", `{url: "https://example.com/", shell: "true"}`, "8 jobs[0].on_failure: set one of url, command and shell"},
		{"bad timeout", `{url: "https://example.com/", timeout: 0s}`, "8 jobs[0].on_failure.timeout: must be positive"},
		{"timeout over the cap", `{url: "https://example.com/", timeout: 2m}`, "8 jobs[0].on_failure.timeout: timeout 2m0s: at most 1m0s"},
		{"too many retries", `{url: "https://example.com/", retries: 11}`, "8 jobs[0].on_failure.retries: want 0 to 10"},
		{"not a mapping", `"https://example.com/"`, "8 jobs[0].on_failure: must be a mapping"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			text := node1 + job1 + "    on_failure: " + tc.hook + "\n" +
				fmt.Sprintf("    on_success: {url: \"https://example.com/ok\", secret_file: %q}\n", keyFile)
			file := filepath.Join(dir, "jobs.yaml")
			c, err := Parse(strings.NewReader(text), file)
			if err == nil {
				t.Fatalf("no error; config %+v", c)
			}
			line, rest, _ := strings.Cut(tc.want, " ")
			if want := file + ":" + line + ": " + rest; !oneLineHas(err.Error(), strings.SplitN(want, ": ", 3)...) {
				t.Errorf("error:\n%v\nwant one naming %s", err, want)
			}
			if strings.Contains(err.Error(), secretText) {
				t.Errorf("the secret appears in the error:\n%v", err)
			}
		})
	}
	// A valid file's printed config does not show the secret either.
	text := node1 + job1 + fmt.Sprintf("    on_success: {url: \"https://example.com/ok\", secret_file: %q}\n", keyFile)
	c, err := Parse(strings.NewReader(text), filepath.Join(dir, "jobs.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, format := range []string{"%v", "%+v", "%#v"} {
		if s := fmt.Sprintf(format, *c.Job("a").Hooks.OnSuccess); strings.Contains(s, secretText) {
			t.Errorf("%s of the hook shows the secret: %s", format, s)
		}
	}
	if !strings.Contains(strings.Join(c.Warnings, "\n"), "readable by every user") {
		t.Errorf("warnings %q: want one about the world-readable secret_file", c.Warnings)
	}
}

// oneLineHas reports whether a line of s contains every part.
func oneLineHas(s string, parts ...string) bool {
	for _, l := range strings.Split(s, "\n") {
		all := true
		for _, p := range parts {
			all = all && strings.Contains(l, p)
		}
		if all {
			return true
		}
	}
	return false
}
