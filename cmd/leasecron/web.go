package main

import (
	"bytes"
	"context"
	_ "embed"
	"fmt"
	"html/template"
	"log/slog"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/leasecron/leasecron/scheduler"
)

// The status page at `/` on the --metrics listener: server-rendered HTML
// (html/template, inline CSS, no JavaScript, nothing loaded from
// elsewhere), refreshed by the browser every statusRefresh. It reads the
// same status as `leasecron status` (scheduler.ReadStatus, through the
// daemon's own backend) and can change nothing: only GET and HEAD are
// answered, every other method gets 405.

//go:embed web/status.html
var statusHTML string

//go:embed web/style.html
var styleHTML string

// statusRefresh is the page's <meta http-equiv="refresh"> period.
const statusRefresh = 5 * time.Second

// statusCacheFor is how long one read of the backend serves page views:
// many open browser tabs cost the backend at most one status read per
// statusCacheFor.
const statusCacheFor = time.Second

// statusSource is what the page reads: the scheduler (Status and Running).
type statusSource interface {
	Status(ctx context.Context) (*scheduler.Status, error)
	Running() map[string]time.Time
	JobDetail(ctx context.Context, name string, ticks, runs int) (*scheduler.JobDetail, error)
}

// statusPage serves the web status page.
type statusPage struct {
	src     statusSource
	tmpl    *template.Template
	jobTmpl *template.Template // a job's page (web_job.go)
	log     *slog.Logger
	version string
	config  string
	started time.Time
	now     func() time.Time

	mu     sync.Mutex // serialises backend reads and guards the cache
	cached *scheduler.Status
	readAt time.Time
	err    error

	jobMu sync.Mutex         // serialises job pages' reads, apart from the main page's
	jobs  map[string]jobRead // job pages' reads (web_job.go), under jobMu
}

// newStatusPage returns the page's handler for src; config is the config
// file's path shown on the page.
func newStatusPage(src statusSource, config string, log *slog.Logger) *statusPage {
	return &statusPage{
		src:     src,
		tmpl:    template.Must(template.Must(template.New("status").Funcs(statusFuncs).Parse(statusHTML)).Parse(styleHTML)),
		jobTmpl: template.Must(template.Must(template.New("job").Funcs(statusFuncs).Parse(jobHTML)).Parse(styleHTML)),
		log:     log,
		version: Version(),
		config:  config,
		started: time.Now(),
		now:     time.Now,
	}
}

// readOnly answers only GET and HEAD with h; every other method gets 405
// Method Not Allowed (with Allow: GET, HEAD), so nothing served through it
// can be used to change state.
func readOnly(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "405 method not allowed: this server is read-only", http.StatusMethodNotAllowed)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// statusView is what the template renders.
type statusView struct {
	Now         time.Time
	Refresh     int // seconds
	Version     string
	Config      string
	Started     time.Time
	Status      *scheduler.Status
	Err         string
	Running     []runningJob
	Reachable   int
	Voting      int
	QuorumOK    bool
	RunningHere map[string]bool
}

type runningJob struct {
	Name string
	Tick time.Time
}

// ServeHTTP renders the page at "/" (GET or HEAD only; other paths 404).
func (p *statusPage) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "405 method not allowed: the status page is read-only", http.StatusMethodNotAllowed)
		return
	}
	if name, ok := strings.CutPrefix(r.URL.Path, "/job/"); ok {
		p.serveJob(w, r, name) // web_job.go
		return
	}
	if r.URL.Path != "/" {
		http.NotFound(w, r)
		return
	}
	v := p.view(r.Context())
	var buf bytes.Buffer
	if err := p.tmpl.Execute(&buf, v); err != nil {
		p.log.Error("status page: render", "err", err)
		http.Error(w, "could not render the status page", http.StatusInternalServerError)
		return
	}
	writePage(w, buf.Bytes())
}

// writePage writes a rendered page with the headers every page has.
func writePage(w http.ResponseWriter, page []byte) {
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	// No scripts, no frames, nothing from elsewhere: only the inline style.
	h.Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'; form-action 'none'")
	_, _ = w.Write(page)
}

