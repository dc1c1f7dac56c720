package scheduler

import (
	"context"
	"encoding/json"
	"time"

	"github.com/leasecron/leasecron/backend"
)

// Status is what `leasecron status` shows: every job's lease and last run,
// and every node's health.
type Status struct {
	Host   string
	Quorum int
	Jobs   []JobStatus
	Nodes  []NodeStatus
}

// JobStatus is one job's state as read from the nodes.
type JobStatus struct {
	Name string
	Next time.Time // next tick on this host's clock
	// Holder is who holds the job's lease now ("tick=... host=..."), "" if free.
	Holder string
	// TTL is how long the current lease has left (on a quorum).
	TTL time.Duration
	// DoneTick is the newest completed tick (zero if none).
	DoneTick time.Time
	Fence    int64
	Last     *RunRecord // nil if never run
	Err      string     // why the job's state could not be read
}

// NodeStatus is one Redis node's health.
type NodeStatus struct {
	Node        string // password redacted
	OK          bool
	Err         string
	Latency     time.Duration
	Voting      bool
	VotingAt    time.Time
	RestartedAt time.Time
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
