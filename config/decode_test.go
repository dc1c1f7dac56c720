package config

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
)

// TestDecodeStructure: what yaml.v3 cannot decode at all (items that are
// not mappings, mappings with a duplicate key) is reported at its line,
// and the rest of the file is still decoded and checked, with every field
// path pointing at the right item.
func TestDecodeStructure(t *testing.T) {
	lines := func(t *testing.T, err error) []string {
		t.Helper()
		var got []string
		for _, e := range configErrors(t, err) {
			got = append(got, fmt.Sprintf("%d %s", e.Line, e.Field))
		}
		return got
	}
	for _, tc := range []struct {
		name, config string
		want         []string // "LINE FIELD" of every error, in order
	}{
		{"items that are not jobs keep the paths of the others",
			node1 + "jobs:\n  - x\n  - {name: a, schedule: '@daily', shell: x}\n  - [y]\n  - {name: a, schedule: '61 * * * *', shell: x}\n  -\n",
			[]string{"5 jobs[0]", "7 jobs[2]", "8 jobs[3].name", "8 jobs[3].schedule", "9 jobs[4]"}},
		{"duplicate key in a job; the next job is still checked",
			node1 + "jobs:\n  - name: a\n    schedule: '@daily'\n    shell: x\n    shell: y\n  - {name: b, schedule: '61 * * * *', shell: x}\n",
			[]string{"8 jobs[0].shell", "9 jobs[1].schedule"}},
		{"duplicate job key does not shift the next job",
			node1 + "jobs:\n  - {name: a, name: b}\n  - {name: c, schedule: '@daily', shell: x, timeout: soon}\n",
			[]string{"5 jobs[0].name", "6 jobs[1].timeout"}},
		{"duplicate env key", node1 + "jobs:\n  - {name: a, schedule: '@daily', shell: x, env: {A: 1, A: 2}}\n",
			[]string{"5 jobs[0].env.A"}},
		{"duplicate top-level key", node1 + job1 + "id: a\nid: b\n", []string{"9 id"}},
		{"duplicate key in the lease section", node1 + job1 + "lease:\n  ttl: 1s\n  ttl: 2s\n", []string{"10 lease.ttl"}},
		{"duplicate key in a merged mapping",
			node1 + "jobs:\n  - <<: {nam: a, nam: b}\n    name: a\n    schedule: '@daily'\n    shell: x\n",
			[]string{"5 jobs[0].nam"}},
		{"unknown key in an aliased job, once",
			node1 + "jobs:\n  - &j {name: a, schedule: '@daily', shell: x, tiemout: 1s}\n  - *j\n  - *j\n",
			[]string{"5 jobs[0].tiemout", "5 jobs[1].name", "5 jobs[2].name"}}, // where the name is written
		{"merge of a list holding a value", node1 + job1 + "    <<: [{dir: /x}, 1]\n", []string{"8 jobs[0]"}},
		{"unknown keys at every level", "redis:\n  nodes: [redis://a]\n  prefx: p\nlease: {tl: 1s}\ndefaults: {timzone: UTC}\n" + job1 + "    nmae: b\n",
			[]string{"3 redis.prefx", "4 lease.tl", "5 defaults.timzone", "10 jobs[0].nmae"}},
		{"wrong kinds everywhere", "redis: {nodes: {a: 1}, prefix: [p]}\nlease: []\ndefaults: {env: [A]}\n" + job1 + "    command: x\n    env: {A: [1]}\n",
			[]string{"1 redis.nodes", "1 redis.prefix", "2 lease", "3 defaults.env", "8 jobs[0].command", "9 jobs[0].env.A"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parse(t, tc.config)
			if got := lines(t, err); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("errors\n%v\ngot  %q\nwant %q", err, got, tc.want)
			}
		})
	}
}

// TestAnchorsAndAliases: anchors, aliases and merge keys decode as YAML
// says: a mapping's own keys win over merged ones, earlier merged
// mappings over later ones; aliased values are copies.
func TestAnchorsAndAliases(t *testing.T) {
	c := mustParse(t, `redis:
  nodes: &nodes [redis://a:1, redis://b:1, redis://c:1]
  timeout: &t 20ms
defaults:
  env: &env {A: "1", B: "2"}
jobs:
  - &base {name: one, schedule: '@daily', command: [/bin/x, &arg --flag], timeout: *t}
  - <<: [{name: two, dir: /a}, *base, {dir: /b, kill_grace: 2s}]
    env: {<<: *env, B: "3"}
  - {name: three, schedule: '@hourly', command: [*arg, *arg]}
`)
	two, three := c.Job("two"), c.Job("three")
	if c.redis().Timeout.String() != "20ms" || len(c.redis().Nodes) != 3 {
		t.Errorf("redis %+v", c.redis())
	}
	if two == nil || two.Dir != "/a" || two.KillGrace.String() != "2s" || two.Timeout.String() != "20ms" ||
		!reflect.DeepEqual(two.Env, map[string]string{"A": "1", "B": "3"}) || two.Line != 8 {
		t.Errorf("two = %+v", two)
	}
	if three == nil || !reflect.DeepEqual(three.Command, []string{"--flag", "--flag"}) {
		t.Errorf("three = %+v", three)
	}
	two.Command[0] = "changed"
	if c.Job("one").Command[0] != "/bin/x" {
		t.Error("aliased jobs share their command")
	}
}

// TestUnknownKeyHints: a misspelt key gets a suggestion, and a password
// key says where passwords go.
func TestUnknownKeyHints(t *testing.T) {
	for key, want := range map[string]string{
		"nodse":    `did you mean "nodes"?`,
		"Timeout":  `did you mean "timeout"?`,
		"password": "put the password in the URL or in a file named by password_file",
		"zzzzzzzz": "(allowed: nodes, prefix, timeout, password_file)",
	} {
		_, err := parse(t, node1+"  "+key+": x\n"+job1)
		wantError(t, err, 4, "redis."+key, want)
		if strings.Count(err.Error(), "\n") != 0 {
			t.Errorf("%s: more than one error: %v", key, err)
		}
	}
}

// TestAliasBombBelowLimit: a file under Parse's own node limit that
// yaml.v3 still finds too alias-heavy is one "too large" error, not a
// half-decoded config with errors about the part yaml.v3 did not reach.
func TestAliasBombBelowLimit(t *testing.T) {
	var b strings.Builder
	b.WriteString(node1 + "jobs:\n  - &j0 {name: a, schedule: '@daily', shell: x}\n")
	for i := 1; i <= 14; i++ {
		fmt.Fprintf(&b, "  - &j%d {<<: [*j%d, *j%d], name: a%d}\n", i, i-1, i-1, i)
	}
	_, err := parse(t, b.String())
	errs := configErrors(t, err)
	if len(errs) != 1 || !strings.Contains(errs[0].Msg, "too large") {
		t.Errorf("want one \"too large\" error, got:\n%v", err)
	}
}
