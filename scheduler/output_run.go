package scheduler

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/leasecron/leasecron/internal/supervisor"
	"github.com/leasecron/leasecron/lease"
)

// SpaceOutput is the space of entries (lease.Entries) where a host running
// a job publishes the tail of the running attempt's output, for
// `leasecron logs -f` on any host: one entry per job (named like its
// history log), a LiveTail.
const SpaceOutput = "output"

// Publishing a running attempt's tail.
const (
	// publishEvery is how often a running attempt's tail is published
	// when it printed something new: the latency of `logs -f`, plus its
	// own poll.
	publishEvery = time.Second
	// liveTailTTL is how long a published tail outlives its last Put: a
	// host that died stops refreshing it, and it expires.
	liveTailTTL = 15 * time.Second
	// liveTailBytes bounds the lines of a published tail, so that the
	// entry stays within lease.MaxEntrySize.
	liveTailBytes = 12 << 10
)

// LiveTail is the entry a host publishes in SpaceOutput while it runs an
// attempt of a job, and once more when the attempt ended (Done).
type LiveTail struct {
	Host    string    `json:"host"`
	Tick    time.Time `json:"tick"` // zero for a manual run
	Attempt int       `json:"attempt"`
	Fence   int64     `json:"fence"`
	Start   time.Time `json:"start"`
	// Done is set by the last publication, after the run's record was
	// appended to the history; Result is then the run's.
	Done   bool   `json:"done,omitempty"`
	Result string `json:"result,omitempty"`
	// Output holds the newest lines only (about 12 KiB).
	Output Output `json:"output"`
}

// runOutput is a running attempt's output: the readers of its two pipes
// (each line to the journal, or raw to Options.JobStdout/JobStderr, and
// into the bounded tail) and the publisher of the tail.
type runOutput struct {
	s    *Scheduler
	name string // the entry's name: the job's history log
	tail *outputTail
	live LiveTail
	wg   sync.WaitGroup // the readers

	stop      context.CancelFunc
	published chan struct{} // closed when the publisher returned
	version   int64
	log       *slog.Logger
}

// captureOutput starts reading proc's output for the run rec of j and
// publishing its tail.
func (s *Scheduler) captureOutput(j *Job, rec RunRecord, proc *supervisor.Process, log *slog.Logger) *runOutput {
	o := &runOutput{
		s: s, name: s.logName(j.Name), tail: newOutputTail(j.OutputLimit, newRedactor(j)), log: log,
		live:      LiveTail{Host: rec.Host, Tick: rec.Tick, Attempt: rec.Attempt, Fence: rec.Fence, Start: rec.Start},
		published: make(chan struct{}),
	}
	read := func(stream, short string, r io.Reader, raw io.Writer) {
		defer o.wg.Done()
		if r == nil {
			return
		}
		readLines(r, raw, func(line []byte) {
			text := o.tail.add(short, line)
			if raw == nil {
				log.Info(text, "stream", stream)
			}
		})
	}
	o.wg.Add(2)
	go read("stdout", "out", proc.Stdout(), s.opts.JobStdout)
	go read("stderr", "err", proc.Stderr(), s.opts.JobStderr)
	ctx, cancel := context.WithCancel(context.Background())
	o.stop = cancel
	go o.publish(ctx)
	return o
}

// result stops the publisher and returns the tail for the run's record
// (call it once the readers are done).
func (o *runOutput) result() *Output {
	o.stop()
	<-o.published
	out := o.tail.snapshot(0)
	return &out
}

// done publishes the attempt's end, after its record is in the history.
func (o *runOutput) done(rec RunRecord) {
	o.live.Done, o.live.Result = true, rec.Result
	o.put(context.Background())
}

// publish puts the tail every publishEvery while it grows (and every
// liveTailTTL/3 when it does not) until ctx ends.
func (o *runOutput) publish(ctx context.Context) {
	defer close(o.published)
	o.put(ctx)
	t := time.NewTicker(publishEvery)
	defer t.Stop()
	seen, last := int64(-1), time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if n := o.tail.lineCount(); n != seen || time.Since(last) >= liveTailTTL/3 {
			seen, last = n, time.Now()
			o.put(ctx)
		}
	}
}

// put stores the tail as it is now. Failures are logged at debug: the
// tail is a convenience, the record in the history is what counts.
func (o *runOutput) put(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, o.s.requestWait())
	defer cancel()
	if o.version == 0 {
		// Above whatever a previous run (another host, another clock)
		// published last, so that this run's tail replaces it.
		if e, ok, err := o.s.be.Get(ctx, SpaceOutput, o.name); err == nil && ok {
			o.version = e.Version
		}
	}
	o.version = max(o.version+1, time.Now().UnixMicro())
	live := o.live
	var data []byte
	for limit := liveTailBytes; ; limit /= 2 {
		live.Output = o.tail.snapshot(limit)
		b, err := json.Marshal(live)
		if err != nil {
			return
		}
		if len(b) <= lease.MaxEntrySize || limit < 256 {
			data = b
			break
		}
	}
	if len(data) > lease.MaxEntrySize {
		return
	}
	if err := o.s.be.Put(ctx, SpaceOutput, lease.Entry{Name: o.name, Version: o.version, Data: data, TTL: liveTailTTL}); err != nil {
		o.log.Debug("could not publish the output's tail", "err", err)
	}
}

// ReadLiveTail returns the tail of job's running (or just ended) attempt
// as its host last published it; ok is false when no host publishes one.
func ReadLiveTail(ctx context.Context, be lease.Backend, job string) (t LiveTail, ok bool, err error) {
	e, ok, err := be.Get(ctx, SpaceOutput, storeName(job))
	if err != nil || !ok {
		return t, false, err
	}
	if err := json.Unmarshal(e.Data, &t); err != nil {
		return t, false, err
	}
	return t, true, nil
}
