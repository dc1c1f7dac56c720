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
	d, err := p.src.JobDetail(ctx, name, jobPageTicks, jobPageRuns)
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
