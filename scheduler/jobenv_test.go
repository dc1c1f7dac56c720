package scheduler

import (
	"github.com/leasecron/leasecron/config"

	"slices"
	"strings"
	"testing"
)

func TestJobEnv(t *testing.T) {
	daemon := []string{"PATH=/bin", "NOTIFY_SOCKET=/run/x", "WATCHDOG_USEC=1", "WATCHDOG_PID=2",
		"LISTEN_FDS=1", "LEASECRON_JOB=stale", "HOME=/var/lib/leasecron", "NOTIFY_SOCKETX=kept"}
	got := jobEnv(daemon, map[string]string{"A": "1"})
	slices.Sort(got)
	want := []string{"A=1", "HOME=/var/lib/leasecron", "NOTIFY_SOCKETX=kept", "PATH=/bin"}
	if !slices.Equal(got, want) {
		t.Errorf("jobEnv = %q, want %q", got, want)
	}
}

func TestValidateID(t *testing.T) {
	for id, want := range map[string]string{
		"web-01.example.com":     "",
		"host_a:2":               "",
		"":                       "empty",
		"two words":              "spaces",
		"tab\there":              "spaces",
		"nl\n":                   "control",
		"bell\a":                 "control",
		strings.Repeat("x", 256): "longer than 255",
	} {
		err := config.ValidateID(id)
		switch {
		case want == "" && err != nil:
			t.Errorf("config.ValidateID(%q) = %v, want nil", id, err)
		case want != "" && (err == nil || !strings.Contains(err.Error(), want)):
			t.Errorf("config.ValidateID(%q) = %v, want an error about %q", id, err, want)
		}
	}
}
