package main

import (
	"bytes"
	"context"
	_ "embed"
	"errors"
	"net/http"
	"time"

	"github.com/leasecron/leasecron/config"
	"github.com/leasecron/leasecron/scheduler"
)

// A job's page at /job/NAME on the --metrics listener: its schedule and
// next ticks, its row of the status page (holder, pause, eligible hosts),
// the running attempt's tail as its host publishes it, and its recent
// runs (host, tick, attempt, result, duration, fence) each with the tail
// of its output from the history. Read-only and plain like the main page
// (no script, nothing from elsewhere).

//go:embed web/job.html
var jobHTML string

// Job page sizes.
const (
	jobPageTicks = 5  // next ticks shown
	jobPageRuns  = 20 // recent runs shown, with their output
)

// jobView is what the job page's template renders.
type jobView struct {
	Now     time.Time
	Refresh int
	Host    string
	Detail  *scheduler.JobDetail
	Job     *scheduler.JobStatus // the job's row of the status, nil if not read
	Err     string
}

// serveJob renders job name's page; an unknown job is 404.
func (p *statusPage) serveJob(w http.ResponseWriter, r *http.Request, name string) {
	if !config.ValidJobName(name) {
		http.NotFound(w, r)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
	defer cancel()
	d, err := p.readJob(ctx, name)
	if errors.Is(err, scheduler.ErrUnknownJob) || d == nil {
		http.NotFound(w, r)
		return
	}
	st, serr := p.read(ctx)
	v := jobView{Now: p.now(), Refresh: int(statusRefresh / time.Second), Host: st.Host, Detail: d}
	for i := range st.Jobs {
		if st.Jobs[i].Name == name {
			v.Job = &st.Jobs[i]
		}
	}
	if err = errors.Join(err, serr); err != nil {
		v.Err = err.Error()
	}
	var buf bytes.Buffer
	if err := p.jobTmpl.Execute(&buf, v); err != nil {
		p.log.Error("job page: render", "job", name, "err", err)
		http.Error(w, "could not render the job's page", http.StatusInternalServerError)
		return
	}
	writePage(w, buf.Bytes())
}

// jobRead is one read of a job's detail, serving its page's views for
// statusCacheFor.
type jobRead struct {
	d   *scheduler.JobDetail
	err error
	at  time.Time
}

// readJob returns job name's detail, read from the backend at most once
// per statusCacheFor however many browsers show its page (a read carries
// up to jobPageRuns records with their output). Only jobs of the config
// are kept, and only while fresh.
func (p *statusPage) readJob(ctx context.Context, name string) (*scheduler.JobDetail, error) {
	p.jobMu.Lock()
	defer p.jobMu.Unlock()
	now := time.Now()
	if c, ok := p.jobs[name]; ok && now.Sub(c.at) < statusCacheFor {
		return c.d, c.err
	}
	for n, c := range p.jobs {
		if now.Sub(c.at) >= statusCacheFor {
			delete(p.jobs, n)
		}
	}
	// Like read: the read serves other viewers too.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	d, err := p.src.JobDetail(rctx, name, jobPageTicks, jobPageRuns)
	if errors.Is(err, scheduler.ErrUnknownJob) || d == nil {
		return d, err
	}
	if p.jobs == nil {
		p.jobs = make(map[string]jobRead)
	}
	p.jobs[name] = jobRead{d: d, err: err, at: time.Now()}
	return d, err
}
