package packaging

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
)

// installAllowed says whether this machine may get the package installed
// system-wide: in CI (CI=true, a throwaway machine) or when asked to with
// LEASECRON_TEST_PACKAGE=1.
func installAllowed() bool {
	return os.Getenv("CI") == "true" || os.Getenv("LEASECRON_TEST_PACKAGE") == "1"
}

// sh runs a command and returns its combined output; env adds variables.
func sh(t *testing.T, dir string, env []string, name string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Env = append(append(os.Environ(), "DEBIAN_FRONTEND=noninteractive"), env...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

func must(t *testing.T, name string, args ...string) string {
	t.Helper()
	out, err := sh(t, "", nil, name, args...)
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return out
}

// leasecronProcs lists the PIDs of processes running the installed binary.
func leasecronProcs() []string {
	var pids []string
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		exe, err := os.Readlink(filepath.Join("/proc", e.Name(), "exe"))
		if err == nil && strings.TrimSuffix(exe, " (deleted)") == "/usr/bin/leasecron" {
			pids = append(pids, e.Name())
		}
	}
	return pids
}

// fileMode returns path's permission bits and group name.
func fileMode(t *testing.T, path string) (os.FileMode, string) {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	gid := fi.Sys().(*syscall.Stat_t).Gid
	g, err := user.LookupGroupId(fmt.Sprint(gid))
	if err != nil {
		return fi.Mode().Perm(), fmt.Sprint(gid)
	}
	return fi.Mode().Perm(), g.Name
}

// startsService matches a maintainer-script line that enables or starts
// the service.
var startsService = regexp.MustCompile(`systemctl[^\n]*\b(start|enable|restart)\b|deb-systemd-invoke\s+start`)

// built is the .deb `make package` made, once per test binary.
var built struct {
	once sync.Once
	deb  string
	err  error
}

// buildDeb runs `make package` (once) and returns the .deb it made.
func buildDeb(t *testing.T) string {
	t.Helper()
	for _, tool := range []string{"make", "dpkg-deb"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s missing (make deps installs what the tests need)", tool)
		}
	}
	built.once.Do(func() {
		root, err := filepath.Abs("..")
		if err != nil {
			built.err = err
			return
		}
		out, err := sh(t, root, nil, "make", "package")
		if err != nil {
			built.err = fmt.Errorf("make package: %w\n%s", err, out)
			return
		}
		debs, _ := filepath.Glob(filepath.Join(root, "dist", "leasecron_*.deb"))
		if len(debs) == 0 {
			built.err = fmt.Errorf("make package made no dist/leasecron_*.deb:\n%s", out)
			return
		}
		built.deb = debs[0]
		for _, d := range debs[1:] { // the newest
			a, _ := os.Stat(built.deb)
			b, _ := os.Stat(d)
			if b.ModTime().After(a.ModTime()) {
				built.deb = d
			}
		}
	})
	if built.err != nil {
		t.Fatal(built.err)
	}
	return built.deb
}

