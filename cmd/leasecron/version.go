package main

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
)

// version is the release version, set at build time with
//
//	go build -ldflags "-X main.version=v1.2.3" ./cmd/leasecron
//
// Without it, the module version from the build info is used when there is
// one (go install ...@v1.2.3), else "dev".
var version = "dev"

// Version returns the version string printed by `leasecron version`.
func Version() string {
	if version != "dev" {
		return version
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return version
}

// VersionCommand prints the version and the Go version it was built with.
type VersionCommand struct {
	stdout io.Writer
}

// Run prints "leasecron VERSION (GOVERSION OS/ARCH)".
func (c *VersionCommand) Run(_ context.Context, args []string) error {
	fs := newFlagSet("version")
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usageErrorf("unexpected arguments %q", pos)
	}
	fmt.Fprintf(c.stdout, "leasecron %s (%s %s/%s)\n", Version(), runtime.Version(), runtime.GOOS, runtime.GOARCH)
	return nil
}

// Usage prints the command's help.
func (c *VersionCommand) Usage() {
	fmt.Fprint(c.stdout, `Usage: leasecron version

Prints leasecron's version and the Go version it was built with.

Exit codes: 0 printed, 2 usage error.
`)
}
