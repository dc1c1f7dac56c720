// Package stats summarises benchmark runs: throughput and latency
// percentiles of one run, and medians of a statistic across repetitions.
package stats

import (
	"math"
	"slices"
	"time"
)

// Run is the outcome of one timed run of one case.
type Run struct {
	Ops     int             // operations completed in the measured window
	Elapsed time.Duration   // length of the measured window
	Lat     []time.Duration // latency of each operation, sorted by Summarize
	Errors  int             // operations that failed unexpectedly
	Counts  map[string]int  // case-specific counters (wins, refused, keys left, ...)
}

// Summary is the digest of one Run.
type Summary struct {
	Rate          float64 // Ops per second
	P50, P90, P99 time.Duration
	Max           time.Duration
	Errors        int
	Counts        map[string]int
	Elapsed       time.Duration
}

// Summarize sorts r.Lat and computes the summary.
func Summarize(r Run) Summary {
	slices.Sort(r.Lat)
	s := Summary{Errors: r.Errors, Counts: r.Counts, Elapsed: r.Elapsed}
	if r.Elapsed > 0 {
		s.Rate = float64(r.Ops) / r.Elapsed.Seconds()
	}
	s.P50 = Percentile(r.Lat, 50)
	s.P90 = Percentile(r.Lat, 90)
	s.P99 = Percentile(r.Lat, 99)
	if len(r.Lat) > 0 {
		s.Max = r.Lat[len(r.Lat)-1]
	}
	return s
}

// Percentile returns the p-th percentile (nearest rank) of sorted values,
// or 0 for none.
func Percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	rank := int(math.Ceil(p / 100 * float64(len(sorted))))
	rank = min(max(rank, 1), len(sorted))
	return sorted[rank-1]
}

// Median returns the median of the values (mean of the middle two for an
// even count), or 0 for none.
func Median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// MedianOf applies f to each summary and returns the median.
func MedianOf(ss []Summary, f func(Summary) float64) float64 {
	v := make([]float64, len(ss))
	for i, s := range ss {
		v[i] = f(s)
	}
	return Median(v)
}

// MedianDur is MedianOf for a duration statistic.
func MedianDur(ss []Summary, f func(Summary) time.Duration) time.Duration {
	return time.Duration(MedianOf(ss, func(s Summary) float64 { return float64(f(s)) }))
}

// SumCount adds counter name over all summaries.
func SumCount(ss []Summary, name string) int {
	n := 0
	for _, s := range ss {
		n += s.Counts[name]
	}
	return n
}

// Spread returns (max-min)/median of f over the summaries, as a fraction.
func Spread(ss []Summary, f func(Summary) float64) float64 {
	if len(ss) < 2 {
		return 0
	}
	v := make([]float64, len(ss))
	for i, s := range ss {
		v[i] = f(s)
	}
	m := Median(v)
	if m == 0 {
		return 0
	}
	return (slices.Max(v) - slices.Min(v)) / m
}
