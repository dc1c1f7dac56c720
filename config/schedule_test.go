package config

import (
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"
	_ "time/tzdata" // the zone tests must not depend on the machine's tzdata
)

// compile returns a validated job with the given schedule and time zone.
func compile(t *testing.T, spec, tz string) *Job {
	t.Helper()
	c := Default()
	c.ID = "h1"
	c.Backend = NewRedis("redis://127.0.0.1:6379/0")
	j := &Job{Name: "j", Schedule: spec, Timezone: tz, Shell: "true", KillGrace: time.Second}
	c.Jobs = []*Job{j}
	if err := c.Validate(); err != nil {
		t.Fatalf("%q in %q: %v", spec, tz, err)
	}
	return j
}

// ticks lists the ticks of j in (from, to].
func ticks(j *Job, from, to time.Time) []time.Time {
	var out []time.Time
	for t := j.Next(from); !t.IsZero() && !t.After(to); t = j.Next(t) {
		out = append(out, t)
		if len(out) > 100_000 {
			panic("too many ticks")
		}
	}
	return out
}

func utc(s string) time.Time {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		panic(err)
	}
	return t.UTC()
}

func formatAll(ts []time.Time, loc *time.Location) []string {
	out := make([]string, len(ts))
	for i, t := range ts {
		out[i] = t.In(loc).Format("2006-01-02 15:04:05 MST")
	}
	return out
}

// TestEveryAligned: "@every D" ticks are the multiples of D since the Unix
// epoch, the same whenever the count starts and whatever the time zone.
func TestEveryAligned(t *testing.T) {
	for _, tc := range []struct {
		spec, tz string
		every    int64
	}{
		{"@every 30s", "", 30},
		{"@every 30s", "Asia/Kolkata", 30},
		{"CRON_TZ=America/New_York @every 30s", "UTC", 30},
		{"@every 7m", "", 420},
		{"@every 1h30m", "Australia/Adelaide", 5400},
		{"@every 1s", "", 1},
		{"  @every\t45s ", "", 45},
	} {
		j := compile(t, tc.spec, tc.tz)
		end := utc("2025-01-01T14:00:00Z")
		a := ticks(j, utc("2025-01-01T10:00:07.123Z"), end)
		b := ticks(j, utc("2025-01-01T10:13:59.999999999Z"), end)
		if len(a) == 0 || len(b) == 0 {
			t.Fatalf("%q: no ticks", tc.spec)
		}
		// Both starts give the same ticks from b's first on.
		i := 0
		for i < len(a) && a[i].Before(b[0]) {
			i++
		}
		if !reflect.DeepEqual(a[i:], b) {
			t.Errorf("%q: the ticks depend on the start:\n%v\n%v", tc.spec, a[i:], b)
		}
		for k, tick := range a {
			if tick.Unix()%tc.every != 0 || tick.Nanosecond() != 0 || tick.Location() != time.UTC {
				t.Errorf("%q: tick %s is not a multiple of %ds since the epoch (UTC)", tc.spec, tick, tc.every)
			}
			if k > 0 && tick.Sub(a[k-1]) != time.Duration(tc.every)*time.Second {
				t.Errorf("%q: gap %s", tc.spec, tick.Sub(a[k-1]))
			}
		}
	}
	// Exact values, also before 1970.
	j := compile(t, "@every 30s", "")
	for _, tc := range []struct{ at, next, prev string }{
		{"2025-01-01T10:00:07Z", "2025-01-01T10:00:30Z", "2025-01-01T10:00:00Z"},
		{"2025-01-01T10:00:30Z", "2025-01-01T10:01:00Z", "2025-01-01T10:00:30Z"},
		{"2025-01-01T10:00:29.999Z", "2025-01-01T10:00:30Z", "2025-01-01T10:00:00Z"},
		{"1969-12-31T23:59:15Z", "1969-12-31T23:59:30Z", "1969-12-31T23:59:00Z"},
		{"1969-12-31T23:59:30.5Z", "1970-01-01T00:00:00Z", "1969-12-31T23:59:30Z"},
	} {
		if got := j.Next(utc(tc.at)); !got.Equal(utc(tc.next)) {
			t.Errorf("Next(%s) = %s, want %s", tc.at, got, tc.next)
		}
		if got := j.Prev(utc(tc.at)); !got.Equal(utc(tc.prev)) {
			t.Errorf("Prev(%s) = %s, want %s", tc.at, got, tc.prev)
		}
	}
}

