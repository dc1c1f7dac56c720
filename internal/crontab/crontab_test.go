package crontab

import (
	"os"
	"reflect"
	"strings"
	"testing"
)

func TestParseCorpus(t *testing.T) {
	f, err := os.Open("testdata/corpus.crontab")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tab, err := Parse(f, true)
	if err != nil {
		t.Fatal(err)
	}
	byLine := map[int]Entry{}
	for _, e := range tab.Entries {
		byLine[e.Line] = e
	}
	path := Var{"PATH", "/usr/local/sbin:/usr/local/bin:/sbin:/bin:/usr/sbin:/usr/bin"}
	for _, c := range []struct {
		line int
		want Entry
	}{
		{10, Entry{Schedule: "17 * * * *", User: "root", Command: "cd / && run-parts --report /etc/cron.hourly", Env: []Var{path}, Comments: []string{"m h dom mon dow user\tcommand"}}},
		{16, Entry{Schedule: "*/5 * * * *", User: "www-data", Command: "/usr/bin/php /var/www/nextcloud/cron.php", Env: []Var{path}}},
		{22, Entry{Schedule: "0 9 1,15 * fri", User: "reports", Command: `/opt/reports/run.sh "monthly summary"`, Env: []Var{path},
			Comments: []string{"the monthly report: 1st and 15th, or any Friday (cron ORs the two day fields)"}}},
		{24, Entry{Schedule: "0 8 * * mon-fri", User: "deploy", Command: "/usr/local/bin/morning-check", TimeZone: "Europe/Berlin", Env: []Var{path}}},
		{26, Entry{Schedule: "@daily", User: "root", Command: "/usr/sbin/logrotate /etc/logrotate.conf", TimeZone: "Europe/Berlin", Env: []Var{path, {"TZ", "UTC"}}}},
		{28, Entry{Schedule: "5 4 * * sun", User: "root", Command: "date +%Y-%m-%d >> /var/log/sunday.log", TimeZone: "Europe/Berlin", Env: []Var{path, {"TZ", "UTC"}}}},
		{31, Entry{Schedule: "*/15 9-17 * * 1-5", User: "app", Command: "source /etc/app.env && exec /opt/app/bin/sync", Shell: "/bin/bash", TimeZone: "Europe/Berlin", Env: []Var{path, {"TZ", "UTC"}}}},
	} {
		got, ok := byLine[c.line]
		if !ok {
			t.Errorf("line %d: no entry", c.line)
			continue
		}
		c.want.Line = c.line
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("line %d:\n got %+v\nwant %+v", c.line, got, c.want)
		}
	}
	if len(tab.Entries) != 16 {
		t.Errorf("%d entries, want 16", len(tab.Entries))
	}
	reasons := map[int]string{}
	for _, s := range tab.Skipped {
		reasons[s.Line] = s.Reason
	}
	for line, want := range map[int]string{19: "@reboot", 29: "standard input", 32: "no command"} {
		if !strings.Contains(reasons[line], want) {
			t.Errorf("line %d: skipped for %q, want a reason mentioning %q", line, reasons[line], want)
		}
	}
	if len(tab.Skipped) != 3 {
		t.Errorf("skipped %+v, want lines 19, 29, 32", tab.Skipped)
	}
	if len(tab.Notes) != 1 || tab.Notes[0].Line != 7 {
		t.Errorf("notes %+v, want MAILTO on line 7", tab.Notes)
	}
}

func TestParseUserCrontab(t *testing.T) {
	tab, err := Parse(strings.NewReader("A = 'quoted value'\n*/10 * * * * /bin/echo hi\n@annually /bin/true\n@midnight  /bin/true\n@every5m x\n1 2 3\n"), false)
	if err != nil {
		t.Fatal(err)
	}
	if len(tab.Entries) != 3 {
		t.Fatalf("entries %+v", tab.Entries)
	}
	e := tab.Entries[0]
	if e.User != "" || e.Command != "/bin/echo hi" || e.Schedule != "*/10 * * * *" || !reflect.DeepEqual(e.Env, []Var{{"A", "quoted value"}}) {
		t.Errorf("entry %+v", e)
	}
	if tab.Entries[1].Schedule != "@yearly" || tab.Entries[2].Schedule != "@daily" {
		t.Errorf("macros: %q %q", tab.Entries[1].Schedule, tab.Entries[2].Schedule)
	}
	if len(tab.Skipped) != 2 || !strings.Contains(tab.Skipped[0].Reason, "unknown schedule") || !strings.Contains(tab.Skipped[1].Reason, "too few fields") {
		t.Errorf("skipped %+v", tab.Skipped)
	}
}