// read returns the status, read from the backend at most once per
// statusCacheFor.
func (p *statusPage) read(ctx context.Context) (*scheduler.Status, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cached != nil && time.Since(p.readAt) < statusCacheFor {
		return p.cached, p.err
	}
	// The read serves other viewers too: a browser that goes away does not
	// cut it short.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 3*time.Second)
	defer cancel()
	st, err := p.src.Status(ctx)
	if st == nil && err == nil {
		err = fmt.Errorf("no status")
	}
	if st == nil {
		st = &scheduler.Status{}
	}
	p.cached, p.err, p.readAt = st, err, time.Now()
	return st, err
}

func (p *statusPage) view(ctx context.Context) statusView {
	st, err := p.read(ctx)
	v := statusView{
		Now:         p.now(),
		Refresh:     int(statusRefresh / time.Second),
		Version:     p.version,
		Config:      p.config,
		Started:     p.started,
		Status:      st,
		RunningHere: map[string]bool{},
	}
	if err != nil {
		v.Err = err.Error()
	}
	for name, tick := range p.src.Running() {
		v.Running = append(v.Running, runningJob{Name: name, Tick: tick})
		v.RunningHere[name] = true
	}
	sort.Slice(v.Running, func(i, j int) bool { return v.Running[i].Name < v.Running[j].Name })
	for _, n := range st.Nodes {
		if n.OK {
			v.Reachable++
			if n.Voting {
				v.Voting++
			}
		}
	}
	v.QuorumOK = st.Quorum > 0 && v.Voting >= st.Quorum
	return v
}

// statusFuncs are the template's helpers.
var statusFuncs = template.FuncMap{
	"utc": func(t time.Time) string {
		if t.IsZero() {
			return "-"
		}
		return t.UTC().Format("2006-01-02 15:04:05Z")
	},
	// short is t in UTC, without the date when t is on now's (UTC) day.
	"short": shortTime,
	// rel says how far t is from now: "in 12s" or "3m4s ago".
	"rel": func(t, now time.Time) string {
		if t.IsZero() {
			return ""
		}
		d := t.Sub(now).Round(time.Second)
		switch {
		case d > 0:
			return "in " + d.String()
		case d < 0:
			return (-d).String() + " ago"
		}
		return "now"
	},
	"dur": func(d time.Duration) string {
		switch {
		case d <= 0:
			return "0s"
		case d < time.Millisecond:
			return d.Round(time.Microsecond).String()
		case d < time.Second:
			return d.Round(100 * time.Microsecond).String()
		}
		return d.Round(time.Millisecond).String()
	},
	// holder turns a lease owner "tick=UNIX host=H" into "H · tick TIME".
	"holder": func(owner string, now time.Time) string {
		t, host, ok := strings.Cut(owner, " host=")
		if !ok || !strings.HasPrefix(t, "tick=") {
			return owner
		}
		t = strings.TrimPrefix(t, "tick=")
		if t == "manual" {
			return host + " · manual"
		}
		n, err := strconv.ParseInt(t, 10, 64)
		if err != nil {
			return owner
		}
		return host + " · tick " + shortTime(time.Unix(n, 0), now)
	},
	"lower": strings.ToLower,
	// resultClass maps a run's result to a CSS class.
	"resultClass": func(r string) string {
		switch r {
		case "ok":
			return "good"
		case "skipped", "dry_run":
			return "muted"
		case "shutdown", "stopped":
			return "warn"
		}
		return "bad"
	},
	// oldestFirst reverses runs (newest first) for a left-to-right strip.
	"oldestFirst": func(runs []scheduler.RunRecord) []scheduler.RunRecord {
		out := slices.Clone(runs)
		slices.Reverse(out)
		return out
	},
	"join": func(s []string) string {
		if len(s) == 0 {
			return "none"
		}
		return strings.Join(s, ", ")
	},
	"labels": formatLabels,
	// lineTime is an output line's time: UTC, to the millisecond.
	"lineTime": func(t time.Time) string { return t.UTC().Format("15:04:05.000") },
}

// shortTime is t in UTC, without the date when t is on now's UTC day.
func shortTime(t, now time.Time) string {
	if t.IsZero() {
		return "-"
	}
	t, now = t.UTC(), now.UTC()
	if t.YearDay() == now.YearDay() && t.Year() == now.Year() {
		return t.Format("15:04:05Z")
	}
	return t.Format("2006-01-02 15:04Z")
}
