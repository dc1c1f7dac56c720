# leasecron. `make test` is the README's (and CI's) test command.
GO       ?= go
VERSION  ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS  := -X main.version=$(VERSION)
FUZZTIME ?= 10s

.PHONY: test deps build demo fuzz fmt vet clean bench package

# The servers the tests start as throwaway processes, and the tools they
# run (systemd-analyze, chromium, promtool, dpkg-deb), installed from
# Debian's packages when missing; their system services never start.
deps:
	./scripts/deps.sh redis postgres mysql etcd zookeeper chromium promtool dpkg
	@./scripts/deps.sh systemd || echo "warning: no systemd-analyze; TestSystemdUnit will skip" >&2

# go vet, gofmt check, then every test (real redis-server, postgres, etcd
# and ZooKeeper processes, race detector). -count=1: the fleet tests build
# the daemon themselves, which the test cache cannot see.
# Test binaries run TEST_PARALLEL at a time, and up to TEST_TESTS parallel
# tests inside each (the fleets; the Redis client's tests, which wait on
# timers with little CPU, widen it, see waitbound): most
# tests wait on timers and real servers, not on the CPU
# (docs/development.md: where the time goes).
# Two packages at a time, three tests in each: with three and four (the
# fleets, the CLI's end-to-end tests and the ZooKeeper ensembles
# together) a slower machine's load passed 20-30 and the fleets' liveness
# checks missed ticks (docs/development.md).
# go test starts the packages in the order named, so the longest are named
# first (the fleets, about 9 minutes, beside the ZooKeeper tests, two
# ensembles at a time, then the CLI's end-to-end tests, then the scheduler
# and the store packages) and the short ones fill the gaps; ./... adds the
# rest, each package once. With ./... alone the fleets started after the
# others, ~6 minutes in, and ended the run.
TEST_PARALLEL ?= 2
TEST_TESTS   ?= 3
TEST_FIRST    := faultsuite lease/zookeeper cmd/leasecron scheduler lease/redlock \
	lease/etcd lease/mysql lease/postgres lease