// TestSkewedHosts: two hosts whose clocks are 1.5s ahead and 1.5s behind
// compute the same ticks over an hour, each from its own clock, each
// computing its next tick a little late after every tick it fired.
func TestSkewedHosts(t *testing.T) {
	real0 := utc("2025-03-30T00:20:00Z") // Europe springs forward at 01:00Z
	end := real0.Add(time.Hour)
	for _, tc := range []struct{ spec, tz string }{
		{"@every 30s", ""},
		{"@every 7s", "Europe/Berlin"},
		{"* * * * * *", ""},
		{"*/5 * * * * *", "Europe/Berlin"},
		{"0 */2 * * * *", "Europe/Berlin"},
		{"CRON_TZ=Asia/Kathmandu */3 * * * *", ""},
		{"@hourly", "Asia/Kolkata"},
	} {
		j := compile(t, tc.spec, tc.tz)
		rng := rand.New(rand.NewPCG(1, 2))
		host := func(skew time.Duration) map[int64]bool {
			set := map[int64]bool{}
			now := real0.Add(skew) // the host's clock
			for {
				tick := j.Next(now)
				if tick.IsZero() || tick.After(end.Add(skew)) {
					return set
				}
				// The host fires when its clock reads tick, then works
				// out the next tick up to 900ms later.
				set[tick.Unix()] = true
				now = tick.Add(time.Duration(rng.Int64N(int64(900 * time.Millisecond))))
			}
		}
		a, b := host(1500*time.Millisecond), host(-1500*time.Millisecond)
		// Compare where both hosts were up: real0+1.5s .. end-1.5s.
		lo, hi := real0.Add(1500*time.Millisecond).Unix(), end.Add(-1500*time.Millisecond).Unix()
		n := 0
		for _, pair := range []struct{ x, y map[int64]bool }{{a, b}, {b, a}} {
			for tick := range pair.x {
				if tick > lo && tick <= hi {
					n++
					if !pair.y[tick] {
						t.Errorf("%q: tick %s on one host only", tc.spec, time.Unix(tick, 0).UTC())
					}
				}
			}
		}
		if n == 0 {
			t.Errorf("%q: no ticks compared", tc.spec)
		}
	}
}