// TestDebianPackageContents builds the .deb with `make package` and reads
// it with dpkg-deb (no install): the binary at /usr/bin, the unit with
// ExecStart there, the sysusers/tmpfiles files, /etc/default/leasecron
// and /etc/leasecron/jobs.yaml as conffiles, the dashboard and rules, a
// Debian version, and maintainer scripts that neither enable nor start
// the service.
func TestDebianPackageContents(t *testing.T) {
	deb := buildDeb(t)
	if v := strings.TrimSpace(must(t, "dpkg-deb", "-f", deb, "Version")); !regexp.MustCompile(`^[0-9][A-Za-z0-9.+~]*$`).MatchString(v) {
		t.Errorf("package version %q is not a Debian version", v)
	}
	list := must(t, "dpkg-deb", "-c", deb)
	for _, f := range []string{"./usr/bin/leasecron", "./lib/systemd/system/leasecron.service",
		"./usr/lib/sysusers.d/leasecron.conf", "./usr/lib/tmpfiles.d/leasecron.conf",
		"./etc/default/leasecron", "./etc/leasecron/jobs.yaml",
		"./usr/share/doc/leasecron/contrib/grafana/leasecron.json",
		"./usr/share/doc/leasecron/contrib/prometheus/alerts.yaml"} {
		if !regexp.MustCompile(`(?m) ` + regexp.QuoteMeta(f) + `$`).MatchString(list) {
			t.Errorf("the package lacks %s:\n%s", f, list)
		}
	}
	conffiles := must(t, "dpkg-deb", "-I", deb, "conffiles")
	for _, f := range []string{"/etc/default/leasecron", "/etc/leasecron/jobs.yaml"} {
		if !strings.Contains(conffiles, f+"\n") {
			t.Errorf("%s is not a conffile; conffiles:\n%s", f, conffiles)
		}
	}
	dir := t.TempDir()
	must(t, "dpkg-deb", "-x", deb, dir)
	unit, err := os.ReadFile(filepath.Join(dir, "lib/systemd/system/leasecron.service"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(unit), "\nExecStart=/usr/bin/leasecron run -c /etc/leasecron/jobs.yaml") {
		t.Errorf("the packaged unit's ExecStart is not /usr/bin/leasecron:\n%s", unit)
	}
	// Negative control: the check finds a script line that starts it.
	if !startsService.MatchString("systemctl enable --now leasecron.service") || !startsService.MatchString("deb-systemd-invoke start leasecron.service") {
		t.Fatal("the start/enable check misses a script that starts the service")
	}
	ctl := filepath.Join(dir, "DEBIAN")
	must(t, "dpkg-deb", "-e", deb, ctl)
	for _, script := range []string{"postinst", "prerm", "postrm"} {
		b, err := os.ReadFile(filepath.Join(ctl, script))
		if err != nil {
			t.Fatal(err)
		}
		// Comments may tell the administrator how to start it.
		code := regexp.MustCompile(`(?m)^\s*#.*$`).ReplaceAllString(string(b), "")
		if m := startsService.FindString(code); m != "" {
			t.Errorf("%s would enable or start the service: %q", script, m)
		}
	}
}

// TestDebianPackage installs the .deb with dpkg -i and checks what an
// operator gets: the binary, the unit (which `systemd-analyze verify`
// accepts), the leasecron user, /etc/leasecron readable by its group only,
// the example config as a conffile that `leasecron check` accepts, no
// service started or enabled, an edited conffile kept on reinstall, and
// removal/purge. It installs system-wide, so it runs only in CI (CI=true)
// or with LEASECRON_TEST_PACKAGE=1; there, a missing tool fails it.
func TestDebianPackage(t *testing.T) {
	if !installAllowed() {
		t.Skip("installs a .deb system-wide: runs in CI (CI=true) or with LEASECRON_TEST_PACKAGE=1 (as root, on a throwaway machine)")
	}
	if os.Geteuid() != 0 {
		t.Fatal("dpkg -i needs root")
	}
	for _, tool := range []string{"dpkg", "dpkg-query", "systemd-analyze"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s missing (make deps installs what the tests need)", tool)
		}
	}
	if out, err := sh(t, "", nil, "dpkg-query", "-W", "-f", "${Status}", "leasecron"); err == nil && strings.Contains(out, "installed") && !strings.Contains(out, "not-installed") {
		t.Fatalf("leasecron is already installed here (%s): not touching it", out)
	}
	deb := buildDeb(t)
	version := strings.TrimSpace(must(t, "dpkg-deb", "-f", deb, "Version"))

	before := leasecronProcs()
	t.Cleanup(func() {
		if out, err := sh(t, "", nil, "dpkg", "--purge", "leasecron"); err != nil {
			t.Errorf("dpkg --purge leasecron: %v\n%s", err, out)
		}
	})
	must(t, "dpkg", "-i", deb)

	for _, f := range []string{"/usr/bin/leasecron", "/lib/systemd/system/leasecron.service",
		"/usr/lib/sysusers.d/leasecron.conf", "/usr/lib/tmpfiles.d/leasecron.conf",
		"/etc/default/leasecron", "/etc/leasecron/jobs.yaml"} {
		if _, err := os.Stat(f); err != nil {
			t.Errorf("not installed: %v", err)
		}
	}
	if _, err := user.Lookup("leasecron"); err != nil {
		t.Errorf("no leasecron user after install: %v", err)
	}
	if mode, group := fileMode(t, "/etc/leasecron"); mode != 0o750 || group != "leasecron" {
		t.Errorf("/etc/leasecron: %v group %s, want 0750 group leasecron", mode, group)
	}
	if mode, group := fileMode(t, "/etc/leasecron/jobs.yaml"); mode != 0o640 || group != "leasecron" {
		t.Errorf("/etc/leasecron/jobs.yaml: %v group %s, want 0640 group leasecron", mode, group)
	}
	unit, err := os.ReadFile("/lib/systemd/system/leasecron.service")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(unit), "\nExecStart=/usr/bin/leasecron run -c /etc/leasecron/jobs.yaml") {
		t.Errorf("installed unit's ExecStart is not /usr/bin/leasecron:\n%s", unit)
	}
	if out, err := sh(t, "", nil, "systemd-analyze", "verify", "/lib/systemd/system/leasecron.service"); err != nil || strings.TrimSpace(out) != "" {
		t.Errorf("systemd-analyze verify of the installed unit: %v\n%s", err, out)
	}
	if out, err := sh(t, "", nil, "/usr/bin/leasecron", "check", "-c", "/etc/leasecron/jobs.yaml"); err != nil {
		t.Errorf("leasecron check on the installed example config: %v\n%s", err, out)
	}
	if out := must(t, "/usr/bin/leasecron", "version"); !strings.Contains(strings.ReplaceAll(out, "-", "."), strings.TrimPrefix(version, "0.0.0~git")) {
		t.Errorf("leasecron version %q, package version %s", out, version)
	}

	// The package starts nothing and enables nothing.
	if after := leasecronProcs(); len(after) > len(before) {
		t.Errorf("leasecron processes after dpkg -i: %v (before: %v)", after, before)
	}
	if _, err := os.Stat("/run/systemd/system"); err == nil {
		if out, _ := sh(t, "", nil, "systemctl", "is-active", "leasecron"); strings.TrimSpace(out) == "active" {
			t.Errorf("dpkg -i started leasecron.service")
		}
	}
	if m, _ := filepath.Glob("/etc/systemd/system/*.wants/leasecron.service"); len(m) > 0 {
		t.Errorf("dpkg -i enabled leasecron.service: %v", m)
	}

	// An administrator's edit of a conffile survives a reinstall.
	edit := "\nLEASECRON_OPTS=\"--metrics 127.0.0.1:9841\" # local edit\n"
	f, err := os.OpenFile("/etc/default/leasecron", os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = f.WriteString(edit)
	f.Close()
	must(t, "dpkg", "-i", deb)
	if b, _ := os.ReadFile("/etc/default/leasecron"); !strings.Contains(string(b), "# local edit") {
		t.Errorf("reinstall overwrote the edited /etc/default/leasecron:\n%s", b)
	}
	// The daemon's group still reads jobs.yaml after a reinstall.
	if mode, group := fileMode(t, "/etc/leasecron/jobs.yaml"); mode != 0o640 || group != "leasecron" {
		t.Errorf("/etc/leasecron/jobs.yaml after reinstall: %v group %s, want 0640 group leasecron", mode, group)
	}

	// An upgrade whose example jobs.yaml changed replaces the unedited
	// copy; the daemon's group still reads it, and the edited
	// /etc/default/leasecron stays.
	up := upgradeDeb(t, version)
	must(t, "dpkg", "-i", up)
	if b, _ := os.ReadFile("/etc/leasecron/jobs.yaml"); !strings.Contains(string(b), "# upgraded example") {
		t.Errorf("the upgrade did not replace the unedited jobs.yaml")
	}
	if mode, group := fileMode(t, "/etc/leasecron/jobs.yaml"); mode != 0o640 || group != "leasecron" {
		t.Errorf("/etc/leasecron/jobs.yaml after an upgrade: %v group %s, want 0640 group leasecron", mode, group)
	}
	if b, _ := os.ReadFile("/etc/default/leasecron"); !strings.Contains(string(b), "# local edit") {
		t.Errorf("the upgrade overwrote the edited /etc/default/leasecron:\n%s", b)
	}

	// Remove keeps the conffiles, purge removes them.
	must(t, "dpkg", "-r", "leasecron")
	if _, err := os.Stat("/usr/bin/leasecron"); err == nil {
		t.Errorf("/usr/bin/leasecron still there after dpkg -r")
	}
	if _, err := os.Stat("/etc/leasecron/jobs.yaml"); err != nil {
		t.Errorf("dpkg -r removed the conffile /etc/leasecron/jobs.yaml: %v", err)
	}
	must(t, "dpkg", "--purge", "leasecron")
	if _, err := os.Stat("/etc/leasecron/jobs.yaml"); err == nil {
		t.Errorf("/etc/leasecron/jobs.yaml still there after dpkg --purge")
	}
}

