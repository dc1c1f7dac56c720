package scheduler

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/leasecron/leasecron/lease"
)

// historyID is the ID of a run's record in the job's log: unique per
// tick, attempt and fence ("m" and the start for manual runs).
func historyID(rec RunRecord) string {
	if rec.Tick.IsZero() {
		return "m." + strconv.FormatInt(rec.Start.UnixMilli(), 10) + "." + strconv.FormatInt(rec.Fence, 10)
	}
	return strconv.FormatInt(rec.Tick.Unix(), 10) + "." + strconv.Itoa(rec.Attempt) + "." + strconv.FormatInt(rec.Fence, 10)
}

// appendHistory adds rec to the job's history in the backend (at most
// HistoryLimit records are kept), trying for up to a lease TTL, whether
// or not the run still holds its lease (the record of a run cut short by
// a lost lease matters most): the tick is completed or released only
// after this returns.
func (s *Scheduler) appendHistory(j *Job, rec RunRecord, log *slog.Logger) {
	data, err := encodeRecord(rec) // the output cut to fit lease.MaxRecordSize
	if err != nil {
		return
	}
	r := lease.Record{ID: historyID(rec), At: rec.Start, Data: data}
	// Validate gave HistoryLimit its default.
	if err := s.whileHeld(context.Background(), nil, max(s.base.Lease.TTL, time.Second), func(ctx context.Context) error { return s.be.Append(ctx, s.logName(j.Name), r, j.HistoryLimit) }); err != nil {
		log.Error("could not record the run in the job's history", "err", err)
		s.opts.Metrics.HistoryLost(j.Name)
	}
}

// DryRunJob is the name under which a dry-run scheduler (Options.DryRun)
// keeps job's lease and history: ReadHistory(ctx, be, DryRunJob(job), n)
// reads a dry run's records.
func DryRunJob(job string) string { return dryRunPrefix + job }

// missLogOf is the log of job's missed and skipped ticks: each log keeps
// history_limit records, so missed ticks never push runs out.
func missLogOf(job string) string { return storeName(job + "@missed") }

// ReadHistory returns up to n of the newest records of job from be, runs
// and missed or skipped ticks merged, newest first (`leasecron
// history`).
func ReadHistory(ctx context.Context, be lease.Backend, job string, n int) ([]RunRecord, error) {
	runs, err := be.Log(ctx, storeName(job), n)
	if err != nil {
		return nil, fmt.Errorf("read the history of %s: %w", job, err)
	}
	missed, err := be.Log(ctx, missLogOf(job), n)
	if err != nil {
		return nil, fmt.Errorf("read the missed ticks of %s: %w", job, err)
	}
	recs := mergeNewest(runs, missed, n)
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

// mergeNewest merges two logs read newest first (by At, then ID, as a
// log orders them) into the n newest records, newest first.
func mergeNewest(a, b []lease.Record, n int) []lease.Record {
	out := make([]lease.Record, 0, min(n, len(a)+len(b)))
	for len(out) < n && (len(a) > 0 || len(b) > 0) {
		if len(b) == 0 || len(a) > 0 && !newer(b[0], a[0]) {
			out, a = append(out, a[0]), a[1:]
		} else {
			out, b = append(out, b[0]), b[1:]
		}
	}
	return out
}

// newer reports whether x is newer than y in a log's order.
func newer(x, y lease.Record) bool {
	if !x.At.Equal(y.At) {
		return x.At.After(y.At)
	}
	return x.ID > y.ID
}
