package scheduler

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"time"
)

// SignatureHeader carries a webhook body's HMAC-SHA256 under the hook's
// secret_file key: "sha256=" and the hex digest of the body.
const SignatureHeader = "X-Leasecron-Signature"

// Sign returns the value of SignatureHeader for body under key.
func Sign(key, body []byte) string {
	m := hmac.New(sha256.New, key)
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

// hookText is the one-line summary of ev (the body's "text").
func hookText(ev HookEvent) string {
	tick := "manual run"
	if !ev.Tick.IsZero() {
		tick = "tick " + ev.Tick.UTC().Format(time.RFC3339)
	}
	switch ev.Event {
	case EventStart:
		return fmt.Sprintf("leasecron: %s started on %s (%s)", ev.Job, ev.Host, tick)
	case EventMissed:
		return fmt.Sprintf("leasecron: %s %s %s: %s (recorded by %s)", ev.Job, ev.Result, tick, ev.Reason, ev.Host)
	}
	exit := "exit " + strconv.Itoa(ev.Exit)
	if ev.Signal != "" {
		exit = ev.Signal
	}
	return fmt.Sprintf("leasecron: %s %s on %s (%s, %s, %.1fs)", ev.Job, ev.Result, ev.Host, tick, exit, ev.Duration)
}

// hookClient has no timeout of its own: each request is bounded by the
// hook's timeout through its context. Redirects are not followed, so
// that a signed body is never sent to another place.
var hookClient = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

// post sends t's event to its webhook: one try.
func (s *Scheduler) post(ctx context.Context, t hookTask) error {
	body, err := json.Marshal(t.ev)
	if err != nil {
		return fmt.Errorf("encode the event: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, t.hook.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, t.hook.URL, bytes.NewReader(body))
	if err != nil {
		return errors.New("bad webhook url") // its text would repeat the URL
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "leasecron/"+s.opts.Version)
	req.Header.Set("X-Leasecron-Event", t.ev.Event)
	if key := t.hook.SigningKey(); key != nil {
		req.Header.Set(SignatureHeader, Sign(key, body))
	}
	resp, err := hookClient.Do(req)
	if err != nil {
		// *url.Error repeats the URL: keep its cause only.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return fmt.Errorf("POST %s: %w", t.hook.Describe(), err)
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	_ = resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("POST %s: %s", t.hook.Describe(), resp.Status)
	}
	return nil
}

// runHookCommand runs t's command once, with the run's LEASECRON_*
// environment and the file of the output's tail, killing its process
// group at the hook's timeout.
func (s *Scheduler) runHookCommand(ctx context.Context, t hookTask) error {
	tail, err := os.CreateTemp("", "leasecron-hook-*.out") // mode 0600
	if err != nil {
		return fmt.Errorf("output tail file: %w", err)
	}
	defer os.Remove(tail.Name())
	var werr error
	if t.ev.output != nil {
		werr = t.ev.output.WriteText(tail, false)
	} else {
		_, werr = tail.WriteString(t.ev.OutputTail)
	}
	if cerr := tail.Close(); werr != nil || cerr != nil {
		return fmt.Errorf("output tail file: %w", errors.Join(werr, cerr))
	}
	ctx, cancel := context.WithTimeout(ctx, t.hook.Timeout)
	defer cancel()
	path, args := "/bin/sh", []string{"-c", t.hook.Shell}
	if len(t.hook.Command) > 0 {
		path, args = t.hook.Command[0], t.hook.Command[1:]
	}
	cmd := exec.CommandContext(ctx, path, args...)
	cmd.Env = append(jobEnv(os.Environ(), t.job.Env), hookEnv(t.ev, tail.Name())...)
	cmd.Dir = t.job.Dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = time.Second
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		msg := bytes.TrimSpace(out.Bytes())
		if len(msg) > 512 {
			msg = msg[len(msg)-512:]
		}
		if ctx.Err() != nil {
			err = errors.Join(err, ctx.Err())
		}
		return fmt.Errorf("%s: %w (output: %q)", t.hook.Describe(), err, msg)
	}
	return nil
}

// hookEnv is the environment a hook command gets besides the job's.
func hookEnv(ev HookEvent, tailFile string) []string {
	env := []string{
		"LEASECRON_EVENT=" + ev.Event,
		"LEASECRON_JOB=" + ev.Job,
		"LEASECRON_HOST=" + ev.Host,
		"LEASECRON_RESULT=" + ev.Result,
		"LEASECRON_EXIT_CODE=" + strconv.Itoa(ev.Exit),
		"LEASECRON_SIGNAL=" + ev.Signal,
		"LEASECRON_DURATION=" + strconv.FormatFloat(ev.Duration, 'f', 3, 64),
		"LEASECRON_REASON=" + ev.Reason,
		"LEASECRON_OUTPUT_FILE=" + tailFile,
		"LEASECRON_ATTEMPT=" + strconv.Itoa(ev.Attempt),
		"LEASECRON_FENCING_TOKEN=" + strconv.FormatInt(ev.Fence, 10),
	}
	if ev.Manual {
		env = append(env, "LEASECRON_MANUAL=1")
	}
	if !ev.Tick.IsZero() {
		env = append(env, "LEASECRON_TICK="+ev.Tick.UTC().Format(time.RFC3339),
			"LEASECRON_TICK_UNIX="+strconv.FormatInt(ev.Tick.Unix(), 10))
	}
	return env
}
