package config

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
)

// cronParser reads 5-field specs, 6-field specs with leading seconds, and
// descriptors (@hourly, ...). "@every" never reaches it: see parseSchedule.
// A cron.Parser holds only its options and is safe for concurrent use.
var cronParser = cron.NewParser(cron.SecondOptional | cron.Minute | cron.Hour |
	cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// sundayAsSeven rewrites day of week 7 (Sunday, as crontab(5) allows and
// Debian's own /etc/crontab writes it) as 0, the only Sunday robfig/cron
// knows: "7" is "0", "5-7" is "5-6,0", "1-7/2" is "1-6/2,0". Other parts
// are left for the parser to judge.
func sundayAsSeven(field string) string {
	parts := strings.Split(field, ",")
	out := make([]string, 0, len(parts)+1)
	for _, p := range parts {
		rng, step, hasStep := strings.Cut(p, "/")
		lo, hi, isRange := strings.Cut(rng, "-")
		l, lerr := strconv.Atoi(lo)
		st, serr := 1, error(nil)
		if hasStep {
			st, serr = strconv.Atoi(step)
		}
		switch {
		case rng == "7" && !hasStep:
			out = append(out, "0")
		case isRange && hi == "7" && lerr == nil && serr == nil && st > 0 && l >= 0 && l <= 6:
			r := lo + "-6"
			if hasStep {
				r += "/" + step
			}
			out = append(out, r)
			if (7-l)%st == 0 {
				out = append(out, "0")
			}
		default:
			out = append(out, p)
		}
	}
	return strings.Join(out, ",")
}

// maxPrevWindow bounds how far back Prev searches. It stays below the five
// years that next searches forward, so a tick inside the window is always
// found.
const maxPrevWindow = 1 << 27 * time.Second // about 4.25 years

// schedule is a job's compiled schedule: either an epoch-aligned interval
// or a cron spec in a time zone. Its zero value is not usable.
type schedule struct {
	every int64              // > 0: "@every" interval in seconds
	spec  *cron.SpecSchedule // otherwise: the cron spec
	loc   *time.Location     // the zone spec is read in
}

// parseSchedule compiles spec. loc is the job's time zone, used unless the
// spec starts with CRON_TZ= or TZ=. The error says what is wrong with spec
// without quoting it (the caller does).
func parseSchedule(spec string, loc *time.Location) (sched *schedule, err error) {
	// robfig/cron's parser is well tested, but a schedule comes from a file:
	// a panic deep in it must not take the daemon down on SIGHUP.
	defer func() {
		if r := recover(); r != nil {
			sched, err = nil, fmt.Errorf("cannot parse (%v)", r)
		}
	}()
	s := strings.TrimSpace(spec)
	if s == "" {
		return nil, errors.New("empty")
	}
	if strings.HasPrefix(s, "CRON_TZ=") || strings.HasPrefix(s, "TZ=") {
		eq := strings.IndexByte(s, '=')
		sp := strings.IndexAny(s, " \t")
		if sp < 0 {
			return nil, errors.New("a time zone prefix must be followed by a space and the schedule, as in \"CRON_TZ=Europe/Berlin 0 3 * * *\"")
		}
		name := s[eq+1 : sp]
		l, err := time.LoadLocation(name)
		if err != nil || name == "" {
			return nil, fmt.Errorf("unknown time zone %q in %s", name, s[:eq+1])
		}
		loc, s = l, strings.TrimSpace(s[sp:])
		if strings.HasPrefix(s, "CRON_TZ=") || strings.HasPrefix(s, "TZ=") {
			return nil, errors.New("more than one time zone prefix")
		}
	}
	if loc == nil {
		loc = time.UTC
	}
	if s == "@every" || strings.HasPrefix(s, "@every ") || strings.HasPrefix(s, "@every\t") {
		return parseEvery(strings.TrimSpace(s[len("@every"):]))
	}
	var f []string // the fields, for a spec that is not a descriptor
	if !strings.HasPrefix(s, "@") {
		f = strings.Fields(s)
		if n := len(f); n != 5 && n != 6 {
			return nil, fmt.Errorf("expected 5 or 6 fields, found %d (an optional seconds field, then minute hour day-of-month month day-of-week)", n)
		}
		f[len(f)-1] = sundayAsSeven(f[len(f)-1])
		s = strings.Join(f, " ")
	}
	parsed, err := cronParser.Parse(s)
	if err != nil {
		return nil, err
	}
	spec0, ok := parsed.(*cron.SpecSchedule)
	if !ok {
		return nil, fmt.Errorf("unsupported schedule type %T", parsed)
	}
	cp := *spec0
	cp.Location = loc
	if len(f) > 0 {
		// As cron reads them: a day field that starts with '*' ("*/2")
		// counts as unrestricted, so both day fields must match;
		// robfig/cron marks only "*" and "?".
		if strings.HasPrefix(f[len(f)-3], "*") {
			cp.Dom |= starBit
		}
		if strings.HasPrefix(f[len(f)-1], "*") {
			cp.Dow |= starBit
		}
	}
	sched = &schedule{spec: &cp, loc: loc}
	if sched.next(time.Now()).IsZero() {
		return nil, errors.New("never fires (no tick within the next five years)")
	}
	return sched, nil
}

// parseEvery compiles the argument of "@every".
func parseEvery(arg string) (*schedule, error) {
	if arg == "" {
		return nil, errors.New("@every needs an interval, as in \"@every 30s\"")
	}
	d, err := time.ParseDuration(arg)
	if err != nil {
		return nil, fmt.Errorf("@every interval %q is not a Go duration such as 30s, 5m or 1h30m", arg)
	}
	if d < time.Second {
		return nil, fmt.Errorf("@every interval %s is shorter than 1s", d)
	}
	if d%time.Second != 0 {
		return nil, fmt.Errorf("@every interval %s is not a whole number of seconds", d)
	}
	return &schedule{every: int64(d / time.Second), loc: time.UTC}, nil
}

// next returns the first tick strictly after t, in UTC, or the zero Time if
// there is none within five years.
//
// Cron ticks are computed here from the parsed fields rather than by
// cron.SpecSchedule.Next, which (v3.0.1) fires twice for a wall-clock time
// that repeats when a zone falls back, and can skip ticks after a
// half-hour DST shift (so that two hosts asking at different moments would
// disagree). The rule here: walk the wall-clock times that match the spec
// in order; a time that does not exist (spring forward) is skipped, and a
// time that happens twice (fall back) fires at its first occurrence only.
// That mapping from wall clock to instants is strictly increasing, so the
// ticks are one fixed set and Next is monotonic.
func (s *schedule) next(t time.Time) time.Time {
	u := floorUnix(t)
	if s.every > 0 {
		return time.Unix((floorDiv(u, s.every)+1)*s.every, 0).UTC()
	}
	sp := s.spec
	c0 := time.Unix(u, 0).In(s.loc)
	y, mo, d := c0.Date()
	h0, m0, s0 := c0.Clock()
	date := time.Date(y, mo, d, 0, 0, 0, 0, time.UTC) // the wall-clock date
	for day := 0; day <= 5*366; day, date = day+1, date.AddDate(0, 0, 1) {
		if !dayMatches(sp, date) {
			continue
		}
		base := date.Unix() // wall-clock midnight, read as if UTC
		for h := range 24 {
			if sp.Hour&(1<<h) == 0 || (day == 0 && h < h0) {
				continue
			}
			for m := range 60 {
				if sp.Minute&(1<<m) == 0 || (day == 0 && h == h0 && m < m0) {
					continue
				}
				for sec := range 60 {
					if sp.Second&(1<<sec) == 0 || (day == 0 && h == h0 && m == m0 && sec < s0) {
						continue
					}
					wall := base + int64(h*3600+m*60+sec)
					if x, ok := s.instant(wall); ok && x > u {
						return time.Unix(x, 0).UTC()
					}
				}
			}
		}
	}
	return time.Time{}
}

// starBit marks a day-of-month or day-of-week field written as * or ?
// (robfig/cron's convention) or, as cron has it, starting with '*'
// ("*/2"): then both day fields must match, otherwise either may.
const starBit = 1 << 63

// dayMatches reports whether the wall-clock date (in UTC) matches the
// spec's month and day fields, as robfig/cron reads them.
func dayMatches(sp *cron.SpecSchedule, date time.Time) bool {
	if sp.Month&(1<<uint(date.Month())) == 0 {
		return false
	}
	dom := sp.Dom&(1<<uint(date.Day())) != 0
	dow := sp.Dow&(1<<uint(date.Weekday())) != 0
	if sp.Dom&starBit != 0 || sp.Dow&starBit != 0 {
		return dom && dow
	}
	return dom || dow
}

// instant returns the first moment (Unix seconds) at which the clocks of
// s.loc read wall (seconds since 1970-01-01 00:00 of a wall clock); ok is
// false when they never do (a spring-forward gap).
func (s *schedule) instant(wall int64) (x int64, ok bool) {
	// The offset in force at the answer is one of the offsets in force
	// around it; a day either side covers every real transition.
	for _, probe := range [3]int64{wall - 86400, wall, wall + 86400} {
		off := s.offset(probe)
		if c := wall - off; s.offset(c) == off && (!ok || c < x) {
			x, ok = c, true
		}
	}
	return x, ok
}

// offset is the UTC offset of s.loc, in seconds, at Unix time x.
func (s *schedule) offset(x int64) int64 {
	_, off := time.Unix(x, 0).In(s.loc).Zone()
	return int64(off)
}

// floorUnix is t in whole Unix seconds, rounded down.
func floorUnix(t time.Time) int64 { return t.Unix() } // Unix rounds down: nanoseconds are never negative

// prev returns the latest tick at or before t, in UTC, or the zero Time if
// there is none within maxPrevWindow.
func (s *schedule) prev(t time.Time) time.Time {
	t = time.Unix(floorUnix(t), 0) // ticks are whole seconds
	if s.every > 0 {
		return time.Unix(floorDiv(t.Unix(), s.every)*s.every, 0).UTC()
	}
	// after(y): the first tick after y is later than t (or there is none).
	// It is false below the answer T and true from T on, so T is the
	// smallest y for which it holds: find a y where it fails by going back
	// in doubling steps, then bisect.
	after := func(y time.Time) bool {
		n := s.next(y)
		return n.IsZero() || n.After(t)
	}
	lo, found := time.Time{}, false
	for w := time.Second; w <= maxPrevWindow; w *= 2 {
		if lo = t.Add(-w); !after(lo) {
			found = true
			break
		}
	}
	if !found {
		return time.Time{}
	}
	hi := t
	for hi.Sub(lo) > time.Second {
		mid := lo.Add(hi.Sub(lo) / 2).Truncate(time.Second)
		if after(mid) {
			hi = mid
		} else {
			lo = mid
		}
	}
	return hi.UTC()
}

// floorDiv is a/b rounded towards minus infinity (b > 0).
func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && a < 0 {
		q--
	}
	return q
}

