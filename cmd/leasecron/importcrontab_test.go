package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/leasecron/leasecron/config"
	"github.com/leasecron/leasecron/internal/crontab"
)

const corpus = "../../internal/crontab/testdata/corpus.crontab"

// TestImportCrontabRoundTrip imports a corpus of real-world crontab lines,
// checks the jobs file with `check`, and compares every job with its
// crontab line: schedule, time zone, command, environment, and the ticks
// the daemon computes from it.
func TestImportCrontabRoundTrip(t *testing.T) {
	t.Setenv("TZ", "UTC") // the output names this host's zone otherwise
	var out, errb bytes.Buffer
	m := NewMain(&out, &errb)
	if code := m.Run(context.Background(), []string{"import-crontab", "--system", corpus}); code != 0 {
		t.Fatalf("import-crontab: exit %d: %s", code, errb.String())
	}
	for _, want := range []string{corpus + ":19: @reboot", corpus + ":29: standard input", corpus + ":7: MAILTO", "12 jobs imported, 7 lines not imported", corpus + ":11: run-parts runs a host's own maintenance"} {
		if !strings.Contains(errb.String(), strings.SplitN(want, ": ", 2)[0]) || !strings.Contains(errb.String(), strings.SplitN(want, ": ", 2)[len(strings.SplitN(want, ": ", 2))-1]) {
			t.Errorf("stderr lacks %q:\n%s", want, errb.String())
		}
	}
	file := filepath.Join(t.TempDir(), "jobs.yaml")
	if err := os.WriteFile(file, out.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	var cout, cerr bytes.Buffer
	if code := NewMain(&cout, &cerr).Run(context.Background(), []string{"check", "-c", file}); code != 0 {
		t.Fatalf("check of the imported file: exit %d: %s\n%s", code, cerr.String(), out.String())
	}
	cfg, err := config.Load(file)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(corpus)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tab, err := crontab.Parse(f, true)
	if err != nil {
		t.Fatal(err)
	}
	var entries []crontab.Entry
	for _, e := range tab.Entries {
		if !perHost(e.Command) {
			entries = append(entries, e)
		}
	}
	if len(cfg.Jobs) != len(entries) {
		t.Fatalf("%d jobs for %d crontab lines", len(cfg.Jobs), len(entries))
	}
	for i, j := range cfg.Jobs {
		e := entries[i]
		if j.Schedule != e.Schedule {
			t.Errorf("%s: schedule %q, crontab line %d has %q", j.Name, j.Schedule, e.Line, e.Schedule)
		}
		if tz := map[bool]string{true: "UTC", false: e.TimeZone}[e.TimeZone == ""]; j.Timezone != tz {
			t.Errorf("%s: timezone %q, want %q", j.Name, j.Timezone, tz)
		}
		env := map[string]string{}
		for _, v := range e.Env {
			env[v.Name] = v.Value
		}
		if !reflect.DeepEqual(j.Env, env) && (len(j.Env) > 0 || len(env) > 0) {
			t.Errorf("%s: env %v, want %v", j.Name, j.Env, env)
		}
		switch {
		case e.Shell != "":
			if !reflect.DeepEqual(j.Command, []string{e.Shell, "-c", e.Command}) {
				t.Errorf("%s: command %q, want the crontab's SHELL running %q", j.Name, j.Command, e.Command)
			}
		case j.Shell != "":
			if j.Shell != e.Command {
				t.Errorf("%s: shell %q, want %q", j.Name, j.Shell, e.Command)
			}
		case strings.Join(j.Command, " ") != strings.Join(strings.Fields(e.Command), " "):
			t.Errorf("%s: command %q, want %q", j.Name, j.Command, e.Command)
		}
	}
	// Ticks, as cron computes them: both day fields restricted means
	// either matches; names of months and days; CRON_TZ.
	from := time.Date(2026, 11, 26, 0, 0, 0, 0, time.UTC) // a Thursday
	for name, want := range map[string]time.Time{
		"run.sh":        time.Date(2026, 11, 27, 9, 0, 0, 0, time.UTC), // a Friday, not the 1st or 15th
		"morning-check": time.Date(2026, 11, 26, 7, 0, 0, 0, time.UTC), // 08:00 in Berlin (UTC+1)
		"rotate-keys":   time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC),
		"backup":        time.Date(2026, 11, 26, 2, 30, 0, 0, time.UTC),
	} {
		j := jobNamed(cfg, name)
		if j == nil {
			t.Errorf("no job %s in\n%s", name, out.String())
			continue
		}
		if got := j.Next(from); !got.Equal(want) {
			t.Errorf("%s: next tick after %s is %s, want %s", name, from, got, want)
		}
	}
}

func jobNamed(cfg *config.Config, name string) *config.Job {
	for _, j := range cfg.Jobs {
		if j.Name == name {
			return j
		}
	}
	return nil
}

func TestImportCrontabNames(t *testing.T) {
	for cmd, want := range map[string]string{
		"cd / && run-parts --report /etc/cron.hourly":                                  "run-parts-cron.hourly",
		"/usr/bin/ionice -c3 nice -n 19 /usr/local/bin/reindex":                        "reindex",
		"flock -n /tmp/x.lock /opt/sync.sh --all":                                      "sync.sh",
		"FOO=1 /usr/bin/php /srv/cron.php":                                             "php",
		"sleep 30; /usr/bin/curl -fsS https://hc/ping":                                 "curl",
		"/opt/bin/weird!name --x":                                                      "weird-name",
		"test -x /usr/sbin/anacron || { cd / && run-parts --report /etc/cron.daily; }": "run-parts-cron.daily",
	} {
		if got := jobName(cmd); got != want {
			t.Errorf("jobName(%q) = %q, want %q", cmd, got, want)
		}
	}
}

func TestImportCrontabBadInput(t *testing.T) {
	var out, errb bytes.Buffer
	if code := NewMain(&out, &errb).Run(context.Background(), []string{"import-crontab", "/nonexistent/crontab"}); code != exitUsage {
		t.Errorf("missing file: exit %d, want %d", code, exitUsage)
	}
	if !strings.Contains(errb.String(), "/nonexistent/crontab") {
		t.Errorf("the error does not name the file: %s", errb.String())
	}
	if code := NewMain(&out, &errb).Run(context.Background(), []string{"import-crontab", "--system", "--user", corpus}); code != exitUsage {
		t.Errorf("--system --user: exit %d, want %d", code, exitUsage)
	}
}

// TestImportCrontabNeedsShell: a leading NAME=value and a PATH the
// crontab sets need a shell; plain words in the daemon's PATH do not.
func TestImportCrontabNeedsShell(t *testing.T) {
	path := []crontab.Var{{Name: "PATH", Value: "/opt/bin:/usr/bin"}}
	for _, c := range []struct {
		e     crontab.Entry
		shell bool
	}{
		{crontab.Entry{Command: "LANG=C /usr/local/bin/report"}, true},
		{crontab.Entry{Command: "mytool --all", Env: path}, true},
		{crontab.Entry{Command: "/opt/bin/mytool --all", Env: path}, false},
		{crontab.Entry{Command: "/usr/bin/php /srv/cron.php"}, false},
		{crontab.Entry{Command: "backup > /var/log/backup.log"}, true},
	} {
		if argv, _ := commandOf(c.e); (argv == nil) != c.shell {
			t.Errorf("%q (env %v): shell %v, want %v", c.e.Command, c.e.Env, argv == nil, c.shell)
		}
	}
}
