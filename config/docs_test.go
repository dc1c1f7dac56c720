package config

import (
	"os"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// configDoc is the page that documents every key of the config file.
const configDoc = "../docs/configuration.md"

// docKeyPattern matches a key path as the configuration page writes it in
// the first cell of a table row: `lease.ttl`, `jobs[].run_on.hosts`.
var docKeyPattern = regexp.MustCompile("^[a-z_]+(\\[\\])?(\\.[a-z_]+)*$")

// TestConfigKeysDocumented checks docs/configuration.md against the parser:
// every key the file may hold (the yaml tags of rawConfig and the types
// under it) has a row of its own, every key row names a key the parser
// accepts, and a job key's "in defaults" cell says whether the defaults
// section accepts it. A key added to the parser without documentation, or
// documentation of a key that is gone, fails here.
func TestConfigKeysDocumented(t *testing.T) {
	page, err := os.ReadFile(configDoc)
	if err != nil {
		t.Fatal(err)
	}
	rows := docKeyRows(string(page))
	accepted, defaults := acceptedKeys()
	if len(accepted) < 40 || len(defaults) == 0 {
		t.Fatalf("found %d keys (%d in defaults) in rawConfig: the walk is broken", len(accepted), len(defaults))
	}
	for _, key := range accepted {
		if _, ok := rows[key]; !ok {
			t.Errorf("config key %q is not documented: add a row starting with | `%s` | to %s", key, key, configDoc)
		}
	}
	for key, cells := range rows {
		if !slices.Contains(accepted, key) {
			t.Errorf("%s documents %q, which the config parser does not accept", configDoc, key)
			continue
		}
		name, isJobKey := strings.CutPrefix(key, "jobs[].")
		if !isJobKey {
			continue
		}
		top, _, _ := strings.Cut(name, ".")
		want := "no"
		if slices.Contains(defaults, top) {
			want = "yes"
		}
		if got := strings.TrimSpace(cells[len(cells)-1]); got != want {
			t.Errorf("%s: the \"in defaults\" cell of %q says %q, want %q", configDoc, key, got, want)
		}
	}
}

// docKeyRows returns the table rows of page whose first cell is one
// backticked key path, by key, with the row's cells.
func docKeyRows(page string) map[string][]string {
	rows := map[string][]string{}
	for _, line := range strings.Split(page, "\n") {
		line = strings.TrimSpace(line)
		if !strings.HasPrefix(line, "| `") {
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		first := strings.TrimSpace(cells[0])
		key := strings.Trim(first, "`")
		if strings.Count(first, "`") == 2 && docKeyPattern.MatchString(key) {
			rows[key] = cells
		}
	}
	return rows
}

// acceptedKeys walks rawConfig's yaml tags and returns every key path the
// parser accepts (jobs' keys as jobs[].KEY), and the keys the defaults
// section accepts.
func acceptedKeys() (all, defaults []string) {
	var walk func(t reflect.Type, prefix string)
	walk = func(t reflect.Type, prefix string) {
		for _, f := range yamlFields(t) {
			path := prefix + yamlKey(f)
			ft := f.Type
			switch {
			case prefix == "defaults.":
				defaults = append(defaults, yamlKey(f))
				continue // documented once, as jobs[].KEY
			case ft.Kind() == reflect.Slice && ft.Elem().Kind() == reflect.Pointer && len(yamlFields(ft.Elem().Elem())) > 0:
				all = append(all, path)
				walk(ft.Elem().Elem(), path+"[].")
				continue
			}
			all = append(all, path)
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem() // a section that may be null (a hook)
			}
			if len(yamlFields(ft)) > 0 {
				walk(ft, path+".")
			}
		}
	}
	walk(typeOf[rawConfig](), "")
	return all, defaults
}
