package config

import (
	"strings"
	"testing"
)

// TestLimitKeys: memory_max, cpu_max and tasks_max are read per job and
// from defaults (a job's own value wins), with binary size units.
func TestLimitKeys(t *testing.T) {
	c := mustParse(t, node1+`defaults:
  memory_max: 512M
  cpu_max: 0.5
  tasks_max: 64
jobs:
  - {name: a, schedule: "@hourly", shell: "true"}
  - {name: b, schedule: "@hourly", shell: "true", memory_max: 1.5GiB, cpu_max: 2, tasks_max: 0}
  - {name: c, schedule: "@hourly", shell: "true", memory_max: "1048576000"}
`)
	want := map[string][3]any{
		"a": {int64(512 << 20), 0.5, 64},
		"b": {int64(3 << 29), 2.0, 0},
		"c": {int64(1048576000), 0.5, 64},
	}
	for _, j := range c.Jobs {
		if got := [3]any{j.MemoryMax, j.CPUMax, j.TasksMax}; got != want[j.Name] {
			t.Errorf("job %s: limits %v, want %v", j.Name, got, want[j.Name])
		}
	}
	if j := mustParse(t, node1+job1).Jobs[0]; j.HasLimits() {
		t.Errorf("a job without limit keys has limits: %+v", j)
	}
}

// TestLimitFloors: a limit below what a process needs and a size that
// cannot be read are errors naming the file, the line and the field; the
// documented floors themselves are accepted.
func TestLimitFloors(t *testing.T) {
	for _, tc := range []struct{ value, field, msg string }{
		{"memory_max: 512K", "memory_max", "below 4M"},
		{"memory_max: 12XB", "memory_max", "bad size"},
		{"memory_max: -1M", "memory_max", "bad size"},
		{"cpu_max: 0.001", "cpu_max", "want a share of one core"},
		{"cpu_max: half", "cpu_max", "bad number"},
		{"tasks_max: 1", "tasks_max", "below 4"},
	} {
		text := node1 + "jobs:\n  - name: a\n    schedule: \"@hourly\"\n    shell: \"true\"\n    " + tc.value + "\n"
		_, err := parse(t, text)
		errs := configErrors(t, err)
		if len(errs) != 1 {
			t.Errorf("%s: errors %v, want one", tc.value, err)
			continue
		}
		e := errs[0]
		if e.File != "jobs.yaml" || e.Line != 8 || e.Field != "jobs[0]."+tc.field || !strings.Contains(e.Msg, tc.msg) {
			t.Errorf("%s: %q (line %d, field %s); want jobs.yaml:8, jobs[0].%s, %q", tc.value, e.Error(), e.Line, e.Field, tc.field, tc.msg)
		}
	}
	_, err := parse(t, node1+"defaults:\n  tasks_max: 2\n"+job1)
	if errs := configErrors(t, err); len(errs) != 1 || errs[0].Field != "defaults.tasks_max" || errs[0].Line != 5 {
		t.Errorf("a bad default: %v; want one error at jobs.yaml:5 defaults.tasks_max", err)
	}
	c := mustParse(t, node1+"jobs:\n  - {name: a, schedule: \"@hourly\", shell: \"true\", memory_max: 4M, cpu_max: 0.01, tasks_max: 4}\n")
	if j := c.Jobs[0]; j.MemoryMax != minMemoryMax || j.CPUMax != minCPUMax || j.TasksMax != minTasksMax {
		t.Errorf("the floors: %+v", j)
	}
}