// TestDST: cron specs are read in their zone. Where it springs forward,
// times that do not exist are skipped; where it falls back, a wall-clock
// time gets one tick, not two.
func TestDST(t *testing.T) {
	ny, err := time.LoadLocation("America/New_York") // time/tzdata is linked in
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, spec, tz string
		from, to       string
		want           []string // wall clock in New York
	}{
		{"spring forward skips 02:30", "CRON_TZ=America/New_York 30 2 * * *", "UTC",
			"2025-03-08T00:00:00Z", "2025-03-12T00:00:00Z",
			[]string{"2025-03-08 02:30:00 EST", "2025-03-10 02:30:00 EDT", "2025-03-11 02:30:00 EDT"}},
		{"spring forward hourly", "TZ=America/New_York 0 * * * *", "",
			"2025-03-09T04:30:00Z", "2025-03-09T08:00:00Z",
			[]string{"2025-03-09 00:00:00 EST", "2025-03-09 01:00:00 EST", "2025-03-09 03:00:00 EDT", "2025-03-09 04:00:00 EDT"}},
		{"fall back runs 01:30 once", "CRON_TZ=America/New_York 30 1 * * *", "Asia/Tokyo",
			"2025-11-01T00:00:00Z", "2025-11-04T00:00:00Z",
			[]string{"2025-11-01 01:30:00 EDT", "2025-11-02 01:30:00 EDT", "2025-11-03 01:30:00 EST"}},
		{"fall back hourly", "CRON_TZ=America/New_York 0 * * * *", "",
			"2025-11-02T03:30:00Z", "2025-11-02T08:00:00Z",
			[]string{"2025-11-02 00:00:00 EDT", "2025-11-02 01:00:00 EDT", "2025-11-02 02:00:00 EST", "2025-11-02 03:00:00 EST"}},
		{"fall back in the job's zone", "*/20 * * * *", "America/New_York",
			"2025-11-02T05:10:00Z", "2025-11-02T07:30:00Z",
			[]string{"2025-11-02 01:20:00 EDT", "2025-11-02 01:40:00 EDT", "2025-11-02 02:00:00 EST", "2025-11-02 02:20:00 EST"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			j := compile(t, tc.spec, tc.tz)
			got := ticks(j, utc(tc.from), utc(tc.to))
			if g := formatAll(got, ny); !reflect.DeepEqual(g, tc.want) {
				t.Errorf("ticks\n%q\nwant\n%q", g, tc.want)
			}
			// Prev agrees: each tick is its own Prev, and one second
			// before it the Prev is the tick before.
			for i, tick := range got {
				if p := j.Prev(tick); !p.Equal(tick) {
					t.Errorf("Prev(%s) = %s", tick, p)
				}
				if i > 0 {
					if p := j.Prev(tick.Add(-time.Second)); !p.Equal(got[i-1]) {
						t.Errorf("Prev(%s - 1s) = %s, want %s", tick, p, got[i-1])
					}
				}
			}
		})
	}
	// Inside the repeated hour: the 01:30 tick was the first 01:30.
	j := compile(t, "CRON_TZ=America/New_York 30 1 * * *", "")
	at := utc("2025-11-02T06:45:00Z") // 01:45 EST, the second 01:45
	if p := j.Prev(at); !p.Equal(utc("2025-11-02T05:30:00Z")) {
		t.Errorf("Prev(01:45 EST) = %s, want 01:30 EDT", p.In(ny))
	}
	if n := j.Next(utc("2025-11-02T06:15:00Z")); !n.Equal(utc("2025-11-03T06:30:00Z")) {
		t.Errorf("Next(01:15 EST) = %s, want the next day's 01:30 EST", n.In(ny))
	}
}

func TestHourly(t *testing.T) {
	j := compile(t, "@hourly", "")
	if n := j.Next(utc("2025-05-05T10:15:30Z")); !n.Equal(utc("2025-05-05T11:00:00Z")) {
		t.Errorf("Next = %s", n)
	}
	if n := j.Next(utc("2025-05-05T11:00:00Z")); !n.Equal(utc("2025-05-05T12:00:00Z")) {
		t.Errorf("Next from a tick = %s", n)
	}
	if p := j.Prev(utc("2025-05-05T10:15:30Z")); !p.Equal(utc("2025-05-05T10:00:00Z")) {
		t.Errorf("Prev = %s", p)
	}
	// The job's zone counts: on the hour in India is half past in UTC.
	j = compile(t, "@hourly", "Asia/Kolkata")
	if n := j.Next(utc("2025-05-05T10:15:30Z")); !n.Equal(utc("2025-05-05T10:30:00Z")) {
		t.Errorf("Kolkata Next = %s", n)
	}
	for spec, want := range map[string]string{
		"@daily":   "2025-05-06T00:00:00Z",
		"@weekly":  "2025-05-11T00:00:00Z",
		"@monthly": "2025-06-01T00:00:00Z",
		"@yearly":  "2026-01-01T00:00:00Z",
	} {
		if n := compile(t, spec, "").Next(utc("2025-05-05T10:15:30Z")); !n.Equal(utc(want)) {
			t.Errorf("%s: Next = %s, want %s", spec, n, want)
		}
	}
}