TEST_PKGS     ?= $(foreach d,$(TEST_FIRST),$(if $(wildcard $(d)/*_test.go),./$(d))) ./...
# GORACE: a race-built program exiting with status 0 sleeps a second
# first; the test binaries (and what they start from themselves) skip it
# (see proctest.SpareRaceExitSleep).
test: export GORACE ?= atexit_sleep_ms=0
# -trimpath: the build cache's entries for this repository's packages do
# not depend on where it is checked out, so a fresh clone on a machine
# where `make test` ran before compiles nothing it has not changed (the
# fleets' `go build` of the daemon inherits it); ~45 s of each run. Its
# cache entries are not those of a build without it (go build, gopls).
test: export override GOFLAGS := $(strip $(GOFLAGS) -trimpath)
test: deps
	$(GO) vet ./...
	@files=$$(gofmt -l .); if [ -n "$$files" ]; then echo "gofmt needed (run make fmt):"; echo "$$files"; exit 1; fi
	$(GO) test -race -count=1 -p $(TEST_PARALLEL) -parallel $(TEST_TESTS) -timeout 20m $(TEST_PKGS)

# ./leasecron with the version from git.
build:
	$(GO) build -ldflags "$(LDFLAGS)" -o leasecron ./cmd/leasecron

# dist/leasecron_VERSION_ARCH.deb: the binary (/usr/bin/leasecron), the
# systemd unit, sysusers/tmpfiles files, /etc/default/leasecron and an
# example /etc/leasecron/jobs.yaml (both conffiles); see packaging/nfpm.yaml.
# nfpm is built from source by `go install` at a pinned version. The
# package never starts or enables the service.
NFPM_VERSION ?= v2.44.0
PKG_ARCH     ?= $(shell $(GO) env GOARCH)
# A Debian version must start with a digit: v1.2.3 -> 1.2.3, a bare commit
# id -> 0.0.0~git<id>.
PKG_VERSION  ?= $(shell echo '$(VERSION)' | sed -E 's/^v([0-9]+\.)/\1/; /^[0-9]+\./!s/^/0.0.0~git/; s/[^A-Za-z0-9.+~]/./g')
package:
	GOBIN=$(abspath dist/tools) $(GO) install github.com/goreleaser/nfpm/v2/cmd/nfpm@$(NFPM_VERSION)
	rm -rf dist/root dist/leasecron_*.deb && mkdir -p dist/root
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags "-s -w $(LDFLAGS)" -o dist/root/leasecron ./cmd/leasecron
	sed 's|/usr/local/bin/leasecron|/usr/bin/leasecron|g' systemd/leasecron.service > dist/root/leasecron.service
	PKG_ARCH=$(PKG_ARCH) PKG_VERSION=$(PKG_VERSION) dist/tools/nfpm package -f packaging/nfpm.yaml -p deb -t dist/
	@ls -1 dist/*.deb

# 2 daemons on jobs.example.yaml and the throwaway servers of BACKEND
# (redis: 3 nodes; postgres: 1 cluster; etcd: 3 members; zookeeper: 3
# servers); Ctrl-C cleans up.
BACKEND ?= redis
demo:
	BACKEND=$(BACKEND) ./scripts/demo.sh

# Every Fuzz target of the module, FUZZTIME each (make fuzz FUZZTIME=5m).
fuzz:
	@set -e; for pkg in $$($(GO) list ./...); do \
		for f in $$($(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz' || true); do \
			echo "== $$pkg $$f"; \
			$(GO) test -run '^$$' -fuzz "^$$f\$$" -fuzztime $(FUZZTIME) $$pkg; \
		done; \
	done

# Long fault run (faultsuite TestSoak): a seeded nemesis against 3
# daemons and the servers of BACKEND (redis: 5 redis-server nodes; postgres: 1
# server; etcd: 3 members; zookeeper: 3 servers) for SECONDS, then a Markdown report
# (faults, runs, violations, abort slack) in SOAK_REPORT. The same SEED
# gives the same fault schedule. RACE=1 builds the daemons with the race
# detector (slower; `make test` already runs the short fault run with it).
SECONDS     ?= 1800
SEED        ?= 1
SOAK_REPORT ?= soak-report.md
RACE        ?=
.PHONY: soak
soak:
	LEASECRON_SOAK_BACKEND=$(BACKEND) LEASECRON_SOAK_SECONDS=$(SECONDS) LEASECRON_SOAK_SEED=$(SEED) LEASECRON_SOAK_REPORT=$(abspath $(SOAK_REPORT)) \
		$(GO) test $(if $(RACE),-race) -count=1 -v -run '^TestSoak$$' -timeout $$(( $(SECONDS) + 900 ))s ./faultsuite

# Benchmarks (bench/, a module of its own so that the peer libraries stay
# out of go.mod): lease against each operation's floor and the library
# users would pick instead, on servers the test kits start; the raw
# results go to bench/out.txt and benchstat prints them side by side
# (-col /lib: one column per library, ratios to lease). The reading of a
# run is written by hand in docs/benchmarks.md.
BENCH_COUNT ?= 5
BENCHSTAT   ?= golang.org/x/perf/cmd/benchstat@v0.0.0-20260908200009-22c9c6c9d4da
.PHONY: bench bench-scale
bench:
	cd bench && $(GO) test -run '^$$' -bench 'AcquireRelease|Extend|Tick' -count $(BENCH_COUNT) -timeout 60m | tee out.txt
	cd bench && $(GO) run $(BENCHSTAT) -col /lib out.txt

# One tick of a large fleet: SCALE_FLAGS='-scale.hosts=100 -scale.jobs=10000'
# (default 100 hosts × 1,000 jobs), dry-run schedulers in one process on 5
# Redis nodes and on PostgreSQL, candidates 3 and 0.
SCALE_FLAGS ?=
bench-scale:
	cd bench && $(GO) test -run '^$$' -bench Scale -benchtime 1x -timeout 60m -args $(SCALE_FLAGS) | tee scale.txt

fmt:
	gofmt -w .

vet:
	$(GO) vet ./...

clean:
	rm -f leasecron
	rm -rf .demo dist
