package config

import (
	"github.com/leasecron/leasecron/lease"

	"strings"
	"testing"
	"time"
)

// TestTimingRuleBoundary: ttl·(1−drift) ≥ renew + kill_grace + kill margin
// (200ms + 2T) + 2T is accepted exactly at the boundary and rejected 1ms
// below it, with the error at the ttl's line naming the numbers.
func TestTimingRuleBoundary(t *testing.T) {
	for _, tc := range []struct {
		drift      string
		at, below  string
		wantInText []string
	}{
		// 3s + 5s + (200ms + 200ms) + 200ms = 8.6s
		{"0", "8.6s", "8.599s", []string{"ttl 8.599s is too short", "= 8.599s must cover renew (3s)",
			"kill_grace (5s", "the kill margin (400ms = 200ms + 2×redis.timeout) + 2×redis.timeout (200ms) = 8.6s", "the minimum ttl is 8.6s"}},
		// 8.6s / 0.99 = 8.68687s
		{"0.01", "8.687s", "8.686s", []string{"ttl 8.686s is too short", "ttl×(1−drift 0.01) = 8.599s", "= 8.6s", "the minimum ttl is 8.687s"}},
	} {
		config := func(ttl string) string {
			return "redis:\n  nodes: [redis://127.0.0.1:6379/0]\n  timeout: 100ms\n" +
				"lease:\n  renew: 3s\n  drift: " + tc.drift + "\n  ttl: " + ttl + "\n" +
				"defaults:\n  kill_grace: 5s\n" + job1
		}
		if _, err := parse(t, config(tc.at)); err != nil {
			t.Errorf("drift %s: ttl %s (at the boundary) rejected: %v", tc.drift, tc.at, err)
		}
		_, err := parse(t, config(tc.below))
		for _, want := range tc.wantInText {
			wantError(t, err, 7, "lease.ttl", want)
		}
		if err != nil && !strings.HasPrefix(err.Error(), "jobs.yaml:7: lease.ttl: ") {
			t.Errorf("drift %s: error does not start with the file and line of the ttl: %v", tc.drift, err)
		}
	}
}

// TestTimingRuleDefaults: every backend's default timeout passes the rule
// with the default lease (ttl 30s, renew 10s) and kill_grace (5s), with at
// least 5s to spare.
func TestTimingRuleDefaults(t *testing.T) {
	for _, tc := range []struct {
		section string
		timeout time.Duration
	}{
		{node1, 50 * time.Millisecond},
		{"postgres:\n  url: postgres://u@127.0.0.1/ops\n", 2 * time.Second},
		{"etcd:\n  endpoints:\n    - http://127.0.0.1:2379\n", 500 * time.Millisecond},
		{"zookeeper:\n  servers:\n    - 127.0.0.1:2181\n", time.Second},
	} {
		c := mustParse(t, tc.section+job1)
		l, grace := c.Lease, c.Jobs[0].KillGrace
		if c.Timeout() != tc.timeout || l.TTL != 30*time.Second || l.Renew != 10*time.Second || grace != 5*time.Second {
			t.Fatalf("%s: timeout %s ttl %s renew %s kill_grace %s: not the defaults this test assumes", c.backendName(), c.Timeout(), l.TTL, l.Renew, grace)
		}
		spare := time.Duration(float64(l.TTL)*(1-l.Drift)) - (l.Renew + grace + lease.KillMargin(tc.timeout) + 2*tc.timeout)
		if spare < 5*time.Second {
			t.Errorf("%s: the defaults pass the timing rule with only %s to spare", c.backendName(), spare)
		}
	}
}
