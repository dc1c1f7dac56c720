package scheduler

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/leasecron/leasecron/lease"
)

// HostBeat is what a host announces in its heartbeat (backend space
// "hosts"): who it is, what it may run and how busy it is.
type HostBeat struct {
	Host        string            `json:"host"`
	Labels      map[string]string `json:"labels,omitempty"`
	Version     string            `json:"version"`
	Load        float64           `json:"load"`         // 1-minute load average
	Running     int               `json:"running"`      // runs in progress
	MaxParallel int               `json:"max_parallel"` // 0: no bound
	Started     time.Time         `json:"started"`
	Seen        time.Time         `json:"seen"` // the host's clock at the heartbeat
	// Containment is how the host contains its jobs' processes: "cgroup
	// PATH" or "process tree" (Scheduler.Containment).
	Containment string `json:"containment,omitempty"`
}

// fleetView is the live hosts as the last heartbeat read found them.
type fleetView struct {
	hosts []HostBeat // sorted by host
	read  time.Time  // local clock (monotonic) of the read
}

// storeName is the name of a host's or job's entries and log in the
// backend: the name itself when the backend takes it as a name, else a
// digest of it (the data keeps the real name).
func storeName(name string) string {
	if lease.CheckName("name", name) == nil {
		return name
	}
	sum := sha256.Sum256([]byte(name))
	return "h@" + hex.EncodeToString(sum[:16])
}

// beatTTL is how long a heartbeat lives: three heartbeats.
func beatTTL(c *Config) time.Duration { return 3 * c.Heartbeat }

// heartbeatLoop announces this host every Heartbeat, reads the live hosts
// and the pause flags and notes the servers' health (one round, see
// beat), and stops runs of jobs paused with --stop. It returns when ctx
// ends.
func (s *Scheduler) heartbeatLoop(ctx context.Context) {
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		cfg := s.cfg.Load()
		s.beat(ctx, cfg)
		s.stopPausedRuns()
		t.Reset(cfg.Heartbeat)
	}
}

// beat writes this host's heartbeat, reads everyone's and the pause
// flags, and notes how each server answered, in one round
// (lease.DoBeat: one round trip per server on backends that batch it),
// so that an idle host costs its store one request per heartbeat.
func (s *Scheduler) beat(ctx context.Context, cfg *Config) {
	rctx, cancel := context.WithTimeout(ctx, s.requestWait())
	defer cancel()
	hb := HostBeat{
		Host: s.host, Labels: cfg.Labels, Version: s.opts.Version, Load: loadAverage(),
		Running: s.runningCount(), MaxParallel: cfg.MaxParallel, Started: s.started, Seen: time.Now().UTC(),
		Containment: s.contain.String(),
	}
	data, _ := json.Marshal(hb)
	// A version that only grows within this process, whatever the wall
	// clock does; a restarted process starts from its wall clock, and an
	// expired entry is replaced whatever its version.
	v := s.started.UnixNano() + int64(time.Since(s.started))
	r := lease.DoBeat(rctx, s.be, lease.Beat{
		Space: s.hostsSpace(), Entry: lease.Entry{Name: storeName(s.host), Version: v, Data: data, TTL: beatTTL(cfg)},
		Read: []string{s.hostsSpace(), lease.SpacePause},
	})
	if r.PutErr != nil && ctx.Err() == nil {
		s.log.Warn("could not write this host's heartbeat", "err", r.PutErr)
	}
	if len(r.Health) > 0 && ctx.Err() == nil {
		s.noteHealth(ctx, r.Health)
	}
	if r.ReadErr != nil {
		s.readFailed(ctx, "could not read the hosts' heartbeats and the pause flags; using the last read", r.ReadErr)
		return
	}
	s.storeView(r.Lists[0])
	s.storePauses(decodePauses(r.Lists[1]))
}

// storeView makes the heartbeat entries beats, just read, the view of
// the live hosts.
func (s *Scheduler) storeView(beats []lease.Entry) {
	view := &fleetView{read: time.Now()}
	for _, e := range beats {
		var h HostBeat
		if json.Unmarshal(e.Data, &h) != nil || h.Host == "" {
			continue
		}
		view.hosts = append(view.hosts, h)
	}
	s.view.Store(view)
	s.opts.Metrics.LiveHosts(len(view.hosts))
}

