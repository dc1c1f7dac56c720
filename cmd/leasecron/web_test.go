package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"image"
	"image/png"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/leasecron/leasecron/internal/testkit/redistest"
	"github.com/leasecron/leasecron/scheduler"
)

// demoConfig is a schedule like jobs.example.yaml's, faster: short jobs on
// a few hosts, a slow one that is often running, one that always fails.
func demoConfig(nodes []string) string {
	q := make([]string, len(nodes))
	for i, n := range nodes {
		q[i] = fmt.Sprintf("%q", n)
	}
	return fmt.Sprintf(`redis:
  nodes: [%s]
lease:
  ttl: 3s
shutdown_grace: 2s
defaults:
  kill_grace: 500ms
jobs:
  - name: hello
    schedule: "@every 2s"
    shell: 'echo "hello from $LEASECRON_HOST"'
  - name: inventory-sync
    schedule: "@every 3s"
    timeout: 2s
    shell: 'sleep 0.3; echo "synced with token $LEASECRON_FENCING_TOKEN"'
  - name: slow-report
    schedule: "@every 5s"
    timeout: 10s
    shell: 'sleep 4'
  - name: flaky-export
    schedule: "@every 3s"
    shell: 'echo "export failed" >&2; exit 3'
  - name: billing
    schedule: "@every 30s"
    command: ["true"]
  - name: nightly
    schedule: "0 3 * * *"
    command: ["true"]
`, strings.Join(q, ", "))
}

// demoPauseReason is why the demo's nightly job is paused.
const demoPauseReason = "quarter close"

// slowAgain matches the page's slow-report row while it runs on host-a
// after an earlier run of it ended ok.
var slowAgain = regexp.MustCompile(`(?s)<b>slow-report</b></a> <span class="badge run">running here</span></td>\s*<td>[^\n]*</td>\s*<td>[^\n]*</td>\s*<td>host-a · tick [^\n]*\n[^\n]*\n<td>host-a · tick [^<]*</td>\s*<td><span class="badge good">ok</span>`)

// startDemo starts 3 real redis-server nodes and two daemons (host-a with
// the metrics listener and label role=db, host-b without either) on
// demoConfig (host-b without slow-report; nightly paused), and waits until the
// page shows at least three jobs' last runs and a running job. It returns
// the page's URL.
func startDemo(t *testing.T) (url string, nodes []string, page string) {
	t.Helper()
	cl := redistest.Start(t, 3)
	cfg := demoConfig(cl.URLs())
	// host-b does not have slow-report, so that it runs on host-a only.
	cfgB := regexp.MustCompile(`(?s)  - name: slow-report\n.*?\n(  - name: )`).ReplaceAllString(cfg, "$1")
	if cfgB == cfg {
		t.Fatal("slow-report not found in the demo config")
	}
	cfgPath := writeConfig(t, cfg)
	// nightly is paused fleet-wide, so the page has a paused job to show.
	if code, _, errOut := cli(t, "pause", "-c", cfgPath, "nightly", "--reason", demoPauseReason); code != 0 {
		t.Fatalf("pause nightly: exit %d: %s", code, errOut)
	}
	a := startDaemon(t, "-c", cfgPath, "--id", "host-a", "--metrics", "127.0.0.1:0", "--label", "role=db")
	b := startDaemon(t, "-c", writeConfig(t, cfgB), "--id", "host-b")
	a.notes.await(t, "READY=1")
	b.notes.await(t, "READY=1")
	url = "http://" + a.metricsAddr(t) + "/"
	// Fresh nodes vote after one TTL (3 s); then jobs run every few seconds.
	var body string
	for end := time.Now().Add(60 * time.Second); time.Now().Before(end); time.Sleep(500 * time.Millisecond) {
		_, body = get(t, url)
		// slow-report runs again after an ok run: a holder and a last run.
		if strings.Contains(body, ">failed<") && slowAgain.MatchString(body) {
			return url, cl.URLs(), body
		}
	}
	t.Fatalf("the demo did not reach a state with runs, a failure and a running job within 60s; page:\n%s\nhost-a log:\n%s", body, a.stderr)
	return "", nil, ""
}

