package config

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"
)

// Hook events: what a job's on_start, on_success, on_failure and
// on_missed hooks fire on.
const (
	EventStart   = "start"
	EventSuccess = "success"
	EventFailure = "failure"
	EventMissed  = "missed"
)

// hookEvents lists the events in the order of their keys.
var hookEvents = []string{EventStart, EventSuccess, EventFailure, EventMissed}

// Defaults of a hook.
const (
	defaultHookTimeout = 10 * time.Second
	defaultHookRetries = 3
	maxHookRetries     = 10
	// maxHookTimeout bounds a hook's timeout, so that a delivery (at most
	// 1 + maxHookRetries tries and their backoff) ends in bounded time:
	// another tick's event of the job waits for it.
	maxHookTimeout = time.Minute
)

// Hook is what a job's on_start, on_success, on_failure or on_missed key
// runs: a command (Command or Shell, as the job's own) or a webhook (URL,
// a POST of the event as JSON, signed with the key in SecretFile when
// set). Exactly one of URL, Command and Shell is set.
type Hook struct {
	URL     string
	Command []string
	Shell   string
	// Timeout bounds one try (the command's run, or one HTTP request);
	// default 10s.
	Timeout time.Duration
	// Retries is how many times a failed try is repeated, with a
	// doubling backoff from 1s; default 3, at most 10.
	Retries int
	// SecretFile names a file whose content (one line) keys the
	// HMAC-SHA256 signature of a webhook's body (header
	// X-Leasecron-Signature: sha256=HEX). A relative path is read from
	// the config file's directory.
	SecretFile string

	key   *secret // read from SecretFile by Validate
	field string  // "defaults.on_failure" or "jobs[2].on_failure", for messages
}

// Hooks are a job's hooks, by event; nil: none.
type Hooks struct {
	OnStart, OnSuccess, OnFailure, OnMissed *Hook
}

// For returns the hook of event (EventStart, ...), nil if none.
func (h Hooks) For(event string) *Hook {
	switch event {
	case EventStart:
		return h.OnStart
	case EventSuccess:
		return h.OnSuccess
	case EventFailure:
		return h.OnFailure
	case EventMissed:
		return h.OnMissed
	}
	return nil
}

// set sets the hook of the key on_EVENT.
func (h *Hooks) set(key string, hk *Hook) {
	switch key {
	case "on_start":
		h.OnStart = hk
	case "on_success":
		h.OnSuccess = hk
	case "on_failure":
		h.OnFailure = hk
	case "on_missed":
		h.OnMissed = hk
	}
}

// rawHookKeys are the hook keys of a job, which the defaults section may
// set too.
type rawHookKeys struct {
	OnStart   *rawHook `yaml:"on_start"`
	OnSuccess *rawHook `yaml:"on_success"`
	OnFailure *rawHook `yaml:"on_failure"`
	OnMissed  *rawHook `yaml:"on_missed"`
}

// rawHook is one hook as the file writes it.
type rawHook struct {
	URL        text     `yaml:"url"`
	Command    []*text  `yaml:"command" want:"must be a list (exec form), such as [\"/usr/local/bin/notify\", \"--job\"]; use shell: for a command line"`
	Shell      text     `yaml:"shell"`
	Timeout    duration `yaml:"timeout"`
	Retries    integer  `yaml:"retries"`
	SecretFile text     `yaml:"secret_file"`
}

// hookField returns the hook key's field of r (nil if key is not one).
func hookField(r *rawHookKeys, key string) any {
	return map[string]any{"on_start": &r.OnStart, "on_success": &r.OnSuccess, "on_failure": &r.OnFailure, "on_missed": &r.OnMissed}[key]
}

