package scheduler

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/leasecron/leasecron/lease"
)

// Status is what `leasecron status` shows: every job's lease and last run,
// and every node's health. Its JSON keys (`status --json`) are snake_case,
// like RunRecord's; durations are nanoseconds.
type Status struct {
	Host   string       `json:"host"`
	Quorum int          `json:"quorum"`
	Jobs   []JobStatus  `json:"jobs"`
	Nodes  []NodeStatus `json:"nodes"`
	// Hosts are the live hosts from their heartbeats, sorted by host.
	Hosts []HostBeat `json:"hosts"`
	// Errors are problems reading the fleet's state (heartbeats, pause
	// flags) that do not belong to one job.
	Errors []string `json:"errors,omitempty"`
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
	Last     *RunRecord `json:"last"` // nil if never run
	// Runs are the newest runs from the job's history, newest first (as
	// many as ReadStatus was asked for; none by default).
	Runs []RunRecord `json:"runs,omitempty"`
	// Paused is the fleet-wide pause flag that holds the job, nil when it
	// is not paused.
	Paused *PauseInfo `json:"paused"`
	// RunOn says which hosts may run the job ("any host" when all may),
	// and Eligible which of the live hosts (heartbeats) that is.
	RunOn    string   `json:"run_on"`
	Eligible []string `json:"eligible"`
	Err      string   `json:"error,omitempty"` // why the job's state could not be read
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

// ReadStatus reads every job's lease, last run and pause flag, the live
// hosts and the servers' health from be (opened on cfg's backend). now is
// the clock used for next ticks. With runs > 0 it also reads the newest
// runs of each job's history (one more request per job).
func ReadStatus(ctx context.Context, cfg *Config, be lease.Backend, now time.Time, runs int) (*Status, error) {
	st := &Status{Host: cfg.ID, Quorum: be.Quorum()}
	p, err := ReadPauses(ctx, be)
	if err != nil {
		st.Errors = append(st.Errors, err.Error())
	}
	if hosts, err := be.List(ctx, lease.SpaceHosts); err != nil {
		st.Errors = append(st.Errors, fmt.Sprintf("read the hosts' heartbeats: %v", err))
	} else {
		for _, e := range hosts {
			var h HostBeat
			if json.Unmarshal(e.Data, &h) == nil && h.Host != "" {
				st.Hosts = append(st.Hosts, h)
			}
		}
		slices.SortFunc(st.Hosts, func(a, b HostBeat) int { return strings.Compare(a.Host, b.Host) })
	}
	for _, n := range be.Health(ctx) {
		ns := NodeStatus{Node: n.Server, OK: n.Err == nil, Latency: n.Latency, Voting: n.Voting, VotingAt: n.VotingAt, RestartedAt: n.RestartedAt}
		if n.Err != nil {
			ns.Err = n.Err.Error()
		}
		st.Nodes = append(st.Nodes, ns)
	}
	for _, j := range cfg.Jobs {
		js := JobStatus{Name: j.Name, Next: j.Next(now), RunOn: j.RunOn.String(), Eligible: []string{}}
		if pi, ok := pauses(p).paused(j.Name); ok {
			js.Paused = &pi
		}
		for _, h := range st.Hosts {
			if j.RunOn.Eligible(h.Host, h.Labels) {
				js.Eligible = append(js.Eligible, h.Host)
			}
		}
		if runs > 0 {
			if recs, err := ReadHistory(ctx, be, j.Name, runs); err != nil {
				js.Err = err.Error()
			} else {
				for i := range recs {
					recs[i].Output = nil // `leasecron logs` shows it
				}
				js.Runs = recs
			}
		}
		info, err := be.Inspect(ctx, j.Name)
		if err != nil {
			js.Err = strings.TrimPrefix(js.Err+"; "+err.Error(), "; ")
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

// statusRuns is how many runs of each job's history the status page shows.
const statusRuns = 5

// Status reads the status as `leasecron status` does (ReadStatus), through
// the scheduler's own backend, with its current config and its clock. It
// changes nothing; the web status page shows it.
func (s *Scheduler) Status(ctx context.Context) (*Status, error) {
	return ReadStatus(ctx, s.cfg.Load(), s.be, s.now(), statusRuns)
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
