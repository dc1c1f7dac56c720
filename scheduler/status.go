package scheduler

import (
	"context"
	"encoding/json"
	"time"

	"github.com/leasecron/leasecron/backend"
)

// Status is what `leasecron status` shows: every job's lease and last run,
// and every node's health. Its JSON keys (`status --json`) are snake_case,
// like RunRecord's; durations are nanoseconds.
type Status struct {
	Host   string       `json:"host"`
	Quorum int          `json:"quorum"`
	Jobs   []JobStatus  `json:"jobs"`
	Nodes  []NodeStatus `json:"nodes"`
}

// JobStatus is one job's state as read from the nodes.
type JobStatus struct {
	Name string    `json:"name"`
	Next time.Time `json:"next"` // next tick on this host's clock
	// Holder is who holds the job's lease now ("tick=... host=..."), "" if free.
	Holder string `json:"holder"`
	// TTL is how long the current lease has left (on a quorum).
	TTL time.Duration `json:"ttl"`
	// DoneTick is the newest completed tick (zero if none).
	DoneTick time.Time  `json:"done_tick"`
	Fence    int64      `json:"fence"`
	Last     *RunRecord `json:"last"`            // nil if never run
	Err      string     `json:"error,omitempty"` // why the job's state could not be read
}

// NodeStatus is one Redis node's health.
type NodeStatus struct {
	Node        string        `json:"node"` // password redacted
	OK          bool          `json:"ok"`
	Err         string        `json:"error,omitempty"`
	Latency     time.Duration `json:"latency"`
	Voting      bool          `json:"voting"`
	VotingAt    time.Time     `json:"voting_at"`
	RestartedAt time.Time     `json:"restarted_at"`
}

// ReadStatus reads every job's lease and last run, and the servers'
// health, from be (opened on cfg's backend). now is the clock used for
// next ticks.
func ReadStatus(ctx context.Context, cfg *Config, be backend.Backend, now time.Time) (*Status, error) {
	st := &Status{Host: cfg.ID, Quorum: be.Quorum()}
	for _, n := range be.Health(ctx) {
		ns := NodeStatus{Node: n.Server, OK: n.Err == nil, Latency: n.Latency, Voting: n.Voting, VotingAt: n.VotingAt, RestartedAt: n.RestartedAt}
		if n.Err != nil {
			ns.Err = n.Err.Error()
		}
		st.Nodes = append(st.Nodes, ns)
	}
	for _, j := range cfg.Jobs {
		js := JobStatus{Name: j.Name, Next: j.Next(now)}
		info, err := be.Inspect(ctx, j.Name)
		if err != nil {
			js.Err = err.Error()
		}
		js.Holder, js.TTL, js.Fence = info.Holder, info.TTL, info.Fence
		if info.DoneEpoch > 0 {
			js.DoneTick = time.Unix(info.DoneEpoch, 0).UTC()
		}
		if info.Note != "" {
			var rec RunRecord
			if json.Unmarshal([]byte(info.Note), &rec) == nil {
				js.Last = &rec
			}
		}
		st.Jobs = append(st.Jobs, js)
	}
	return st, nil
}

// Status reads the status as `leasecron status` does (ReadStatus), through
// the scheduler's own backend, with its current config and its clock. It
// changes nothing; the web status page shows it.
func (s *Scheduler) Status(ctx context.Context) (*Status, error) {
	return ReadStatus(ctx, s.cfg.Load(), s.be, s.now())
}

// Running returns the jobs running on this host now, each with its tick
// (zero for a manual trigger).
func (s *Scheduler) Running() map[string]time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]time.Time, len(s.running))
	for name, r := range s.running {
		out[name] = r.tick
	}
	return out
}