// rereadView reads the hosts' heartbeats now, outside the heartbeat
// loop, for a decision a stale view would get wrong (the view of a
// fleet that just started may not list its other hosts yet). On error
// the view stays as it was.
func (s *Scheduler) rereadView(ctx context.Context) {
	rctx, cancel := context.WithTimeout(ctx, s.requestWait())
	defer cancel()
	beats, err := s.be.List(rctx, s.hostsSpace())
	if err != nil {
		s.log.Debug("could not read the hosts' heartbeats again; using the last read", "err", err)
		return
	}
	s.storeView(beats)
}

// liveHosts returns the live hosts from a heartbeat read no older than
// three heartbeats, or nil when there is none (the heartbeats are
// unknown: then every eligible host tries every tick).
func (s *Scheduler) liveHosts(cfg *Config) []HostBeat {
	v := s.view.Load()
	if v == nil || time.Since(v.read) > beatTTL(cfg) {
		return nil
	}
	return v.hosts
}

// requestWait bounds one request of the fleet layer: a few request
// timeouts, at least a second.
func (s *Scheduler) requestWait() time.Duration {
	return max(4*s.be.Timeout(), time.Second)
}

// loadAverage is the host's 1-minute load average (0 if unknown).
func loadAverage() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	f, _, _ := strings.Cut(string(b), " ")
	v, _ := strconv.ParseFloat(f, 64)
	return v
}

// PauseInfo is a fleet-wide pause flag (backend space "pause"): one per
// job, or for every job (name "*", `leasecron pause --all`). Of a job's
// flag and the "*" flag, the one written last decides.
type PauseInfo struct {
	Paused bool      `json:"paused"`
	By     string    `json:"by"` // user@host that paused or resumed
	At     time.Time `json:"at"`
	Reason string    `json:"reason,omitempty"`
	// Stop asks hosts to stop runs in progress (through the normal abort
	// path: the tick is released, not completed).
	Stop bool `json:"stop,omitempty"`
	// All is true for the flag of every job ("*").
	All bool `json:"all,omitempty"`
	// Job is the job the flag is for ("" for All).
	Job string `json:"job,omitempty"`
	// Version orders flags: each pause or resume is written with a version
	// above every flag it overrides (see SetPause), whatever the writers'
	// clocks say.
	Version int64 `json:"-"`
}

// PauseAll is the entry name of `pause --all`.
const PauseAll = "*"

// pauses is a read of the pause flags: by job name, and PauseAll.
type pauses map[string]PauseInfo

// decodePauses reads the entries of space "pause".
func decodePauses(entries []lease.Entry) pauses {
	p := pauses{}
	for _, e := range entries {
		var pi PauseInfo
		if json.Unmarshal(e.Data, &pi) != nil {
			continue
		}
		pi.Version = e.Version
		name := e.Name
		if pi.Job != "" && !pi.All {
			name = pi.Job // the entry's name may be a digest of it
		}
		p[name] = pi
	}
	return p
}

// of returns the flag that decides for job (the newer of its own and the
// "*" one); ok is false when neither exists.
func (p pauses) of(job string) (PauseInfo, bool) {
	own, okOwn := p[job]
	all, okAll := p[PauseAll]
	switch {
	case okOwn && okAll:
		if all.Version > own.Version {
			return all, true
		}
		return own, true
	case okOwn:
		return own, true
	case okAll:
		return all, true
	}
	return PauseInfo{}, false
}

// paused reports whether job is paused, with the flag that says so.
func (p pauses) paused(job string) (PauseInfo, bool) {
	pi, ok := p.of(job)
	return pi, ok && pi.Paused
}

// ReadPauses reads the fleet-wide pause flags from be.
func ReadPauses(ctx context.Context, be lease.Backend) (map[string]PauseInfo, error) {
	entries, err := be.List(ctx, lease.SpacePause)
	if err != nil {
		return nil, fmt.Errorf("read pause flags: %w", err)
	}
	return decodePauses(entries), nil
}

