package scheduler

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/leasecron/leasecron/backend"
)

// storeName is the name of a job's (or host's) entries and log in the
// backend: the name itself when the backend takes it, else a digest of
// it (the data keeps the real name).
func storeName(name string) string { return entryName(name) }

// historyID is the ID of a run's record in the job's log: unique per
// tick, attempt and fence ("m" and the start for manual runs).
func historyID(rec RunRecord) string {
	if rec.Tick.IsZero() {
		return "m." + strconv.FormatInt(rec.Start.UnixMilli(), 10) + "." + strconv.FormatInt(rec.Fence, 10)
	}
	return strconv.FormatInt(rec.Tick.Unix(), 10) + "." + strconv.Itoa(rec.Attempt) + "." + strconv.FormatInt(rec.Fence, 10)
}

// appendHistory adds rec to the job's history in the backend (at most
// HistoryLimit records are kept), trying for up to half a lease TTL: the
// run's lease is still held and renewed meanwhile, and the tick is
// completed only after this returns.
func (s *Scheduler) appendHistory(j *Job, rec RunRecord, log *slog.Logger) {
	data, err := json.Marshal(rec)
	if err != nil {
		return
	}
	limit := j.HistoryLimit
	if limit <= 0 {
		limit = defaultHistoryLimit
	}
	r := backend.Record{ID: historyID(rec), At: rec.Start, Data: data}
	ctx, cancel := context.WithTimeout(context.Background(), max(s.base.Lease.TTL/2, time.Second))
	defer cancel()
	for wait := 50 * time.Millisecond; ; wait = min(wait*2, time.Second) {
		rctx, rcancel := context.WithTimeout(ctx, s.requestWait())
		err = s.be.Append(rctx, s.logName(j.Name), r, limit)
		rcancel()
		if err == nil {
			return
		}
		select {
		case <-ctx.Done():
			log.Error("could not record the run in the job's history", "err", err)
			s.opts.Metrics.HistoryLost(j.Name)
			return
		case <-time.After(wait):
		}
	}
}

// DryRunJob is the name under which a dry-run scheduler (Options.DryRun)
// keeps job's lease and history: ReadHistory(ctx, be, DryRunJob(job), n)
// reads a dry run's records.
func DryRunJob(job string) string { return dryRunPrefix + job }

// ReadHistory returns up to n of the newest run records of job from be,
// newest first (`leasecron history`).
func ReadHistory(ctx context.Context, be backend.Backend, job string, n int) ([]RunRecord, error) {
	recs, err := be.Log(ctx, storeName(job), n)
	if err != nil {
		return nil, fmt.Errorf("read the history of %s: %w", job, err)
	}
	out := make([]RunRecord, 0, len(recs))
	for _, r := range recs {
		var rec RunRecord
		if err := json.Unmarshal(r.Data, &rec); err != nil {
			return nil, fmt.Errorf("history of %s: record %s: %w", job, r.ID, err)
		}
		out = append(out, rec)
	}
	return out, nil
}