func TestSecondsField(t *testing.T) {
	for _, tc := range []struct {
		spec, from string
		want       []string
	}{
		{"*/10 * * * * *", "2025-05-05T10:00:05Z", []string{"2025-05-05T10:00:10Z", "2025-05-05T10:00:20Z", "2025-05-05T10:00:30Z"}},
		{"30 0 3 * * *", "2025-05-05T10:00:05Z", []string{"2025-05-06T03:00:30Z", "2025-05-07T03:00:30Z", "2025-05-08T03:00:30Z"}},
		{"0 3 * * *", "2025-05-05T10:00:05Z", []string{"2025-05-06T03:00:00Z", "2025-05-07T03:00:00Z", "2025-05-08T03:00:00Z"}},
		{"15,45 * * * * *", "2025-05-05T10:00:15.5Z", []string{"2025-05-05T10:00:45Z", "2025-05-05T10:01:15Z", "2025-05-05T10:01:45Z"}},
		{"0 0 * * 1-5", "2025-05-09T12:00:00Z", []string{"2025-05-12T00:00:00Z", "2025-05-13T00:00:00Z", "2025-05-14T00:00:00Z"}},
	} {
		j := compile(t, tc.spec, "")
		var got []string
		for at := utc(tc.from); len(got) < len(tc.want); {
			at = j.Next(at)
			got = append(got, at.Format(time.RFC3339))
		}
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%q: %q, want %q", tc.spec, got, tc.want)
		}
	}
}

// TestPrevNext: for random times, Next(t) > t, Prev(t) <= t, no tick lies
// in (Prev(t), t], Prev(Next(t)) == Next(t), and ticks are whole seconds.
func TestPrevNext(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(3, 4))
	lo, hi := utc("1990-01-01T00:00:00Z").UnixNano(), utc("2040-01-01T00:00:00Z").UnixNano()
	for _, tc := range []struct{ spec, tz string }{
		{"@every 30s", ""},
		{"@every 25h", ""},
		{"*/5 * * * *", ""},
		{"15 */2 * * * *", "Europe/Berlin"},
		{"CRON_TZ=America/New_York 30 1 * * *", ""},
		{"0 * * * *", "America/New_York"},
		{"0 0 1 */3 *", "Australia/Lord_Howe"}, // a 30-minute DST shift
		{"0 0 29 2 *", ""},
		{"@weekly", "Pacific/Chatham"},
		{"* * * * * *", ""},
	} {
		j := compile(t, tc.spec, tc.tz)
		for range 200 {
			at := time.Unix(0, lo+rng.Int64N(hi-lo)).UTC()
			if rng.IntN(4) == 0 {
				at = at.Truncate(time.Second)
			}
			n, p := j.Next(at), j.Prev(at)
			if n.IsZero() || p.IsZero() {
				t.Fatalf("%q at %s: next %s prev %s", tc.spec, at, n, p)
			}
			if !n.After(at) || p.After(at) {
				t.Errorf("%q at %s: next %s prev %s", tc.spec, at, n, p)
			}
			if n.Nanosecond() != 0 || p.Nanosecond() != 0 {
				t.Errorf("%q at %s: not whole seconds: next %s prev %s", tc.spec, at, n, p)
			}
			if pn := j.Prev(n); !pn.Equal(n) {
				t.Errorf("%q at %s: Prev(Next) = %s, Next = %s", tc.spec, at, pn, n)
			}
			if np := j.Next(p); !np.Equal(n) {
				t.Errorf("%q at %s: Next(Prev) = %s, want Next = %s (a tick in (Prev, t]?)", tc.spec, at, np, n)
			}
		}
	}
}

// TestPrevBounded: Prev gives up (zero Time) rather than search for ever.
func TestPrevBounded(t *testing.T) {
	j := compile(t, "0 0 29 2 *", "")
	if p := j.Prev(utc("2027-06-01T00:00:00Z")); !p.Equal(utc("2024-02-29T00:00:00Z")) {
		t.Errorf("Prev = %s", p)
	}
	// 2100 is not a leap year: the latest 29 February before 2101 is in
	// 2096, more than four years back.
	if p := j.Prev(utc("2101-01-01T00:00:00Z")); !p.IsZero() {
		t.Errorf("Prev = %s, want zero", p)
	}
	if n := j.Next(utc("2097-01-01T00:00:00Z")); !n.IsZero() {
		t.Errorf("Next = %s, want zero (none within five years)", n)
	}
	var unset Job
	if !unset.Next(time.Now()).IsZero() || !unset.Prev(time.Now()).IsZero() {
		t.Error("an uncompiled job has ticks")
	}
}

