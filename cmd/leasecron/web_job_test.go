package main

import (
	"bytes"
	"context"
	"image/png"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leasecron/leasecron/internal/testkit/redistest"
	"github.com/leasecron/leasecron/scheduler"
)

// jobPageConfig: hello prints to both streams every second; slow runs
// for a while, so that its page shows a running attempt's tail.
func jobPageConfig(nodes []string) string {
	return fleetConfig(nodes, `  - name: hello
    schedule: "@every 1s"
    shell: 'echo "hello from $LEASECRON_HOST <b>"; echo "warn on stderr" >&2'
  - name: slow
    schedule: "@every 10s"
    shell: 'for i in 1 2 3 4 5 6 7 8 9; do echo "slow step $i"; sleep 1; done'
`)
}

// TestJobPage: a daemon running real jobs on real redis-server nodes
// serves a page per job at /job/NAME: its schedule, next ticks, recent
// runs (host, tick, attempt, result, duration, fence) with each run's
// output (both streams, HTML escaped), a running attempt's tail; plain
// HTML without script; unknown jobs 404, other methods 405. The main
// page links each job to its page. A real headless Chromium renders it.
func TestJobPage(t *testing.T) {
	t.Parallel()
	cl := redistest.Start(t, 3)
	d := startDaemon(t, "-c", writeConfig(t, jobPageConfig(cl.URLs())), "--id", "host-a", "--metrics", "127.0.0.1:0")
	d.notes.await(t, "READY=1")
	base := "http://" + d.metricsAddr(t)
	var page string
	for end := time.Now().Add(60 * time.Second); time.Now().Before(end); time.Sleep(500 * time.Millisecond) {
		_, page = get(t, base+"/job/hello")
		if strings.Count(page, "out hello from host-a") >= 2 {
			break
		}
	}
	want := []string{
		"<code>@every 1s</code>", "<dt>next ticks</dt>",
		"<th>host</th><th>tick</th><th>attempt</th><th>result</th><th>duration</th><th>fence</th>",
		"<td>host-a</td>", `<span class="badge good">ok</span> exit 0`,
		"out hello from host-a &lt;b&gt;", `<span class="e">err warn on stderr</span>`,
		"the last 65536 bytes of each run",
	}
	for _, w := range want {
		if !strings.Contains(page, w) {
			t.Errorf("the job's page lacks %q:\n%s", w, page)
		}
	}
	if regexp.MustCompile(`(?i)<script|<form|<iframe|https?://`).MatchString(page) {
		t.Errorf("the job's page has a script, form, frame or an external link:\n%s", page)
	}
	if !regexp.MustCompile(`<td class="num">[1-9][0-9]*</td>\s*<td><span class="small">`).MatchString(page) {
		t.Errorf("no run shows its fencing token:\n%s", page)
	}
	// slow's page shows its running attempt's tail.
	var slow string
	for end := time.Now().Add(60 * time.Second); time.Now().Before(end); time.Sleep(500 * time.Millisecond) {
		_, slow = get(t, base+"/job/slow")
		if strings.Contains(slow, "Running now on host-a") && strings.Contains(slow, "out slow step 2") {
			break
		}
	}
	if !strings.Contains(slow, "Running now on host-a") || !strings.Contains(slow, "out slow step 2") {
		t.Errorf("slow's page shows no running attempt's tail:\n%s", slow)
	}
	if _, main := get(t, base+"/"); !strings.Contains(main, `<a href="job/hello"><b>hello</b></a>`) {
		t.Errorf("the main page does not link hello to its page")
	}
	if code, _ := get(t, base+"/job/nope"); code != http.StatusNotFound {
		t.Errorf("GET /job/nope: %d, want 404", code)
	}
	if code, _ := get(t, base+"/job/a%2Fb"); code != http.StatusNotFound {
		t.Errorf("GET /job/a%%2Fb: %d, want 404", code)
	}
	req, _ := http.NewRequest(http.MethodPost, base+"/job/hello", nil)
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST /job/hello: %v %v; want 405", resp, err)
	} else {
		resp.Body.Close()
	}
	shot := screenshot(t, base+"/job/hello", 1200, 700)
	img, err := png.Decode(bytes.NewReader(shot))
	if err != nil {
		t.Fatalf("the screenshot is not a PNG: %v", err)
	}
	colours := map[uint32]bool{}
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y += 3 {
		for x := b.Min.X; x < b.Max.X; x += 3 {
			r, g, bl, _ := img.At(x, y).RGBA()
			colours[(r>>8)<<16|(g>>8)<<8|bl>>8] = true
		}
	}
	if len(colours) < 30 {
		t.Errorf("the job page's screenshot has %d colours: blank or nearly so", len(colours))
	}
	if keep := os.Getenv("LEASECRON_JOB_SCREENSHOT"); keep != "" {
		if err := os.WriteFile(keep, shot, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// countingSource is a status page source that counts its reads of a
// job's detail (the page's cache is what is tested, not the backend).
type countingSource struct {
	mu      sync.Mutex
	details int
}

func (c *countingSource) Status(context.Context) (*scheduler.Status, error) {
	return &scheduler.Status{Host: "host-a", Jobs: []scheduler.JobStatus{{Name: "hello"}}}, nil
}
func (c *countingSource) Running() map[string]time.Time { return nil }
func (c *countingSource) JobDetail(_ context.Context, name string, _, _ int) (*scheduler.JobDetail, error) {
	if name != "hello" {
		return nil, scheduler.ErrUnknownJob
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.details++
	return &scheduler.JobDetail{Name: name, Schedule: "@every 1s"}, nil
}

func (c *countingSource) reads() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.details
}

// TestJobPageReadsOncePerSecond: many views of a job's page within a
// second cost one read of its detail (up to 20 records with output); a
// view after statusCacheFor reads again; unknown jobs are not kept.
func TestJobPageReadsOncePerSecond(t *testing.T) {
	t.Parallel()
	src := &countingSource{}
	page := newStatusPage(src, "/etc/leasecron.yaml", slog.New(slog.DiscardHandler))
	view := func(name string) int {
		rec := httptest.NewRecorder()
		page.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/job/"+name, nil))
		return rec.Code
	}
	start := time.Now()
	var wg sync.WaitGroup
	for range 50 {
		wg.Go(func() {
			if code := view("hello"); code != http.StatusOK {
				t.Errorf("GET /job/hello: %d", code)
			}
		})
	}
	wg.Wait()
	if n := src.reads(); n != 1 && time.Since(start) < statusCacheFor {
		t.Errorf("50 views within %s read the job's detail %d times; want once", time.Since(start), n)
	}
	for range 20 {
		if code := view("nope"); code != http.StatusNotFound {
			t.Errorf("GET /job/nope: %d, want 404", code)
		}
	}
	if len(page.jobs) != 1 {
		t.Errorf("the page keeps %d jobs' reads; want 1 (unknown jobs are not kept)", len(page.jobs))
	}
	time.Sleep(time.Until(start.Add(statusCacheFor + 50*time.Millisecond)))
	before := src.reads()
	view("hello")
	if src.reads() != before+1 {
		t.Errorf("a view after %s did not read the job's detail again", statusCacheFor)
	}
}