// TestStatusPage reads the web status page of a daemon running real jobs
// on real redis-server nodes: it shows the jobs (next tick, holder, time
// left, last run and result), the nodes (reachable, latency, voting) and
// this host; it is plain HTML with a meta refresh and no script; only GET
// and HEAD are answered (every other method 405, and the state is the same
// afterwards); other paths are 404; `status --json` uses snake_case keys
// only.
func TestStatusPage(t *testing.T) {
	t.Parallel()
	url, nodes, running := startDemo(t)
	// While a job runs on host-a, the page shows it as the holder and in
	// this host's section.
	for _, w := range []string{"host-a · tick ", `slow-report <span class="small">(tick `} {
		if !strings.Contains(running, w) {
			t.Errorf("the page lacks %q while slow-report runs on host-a:\n%s", w, running)
		}
	}
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	body := string(b)
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") {
		t.Fatalf("GET /: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'none'") {
		t.Errorf("Content-Security-Policy %q", csp)
	}
	want := []string{
		`<meta http-equiv="refresh" content="5">`,
		"quorum ok", "3 of 3 nodes reachable, 3 voting, 2 needed",
		"<b>hello</b>", "<b>inventory-sync</b>", "<b>slow-report</b>", "<b>flaky-export</b>", "<b>billing</b>",
		"exit 3",                     // flaky-export's last run
		"host-a · tick ",             // a holder (slow-report runs on host-a)
		"running here",               // ... shown in the jobs and this host's section
		"<dt>id</dt><dd>host-a</dd>", // this host
		"<dt>version</dt><dd>" + Version(),
		// the fleet: the paused job with who and why, recent runs as
		// coloured marks with the tick and host on hover, the live hosts
		"<th>job</th><th>paused</th>", "<th>recent runs</th>",
		`<span class="badge warn" title="paused by ` + whoAmI() + " at ",
		": " + demoPauseReason + `">paused</span>`,
		`<span class="mark bad" title="tick `, // flaky-export's failures
		`<span class="mark good" title="tick `,
		" · attempt 1 · failed exit 3 · ",
		`<td>host-a <span class="badge run">this host</span></td>`, "<td>role=db</td>",
		"<td>host-b</td>",
		`<td title="runs on any host; eligible live hosts: host-a, host-b"><a href="job/hello"><b>hello</b></a>`,
	}
	for _, n := range nodes {
		want = append(want, "<td>"+n+"</td>")
	}
	for _, w := range want {
		if !strings.Contains(body, w) {
			t.Errorf("the page lacks %q", w)
		}
	}
	if regexp.MustCompile(`(?i)<script|<form|<iframe|https?://(?:[^1]|1[^2])`).MatchString(body) {
		t.Errorf("the page has a script, form, frame or an external link:\n%s", body)
	}
	// nightly, "0 3 * * *": the next tick is 03:00 UTC.
	if !regexp.MustCompile(`<td>(\d{4}-\d\d-\d\d 03:00Z|03:00:00Z) <span class="small">in `).MatchString(body) {
		t.Errorf("nightly's next tick (03:00 UTC) not shown")
	}

	if resp, err := http.Head(url); err != nil || resp.StatusCode != 200 {
		t.Errorf("HEAD /: %v %v", resp, err)
	}
	for _, m := range []string{"POST", "PUT", "DELETE", "PATCH"} {
		for _, p := range []string{"/", "/metrics", "/healthz"} {
			req, _ := http.NewRequest(m, strings.TrimSuffix(url, "/")+p, strings.NewReader("job=hello"))
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") != "GET, HEAD" {
				t.Errorf("%s %s: %d, Allow %q; want 405, GET, HEAD", m, p, resp.StatusCode, resp.Header.Get("Allow"))
			}
		}
	}
	if code, _ := get(t, url+"jobs/hello"); code != http.StatusNotFound {
		t.Errorf("GET /jobs/hello: %d, want 404", code)
	}
	// The page and `status` read the same: the jobs are still there.
	if _, body := get(t, url); !strings.Contains(body, "quorum ok") || !strings.Contains(body, "<b>hello</b>") {
		t.Errorf("the page changed after the refused requests:\n%s", body)
	}

	// billing ("@every 30s") runs at its first tick after the fresh nodes
	// vote (one TTL after they started: they do not vote for ticks older
	// than their data), and then not again for 30 s.
	// A status that found no quorum in its time (a fresh race-built
	// process on a loaded machine: its first round to each node carries
	// the connection's set-up) is said with what it saw and asked again;
	// one that never succeeds fails the test.
	statusPath := writeConfig(t, demoConfig(nodes))
	var out string
	for end := time.Now().Add(45 * time.Second); ; time.Sleep(500 * time.Millisecond) {
		code, o, errOut := cli(t, "status", "-c", statusPath, "--json")
		switch {
		case code == 0:
			out = o
		case time.Now().After(end):
			t.Fatalf("status --json: exit %d: %s\n%s", code, errOut, o)
		default:
			t.Logf("status --json: exit %d: %s\n%s", code, errOut, o)
			continue
		}
		if strings.Contains(out, `"job": "billing"`) || time.Now().After(end) {
			break
		}
	}
	var v any
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Fatalf("status --json: %v\n%s", err, out)
	}
	snake := regexp.MustCompile(`^[a-z][a-z0-9]*(_[a-z0-9]+)*$`)
	keys := map[string]bool{}
	var walk func(any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, x := range v {
				keys[k] = true
				walk(x)
			}
		case []any:
			for _, x := range v {
				walk(x)
			}
		}
	}
	walk(v)
	for k := range keys {
		if !snake.MatchString(k) {
			t.Errorf("status --json key %q is not snake_case", k)
		}
	}
	for _, k := range []string{"host", "quorum", "jobs", "nodes", "name", "next", "holder", "ttl", "last", "result", "node", "ok", "latency", "voting"} {
		if !keys[k] {
			t.Errorf("status --json lacks key %q:\n%s", k, out)
		}
	}

	// The page shows what `status` reads: billing's last run names the
	// same host and tick on both (it does not run again for 30 s).
	var st scheduler.Status
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		t.Fatal(err)
	}
	for _, j := range st.Jobs {
		if j.Name != "billing" {
			continue
		}
		if j.Last == nil {
			t.Fatalf("status --json: billing did not run within 45s:\n%s", out)
		}
		// A read of the store that failed on the loaded test machine (a
		// node's 50ms timeout) shows as an error row under the job's:
		// the page is read again, past its cache, a few times.
		want := j.Last.Host + " · tick " + shortTime(j.Last.Tick, time.Now())
		var row string
		for try := 0; try < 3; try++ {
			time.Sleep(statusCacheFor + 100*time.Millisecond) // past the page's cache
			_, page := get(t, url)
			row = billingRow.FindString(page)
			if strings.Contains(row, want) || !strings.Contains(row, `class="err"`) {
				break
			}
			t.Logf("the page could not read billing's state; reading it again:\n%s", row)
		}
		if !strings.Contains(row, want) {
			t.Errorf("status says billing last ran as %q; the page's row:\n%s", want, row)
		}
	}
}