// Next returns the job's first tick strictly after after, in UTC, truncated
// to whole seconds. Every host computes the same ticks: "@every D" ticks are
// the multiples of D since 1970-01-01T00:00:00Z (whatever the time zone and
// whenever the daemon started), and cron specs are read in the job's time
// zone. Where a zone falls back, a wall-clock time that already had its tick
// does not get a second one; where it springs forward, times that do not
// exist are skipped.
//
// Next returns the zero Time if there is no tick within five years, or if
// the job's schedule was not compiled by Validate (Parse and Load do that).
func (j *Job) Next(after time.Time) time.Time {
	if j.sched == nil {
		return time.Time{}
	}
	return j.sched.next(after)
}

// Prev returns the job's latest tick at or before at, in UTC. It returns the
// zero Time if there is none within about four years, or if the schedule was
// not compiled by Validate. For every t, Prev(Next(t)) == Next(t).
func (j *Job) Prev(at time.Time) time.Time {
	if j.sched == nil {
		return time.Time{}
	}
	return j.sched.prev(at)
}

// DeadlineFor returns how long a run for tick may still be started or taken
// over from a host that died: tick + Deadline, or the next tick when
// Deadline is 0. If the schedule has no next tick, the deadline is tick
// itself (no late start).
func (j *Job) DeadlineFor(tick time.Time) time.Time {
	if j.Deadline > 0 {
		return tick.Add(j.Deadline)
	}
	if n := j.Next(tick); !n.IsZero() {
		return n
	}
	return tick
}
