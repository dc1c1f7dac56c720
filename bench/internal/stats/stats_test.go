package stats

import (
	"testing"
	"time"
)

func TestPercentile(t *testing.T) {
	var v []time.Duration
	for i := 1; i <= 100; i++ {
		v = append(v, time.Duration(i))
	}
	for _, tc := range []struct {
		p    float64
		want time.Duration
	}{{50, 50}, {90, 90}, {99, 99}, {100, 100}, {0, 1}} {
		if got := Percentile(v, tc.p); got != tc.want {
			t.Errorf("Percentile(%v) = %v, want %v", tc.p, got, tc.want)
		}
	}
	if Percentile(nil, 50) != 0 {
		t.Error("Percentile(nil) != 0")
	}
}

func TestMedianAndSummarize(t *testing.T) {
	if m := Median([]float64{3, 1, 2}); m != 2 {
		t.Errorf("Median odd = %v", m)
	}
	if m := Median([]float64{4, 1, 2, 3}); m != 2.5 {
		t.Errorf("Median even = %v", m)
	}
	s := Summarize(Run{Ops: 4, Elapsed: 2 * time.Second, Lat: []time.Duration{4, 1, 3, 2}})
	if s.Rate != 2 || s.P50 != 2 || s.Max != 4 {
		t.Errorf("Summarize = %+v", s)
	}
	ss := []Summary{{Rate: 1}, {Rate: 3}, {Rate: 2}}
	if got := MedianOf(ss, func(s Summary) float64 { return s.Rate }); got != 2 {
		t.Errorf("MedianOf = %v", got)
	}
	if got := Spread(ss, func(s Summary) float64 { return s.Rate }); got != 1 {
		t.Errorf("Spread = %v", got)
	}
}