// upgradeDeb builds, with the nfpm that `make package` installed, a
// package of version+upgrade1 whose example jobs.yaml has one more line.
func upgradeDeb(t *testing.T, version string) string {
	t.Helper()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	example, err := os.ReadFile(filepath.Join(root, "jobs.example.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	jobs := filepath.Join(dir, "jobs.yaml")
	if err := os.WriteFile(jobs, append([]byte("# upgraded example\n"), example...), 0o644); err != nil {
		t.Fatal(err)
	}
	desc, err := os.ReadFile(filepath.Join(root, "packaging", "nfpm.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	old := "  - src: jobs.example.yaml\n    dst: /etc/leasecron/jobs.yaml\n"
	if !strings.Contains(string(desc), old) {
		t.Fatalf("nfpm.yaml: no %q", old)
	}
	cfg := filepath.Join(dir, "nfpm.yaml")
	text := strings.Replace(string(desc), old, "  - src: "+jobs+"\n    dst: /etc/leasecron/jobs.yaml\n", 1)
	if err := os.WriteFile(cfg, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	arch := strings.TrimSpace(must(t, "dpkg", "--print-architecture"))
	out, err := sh(t, root, []string{"PKG_VERSION=" + version + "+upgrade1", "PKG_ARCH=" + arch},
		filepath.Join(root, "dist", "tools", "nfpm"), "package", "-f", cfg, "-p", "deb", "-t", dir)
	if err != nil {
		t.Fatalf("nfpm (upgrade package): %v\n%s", err, out)
	}
	debs, _ := filepath.Glob(filepath.Join(dir, "*.deb"))
	if len(debs) != 1 {
		t.Fatalf("nfpm made %v:\n%s", debs, out)
	}
	return debs[0]
}
