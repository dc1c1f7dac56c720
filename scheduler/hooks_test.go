package scheduler

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/leasecron/leasecron/config"
)

// hookScheduler is a Scheduler with only what delivering the events of
// manual runs needs (they take no lease: no backend is contacted).
func hookScheduler(t *testing.T) (*Scheduler, *Metrics) {
	t.Helper()
	m := NewMetrics(prometheus.NewRegistry())
	s := &Scheduler{host: "h1", hooks: newHookQueue(), misses: newMissQueue(), opts: Options{Metrics: m, Version: "test"},
		log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	return s, m
}

// received is what a test webhook server got.
type received struct {
	mu   sync.Mutex
	reqs []*http.Request
	body [][]byte
}

func (r *received) add(req *http.Request, body []byte) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.reqs, r.body = append(r.reqs, req), append(r.body, body)
	return len(r.reqs)
}

func (r *received) n() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.reqs)
}

// TestWebhookDelivered: a webhook on loopback answers the first POST with
// 503 and the second with 200: the event is retried and delivered once,
// as JSON with the run's fields, signed with HMAC-SHA256 under the
// secret_file's key (checked here with crypto/hmac), and counted.
func TestWebhookDelivered(t *testing.T) {
	got := &received{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if got.add(r, body) == 1 {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	defer srv.Close()
	s, m := hookScheduler(t)
	key := "hook-key"
	// The hook as a file gives it, its key read from secret_file.
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "hook.key"), []byte(key+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Parse(strings.NewReader("redis: {nodes: [\"redis://127.0.0.1:1/0\"]}\njobs:\n"+
		"  - {name: backup, schedule: \"@hourly\", shell: \"true\",\n"+
		"     on_failure: {url: \""+srv.URL+"/token/path\", timeout: 5s, retries: 2, secret_file: hook.key}}\n"), filepath.Join(dir, "jobs.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	j := cfg.Jobs[0]
	stop := s.startHooks()
	rec := RunRecord{Job: "backup", Host: "h1", Fence: 7, Attempt: 1, Start: time.Unix(100, 0), End: time.Unix(102, 500e6), Exit: 3, Result: "failed",
		Output: &Output{Lines: []OutputLine{{Stream: "out", Text: "line 1"}, {Stream: "err", Text: "boom"}}}}
	s.runEnded(j, rec, true, false)
	stop()

	if got.n() != 2 {
		t.Fatalf("%d requests; want 2 (a 503, then the retry)", got.n())
	}
	for i, r := range got.reqs {
		body := got.body[i]
		mac := hmac.New(sha256.New, []byte(key))
		mac.Write(body)
		if want := "sha256=" + hex.EncodeToString(mac.Sum(nil)); r.Header.Get(SignatureHeader) != want {
			t.Errorf("request %d: signature %q, want %q", i, r.Header.Get(SignatureHeader), want)
		}
		if r.Method != http.MethodPost || r.URL.Path != "/token/path" || r.Header.Get("X-Leasecron-Event") != EventFailure ||
			r.Header.Get("Content-Type") != "application/json" {
			t.Errorf("request %d: %s %s, headers %v", i, r.Method, r.URL.Path, r.Header)
		}
	}
	var ev HookEvent
	if err := json.Unmarshal(got.body[1], &ev); err != nil {
		t.Fatal(err)
	}
	if ev.Event != EventFailure || ev.Job != "backup" || ev.Host != "h1" || !ev.Manual || ev.Result != "failed" ||
		ev.Exit != 3 || ev.Fence != 7 || ev.Duration != 2.5 || ev.OutputTail != "line 1\nboom\n" || !strings.Contains(ev.Text, "backup failed on h1") {
		t.Errorf("event %+v", ev)
	}
	if n := testutil.ToFloat64(m.hooks.fired.WithLabelValues("backup", EventFailure)); n != 1 {
		t.Errorf("hooks_fired_total %v, want 1", n)
	}
}

// TestWebhookFailureCounted: a webhook that never answers in time fails
// after its timeout and retries; the failure is counted and the hook's
// owner still stops.
func TestWebhookFailureCounted(t *testing.T) {
	got := &received{}
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body) // then the server sees the client go
		got.add(r, body)
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	defer srv.Close()
	defer close(release)
	s, m := hookScheduler(t)
	j := &Job{Name: "slow", Hooks: Hooks{OnSuccess: &Hook{URL: srv.URL, Timeout: 100 * time.Millisecond, Retries: 1}}}
	stop := s.startHooks()
	s.runEnded(j, RunRecord{Job: "slow", Result: "ok"}, true, false)
	stop()
	if got.n() != 2 {
		t.Errorf("%d requests; want 2 (one try and one retry)", got.n())
	}
	if n := testutil.ToFloat64(m.hooks.failures.WithLabelValues("slow", EventSuccess, "failed")); n != 1 {
		t.Errorf("hook_failures_total{reason=failed} %v, want 1", n)
	}
}

// TestHookCommandEnv: a command hook gets the job's env, the event's
// LEASECRON_* variables and a file holding the output's tail.
func TestHookCommandEnv(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "env")
	s, _ := hookScheduler(t)
	j := &Job{Name: "report", Env: map[string]string{"OWN": "x"}, Hooks: Hooks{OnFailure: &Hook{
		Shell: `env | grep -E '^(OWN|LEASECRON_)' | sort > "$OUT"; echo "--" >> "$OUT"; cat "$LEASECRON_OUTPUT_FILE" >> "$OUT"`, Timeout: 10 * time.Second}}}
	j.Env["OUT"] = out
	s.noHookGuard = true // a tick's event takes a lease; this test has no backend
	stop := s.startHooks()
	tick := time.Unix(1700000000, 0).UTC()
	s.runEnded(j, RunRecord{Job: "report", Tick: tick, Attempt: 2, Fence: 9, Start: tick, End: tick.Add(time.Second), Signal: "SIGKILL", Exit: -1, Result: "timeout",
		Output: &Output{Lines: []OutputLine{{Stream: "out", Text: "it broke"}}}}, false, false)
	stop()
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"OWN=x", "LEASECRON_EVENT=failure", "LEASECRON_JOB=report", "LEASECRON_HOST=h1", "LEASECRON_RESULT=timeout",
		"LEASECRON_EXIT_CODE=-1", "LEASECRON_SIGNAL=SIGKILL", "LEASECRON_DURATION=1.000", "LEASECRON_ATTEMPT=2", "LEASECRON_FENCING_TOKEN=9",
		"LEASECRON_TICK=2023-11-14T22:13:20Z", "LEASECRON_TICK_UNIX=1700000000", "LEASECRON_OUTPUT_FILE=", "--\nit broke\n"} {
		if !strings.Contains(string(data), want) {
			t.Errorf("hook saw:\n%s\nwant %q", data, want)
		}
	}
}

// TestHookQueueNeverBlocks: with its workers stuck, queuing events never
// waits: the events beyond the queue's size are dropped and counted.
func TestHookQueueNeverBlocks(t *testing.T) {
	s, m := hookScheduler(t)
	s.hooks.serving = 1 // an owner without workers: nothing is taken off the queue
	j := &Job{Name: "busy", Hooks: Hooks{OnStart: &Hook{URL: "http://127.0.0.1:9/", Timeout: time.Second}}}
	for range hookQueueSize + 10 {
		s.fireHook(j, HookEvent{Event: EventStart, Job: "busy"})
	}
	if n := testutil.ToFloat64(m.hooks.failures.WithLabelValues("busy", EventStart, "queue_full")); n != 10 {
		t.Errorf("hook_failures_total{reason=queue_full} %v, want 10", n)
	}
}