// billingRow is the status page's row of the job billing, and the error
// row under it if the page could not read the job's state.
var billingRow = regexp.MustCompile(`(?s)<b>billing</b>.*?</tr>(\s*<tr><td colspan="\d+" class="err">.*?</tr>)?`)

// chromium returns the headless browser, failing the test when it is
// missing (make deps installs Debian's chromium).
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Fatal("no chromium: install it (apt-get install chromium, or make deps)")
	return ""
}

// screenshot loads url in a real headless Chromium (no network but
// loopback needed: the page loads nothing else) and returns the PNG.
func screenshot(t *testing.T, url string, w, h int) []byte {
	t.Helper()
	dir := t.TempDir()
	file := filepath.Join(dir, "shot.png")
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, chromium(t),
		"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--disable-dev-shm-usage", "--hide-scrollbars",
		"--user-data-dir="+filepath.Join(dir, "profile"),
		"--screenshot="+file, fmt.Sprintf("--window-size=%d,%d", w, h), url)
	cmd.Env = append(os.Environ(), "HOME="+dir)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("chromium: %v\n%s", err, out.String())
	}
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatalf("chromium wrote no screenshot: %v\n%s", err, out.String())
	}
	return b
}

// TestStatusPageScreenshot renders the status page of a demo-like fleet
// (two daemons, three redis-server nodes, real jobs) in a real headless
// Chromium: the screenshot is a PNG of the window's size with the page on
// it (many colours, the header's dark band above the light body), not a
// blank or error page. LEASECRON_SCREENSHOT=FILE keeps a copy (the README's
// docs/status-page.png is made that way).
func TestStatusPageScreenshot(t *testing.T) {
	t.Parallel()
	const w, h = 1480, 620
	url, _, _ := startDemo(t)
	b := screenshot(t, url, w, h)
	img, err := png.Decode(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("the screenshot is not a PNG: %v", err)
	}
	if got := img.Bounds().Size(); got != image.Pt(w, h) {
		t.Errorf("screenshot %v, want %dx%d", got, w, h)
	}
	colours := map[uint32]int{}
	bounds := img.Bounds()
	for y := bounds.Min.Y; y < bounds.Max.Y; y += 2 {
		for x := bounds.Min.X; x < bounds.Max.X; x += 2 {
			r, g, bl, _ := img.At(x, y).RGBA()
			colours[(r>>8)<<16|(g>>8)<<8|bl>>8]++
		}
	}
	if len(colours) < 50 {
		t.Errorf("the screenshot has %d colours: blank or nearly so", len(colours))
	}
	// The header band (#1d2430) is dark, the page below it light.
	lum := func(x, y int) uint32 { r, g, b, _ := img.At(x, y).RGBA(); return (r + g + b) / 3 >> 8 }
	if top, body := lum(w-10, 5), lum(w-10, h-10); top > 80 || body < 200 {
		t.Errorf("luminance at the header %d, at the bottom %d: want a dark header over a light page", top, body)
	}
	if keep := os.Getenv("LEASECRON_SCREENSHOT"); keep != "" {
		if err := os.WriteFile(keep, b, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("screenshot kept in %s", keep)
	}
}

// TestStatusPageNoQuorum: with no backend node reachable the page still
// renders (200), says the quorum is lost and shows each node's error.
func TestStatusPageNoQuorum(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, "-c", writeConfig(t, goodConfig), "--metrics", "127.0.0.1:0")
	d.notes.await(t, "READY=1")
	code, body := get(t, "http://"+d.metricsAddr(t)+"/")
	if code != http.StatusOK {
		t.Fatalf("GET /: %d\n%s", code, body)
	}
	for _, w := range []string{"QUORUM LOST", "0 of 3 nodes reachable, 0 voting, 2 needed", `<span class="badge bad">no</span>`, "refused"} {
		if !strings.Contains(body, w) {
			t.Errorf("the page lacks %q:\n%s", w, body)
		}
	}
}