// hook reads the hook at field into j; false when it is null or bad
// (bad values are reported).
func (d *decoder) hook(j *Job, key string, r *rawHook, field string) bool {
	if r == nil || d.src.isFailed(field) {
		return false
	}
	h := &Hook{Timeout: defaultHookTimeout, Retries: defaultHookRetries, field: field}
	ok := true
	take := func(k string, l leaf) bool {
		got := d.take(field+"."+k, l)
		ok = ok && l.bad == ""
		return got
	}
	if take("url", r.URL.leaf) {
		h.URL = r.URL.v
	}
	if take("shell", r.Shell.leaf) {
		h.Shell = r.Shell.v
	}
	if take("timeout", r.Timeout.leaf) {
		h.Timeout = r.Timeout.v
	}
	if take("retries", r.Retries.leaf) {
		h.Retries = r.Retries.v
	}
	if take("secret_file", r.SecretFile.leaf) {
		h.SecretFile = r.SecretFile.v
	}
	if r.Command != nil {
		h.Command = d.texts(field+".command", r.Command, "empty argument; quote it (\"\") if it is meant to be empty")
	}
	if !ok {
		return false
	}
	j.Hooks.set(key, h)
	return true
}

// hooks checks the hooks of every job and reads their secret files
// (each hook once: a hook of the defaults section is shared by the jobs
// that inherit it, and reported where it is written).
func (v *validator) hooks() {
	seen := map[*Hook]bool{}
	for _, j := range v.c.Jobs {
		if j == nil {
			continue
		}
		for _, ev := range hookEvents {
			h := j.Hooks.For(ev)
			if h == nil || seen[h] {
				continue
			}
			seen[h] = true
			field := h.field
			if field == "" {
				field = j.field(v.c) + ".on_" + ev
			}
			v.hook(h, field, j.Line)
		}
	}
}

// hook checks one hook written at field.
func (v *validator) hook(h *Hook, field string, line int) {
	f := func(k string) string { return field + "." + k }
	n := 0
	for _, set := range []bool{h.URL != "", len(h.Command) > 0, strings.TrimSpace(h.Shell) != ""} {
		if set {
			n++
		}
	}
	switch {
	case n == 0:
		v.errorf(field, line, "a hook needs url (a webhook), command (exec form, a list) or shell (a command line)")
	case n > 1:
		v.errorf(field, line, "set one of url, command and shell")
	case h.URL != "":
		if err := checkHookURL(h.URL); err != nil {
			v.errorf(f("url"), line, "%v", err)
		}
	case len(h.Command) > 0 && h.Command[0] == "":
		v.errorf(f("command[0]"), line, "the program to run is empty")
	}
	switch {
	case h.Timeout <= 0:
		v.errorf(f("timeout"), line, "timeout %s must be positive", h.Timeout)
	case h.Timeout > maxHookTimeout:
		v.errorf(f("timeout"), line, "timeout %s: at most %s", h.Timeout, maxHookTimeout)
	}
	if h.Retries < 0 || h.Retries > maxHookRetries {
		v.errorf(f("retries"), line, "retries %d: want 0 to %d", h.Retries, maxHookRetries)
	}
	switch {
	case h.SecretFile == "":
	case h.URL == "":
		v.errorf(f("secret_file"), line, "secret_file signs a webhook's body: it needs url")
	default:
		h.key = v.passwordFile(f("secret_file"), h.SecretFile)
	}
}

// checkHookURL checks a webhook's URL without repeating it (it may hold
// a token, as Slack's and Healthchecks.io's do).
func checkHookURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return fmt.Errorf("bad url: %w", err)
	}
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return errors.New("bad url: want an http:// or https:// URL")
	case u.Host == "":
		return errors.New("bad url: no host")
	case u.User != nil:
		return errors.New("bad url: no user or password in a webhook URL; use secret_file to sign the body")
	}
	return nil
}

// RedactURL is raw without its path, query and user, for logs: webhook
// URLs often carry a token.
func RedactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return "(webhook)"
	}
	return u.Scheme + "://" + u.Host + "/…"
}

// Describe names the hook for logs: the webhook's scheme and host (its
// path may hold a token), or the command's program.
func (h *Hook) Describe() string {
	switch {
	case h.URL != "":
		return RedactURL(h.URL)
	case len(h.Command) > 0:
		return h.Command[0]
	}
	return "/bin/sh -c"
}

// SigningKey is the key read from SecretFile that signs a webhook's body,
// nil without one. It is a secret: never log it.
func (h *Hook) SigningKey() []byte {
	if h.key == nil {
		return nil
	}
	return []byte(h.key.s)
}