// SetPause writes a pause (or, with Paused false, a resume) flag for each
// of jobs, or for every job when jobs is nil (the "*" flag; a resume of
// every job also resumes each job paused on its own). Each flag gets a
// version above every flag it overrides (a job's own flag and "*"; for
// "*", every flag), so the newest command wins even when the writers'
// clocks disagree; it is read back to be sure.
func SetPause(ctx context.Context, be lease.Backend, cfg *Config, jobs []string, info PauseInfo) error {
	if info.At.IsZero() {
		info.At = time.Now().UTC()
	}
	for _, n := range jobs {
		if cfg.Job(n) == nil {
			return fmt.Errorf("no job named %q in %s", n, cfg.File)
		}
	}
	names := jobs
	if jobs == nil {
		names = []string{PauseAll}
	}
	for _, n := range names {
		if err := setPause(ctx, be, n, info); err != nil {
			return fmt.Errorf("set the pause flag of %s: %w", n, err)
		}
	}
	return nil
}

// setPause writes one flag for job (PauseAll: every job), retrying when a
// concurrent command wrote a newer version in between.
func setPause(ctx context.Context, be lease.Backend, job string, info PauseInfo) error {
	info.All, info.Job = job == PauseAll, job
	if info.All {
		info.Job = ""
	}
	data, err := json.Marshal(info)
	if err != nil {
		return err
	}
	name := storeName(job)
	for range 5 {
		current, err := be.List(ctx, lease.SpacePause)
		if err != nil {
			return err
		}
		v := info.At.UnixNano()
		for _, e := range current {
			if info.All || e.Name == name || e.Name == PauseAll {
				v = max(v, e.Version+1)
			}
		}
		if err := be.Put(ctx, lease.SpacePause, lease.Entry{Name: name, Version: v, Data: data}); err != nil {
			return err
		}
		e, ok, err := be.Get(ctx, lease.SpacePause, name)
		if err != nil {
			return err
		}
		if ok && e.Version == v {
			return nil
		}
	}
	return errors.New("other pause or resume commands kept overriding this one; check `leasecron status`")
}

// readPauses reads the pause flags into the cache and returns them; on
// error the cache stays and the error is returned (a run about to start
// must not trust a stale cache: a job paused since may not start).
func (s *Scheduler) readPauses(ctx context.Context) (pauses, error) {
	rctx, cancel := context.WithTimeout(ctx, s.requestWait())
	defer cancel()
	entries, err := s.be.List(rctx, lease.SpacePause)
	if err != nil {
		return nil, err
	}
	p := decodePauses(entries)
	s.storePauses(p)
	return p, nil
}

// storePauses makes p the cached read of the pause flags and sets the
// paused gauges.
func (s *Scheduler) storePauses(p pauses) {
	s.pauses.Store(&p)
	s.notePaused(p)
}

// notePaused sets the paused gauge of every job whose state differs from
// the last read, and of every job on the first read and after a reload
// (pause reads come every heartbeat and before every tick; setting 10,000
// gauges each time was a sixth of a busy host's CPU).
func (s *Scheduler) notePaused(p pauses) {
	cfg := s.cfg.Load()
	s.pausedMu.Lock()
	defer s.pausedMu.Unlock()
	all := s.pausedCfg != cfg
	if all || s.pausedSet == nil {
		s.pausedSet = make(map[string]bool, len(cfg.Jobs))
	}
	for _, j := range cfg.Jobs {
		_, paused := p.paused(j.Name)
		if was, ok := s.pausedSet[j.Name]; all || !ok || was != paused {
			s.opts.Metrics.Paused(j.Name, paused)
			s.pausedSet[j.Name] = paused
		}
	}
	s.pausedCfg = cfg
}

// cachedPauses is the last read of the pause flags (empty before the
// first).
func (s *Scheduler) cachedPauses() pauses {
	if p := s.pauses.Load(); p != nil {
		return *p
	}
	return pauses{}
}

// stopPausedRuns stops the runs of jobs paused with Stop.
func (s *Scheduler) stopPausedRuns() {
	p := s.cachedPauses()
	s.mu.Lock()
	defer s.mu.Unlock()
	for name, r := range s.running {
		if pi, ok := p.paused(name); ok && pi.Stop && r.stop != nil {
			select {
			case r.stop <- pi:
			default:
			}
		}
	}
}
