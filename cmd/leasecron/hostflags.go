package main

import (
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/leasecron/leasecron/config"
)

// Environment variables that set what the flags of the same name set; a
// flag wins (per key for the labels).
const (
	envLabels      = "LEASECRON_LABELS"       // "k=v,k2=v2", like --label
	envMaxParallel = "LEASECRON_MAX_PARALLEL" // like --max-parallel
)

// labelFlag collects repeated --label k=v flags.
type labelFlag []string

func (l *labelFlag) String() string { return strings.Join(*l, ",") }

// Set adds one --label value.
func (l *labelFlag) Set(v string) error {
	*l = append(*l, v)
	return nil
}

// intFlag is an int flag that remembers whether it was given.
type intFlag struct {
	v   int
	set bool
}

func (f *intFlag) String() string { return strconv.Itoa(f.v) }

// Set parses the flag's value.
func (f *intFlag) Set(s string) error {
	n, err := strconv.Atoi(s)
	if err != nil {
		return fmt.Errorf("not a whole number")
	}
	f.v, f.set = n, true
	return nil
}

// hostFlags are this host's identity on the command line: --id and the
// --label flags (with LEASECRON_LABELS), as run and check take them.
type hostFlags struct {
	id     string
	labels labelFlag
}

// register adds --id and --label to fs.
func (h *hostFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&h.id, "id", "", "")
	fs.Var(&h.labels, "label", "")
}

// resolve checks the flags and returns the labels: LEASECRON_LABELS first,
// then each --label (a flag wins over the environment for its key). A bad
// label is a usage error naming it and where it came from.
func (h *hostFlags) resolve() (map[string]string, error) {
	if err := checkIDFlag(h.id); err != nil {
		return nil, err
	}
	labels := map[string]string{}
	if env := os.Getenv(envLabels); env != "" {
		if err := config.ParseLabels(labels, env); err != nil {
			return nil, usageErrorf("%s=%q: %w", envLabels, env, err)
		}
	}
	for _, l := range h.labels {
		if !strings.Contains(l, "=") {
			return nil, usageErrorf("--label %q: want key=value", l)
		}
		if strings.Contains(l, ",") {
			return nil, usageErrorf("--label %q: one key=value per --label (commas only in %s)", l, envLabels)
		}
		if err := config.ParseLabels(labels, l); err != nil {
			return nil, usageErrorf("--label %q: %w", l, err)
		}
	}
	return labels, nil
}

// given reports whether any host flag or LEASECRON_LABELS was given.
func (h *hostFlags) given() bool {
	return h.id != "" || len(h.labels) > 0 || os.Getenv(envLabels) != ""
}

// apply sets the host's id and labels on cfg (after a load or reload).
func (h *hostFlags) apply(cfg *config.Config, labels map[string]string) {
	if h.id != "" {
		cfg.ID = h.id
	}
	if len(labels) > 0 {
		cfg.Labels = labels
	}
}

// maxParallel returns the override of max_parallel from --max-parallel
// or LEASECRON_MAX_PARALLEL (the flag wins); ok is false when neither is
// given.
func maxParallel(f *intFlag) (n int, ok bool, err error) {
	if f.set {
		if f.v < 0 {
			return 0, false, usageErrorf("--max-parallel %d: want 0 (no bound) or more", f.v)
		}
		return f.v, true, nil
	}
	env, found := os.LookupEnv(envMaxParallel)
	if !found || strings.TrimSpace(env) == "" {
		return 0, false, nil
	}
	n, err = strconv.Atoi(strings.TrimSpace(env))
	if err != nil || n < 0 {
		return 0, false, usageErrorf("%s=%q: want 0 (no bound) or a positive whole number", envMaxParallel, env)
	}
	return n, true, nil
}

// formatLabels shows labels as "k=v,k2=v2", sorted by key ("-" for none).
func formatLabels(labels map[string]string) string {
	if len(labels) == 0 {
		return "-"
	}
	return strings.TrimPrefix(config.RunOn{Labels: labels}.String(), "labels ")
}