func TestDeadlineFor(t *testing.T) {
	tick := utc("2025-05-05T10:00:30Z")
	j := compile(t, "@every 30s", "")
	if d := j.DeadlineFor(tick); !d.Equal(tick.Add(30 * time.Second)) {
		t.Errorf("default deadline %s, want the next tick", d)
	}
	j.Deadline = 2 * time.Minute
	if d := j.DeadlineFor(tick); !d.Equal(tick.Add(2 * time.Minute)) {
		t.Errorf("deadline 2m: %s", d)
	}
	j = compile(t, "0 3 * * *", "")
	tick = utc("2025-05-05T03:00:00Z")
	if d := j.DeadlineFor(tick); !d.Equal(utc("2025-05-06T03:00:00Z")) {
		t.Errorf("daily: %s", d)
	}
	j = compile(t, "0 0 29 2 *", "")
	tick = utc("2096-02-29T00:00:00Z")
	if d := j.DeadlineFor(tick); !d.Equal(tick) {
		t.Errorf("no next tick: %s, want the tick itself", d)
	}
}

// TestScheduleErrors: what a bad schedule says.
func TestScheduleErrors(t *testing.T) {
	for _, tc := range []struct{ spec, want string }{
		{"", "empty"},
		{"* * * *", "expected 5 or 6 fields"},
		{"* * * * * * *", "found 7"},
		{"*/0 * * * *", "step"},
		{"@every -5s", "shorter than 1s"},
		{"@every 1500ms", "whole number of seconds"},
		{"@every 30", "not a Go duration"},
		{"@reboot", "@reboot"},
		{"CRON_TZ=Mars/Base * * * * *", `unknown time zone "Mars/Base"`},
		{"CRON_TZ= * * * * *", `unknown time zone ""`},
		{"CRON_TZ=UTC TZ=UTC * * * * *", "more than one"},
		{"0 0 31 4 *", "never fires"},
	} {
		_, err := parseSchedule(tc.spec, time.UTC)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want %q", tc.spec, err, tc.want)
		}
	}
}

// TestSundayAsSeven: crontab(5) lets day of week 7 be Sunday (Debian's own
// /etc/crontab writes "47 6 * * 7"); the ticks are those of 0.
func TestSundayAsSeven(t *testing.T) {
	from := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC) // a Thursday
	for spec, want := range map[string][]int{              // days of November/December 2026
		"0 0 * * 7":     {29, 6, 13},
		"0 0 * * 5-7":   {27, 28, 29},
		"0 0 * * 1-7/2": {27, 29, 30},
		"0 0 * * 6,7":   {28, 29, 5},
		"0 0 * * 0":     {29, 6, 13},
	} {
		s, err := parseSchedule(spec, time.UTC)
		if err != nil {
			t.Errorf("%q: %v", spec, err)
			continue
		}
		at := from
		for _, day := range want {
			at = s.next(at)
			if at.Day() != day {
				t.Errorf("%q: tick %s, want day %d", spec, at, day)
				break
			}
		}
	}
	if _, err := parseSchedule("0 0 * * 8", time.UTC); err == nil {
		t.Error("day of week 8 accepted")
	}
}

// TestStarStepDayFields: as in cron, a day field that starts with '*'
// counts as unrestricted, so "0 0 */2 * 1" is the odd days that are
// Mondays, not every odd day and every Monday.
func TestStarStepDayFields(t *testing.T) {
	s, err := parseSchedule("0 0 */2 * 1", time.UTC)
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	for range 4 {
		at = s.next(at)
		if at.Weekday() != time.Monday || at.Day()%2 != 1 {
			t.Fatalf("tick %s: want an odd day that is a Monday", at)
		}
	}
	either, err := parseSchedule("0 0 1,15 * 5", time.UTC) // both restricted: either
	if err != nil {
		t.Fatal(err)
	}
	if got := either.next(time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)); got.Day() != 27 {
		t.Errorf("0 0 1,15 * 5 after Thursday 26th: %s, want Friday 27th", got)
	}
}
