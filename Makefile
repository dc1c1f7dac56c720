# leasecron. `make test` is the README's (and CI's) test command.
GO       ?= go
VERSION  ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS  := -X main.version=$(VERSION)
FUZZTIME ?= 10s

.PHONY: test build demo fuzz fmt vet clean

# go vet, gofmt check, then every test (real redis-server processes, race detector).
test:
	$(GO) vet ./...
	@files=$$(gofmt -l .); if [ -n "$$files" ]; then echo "gofmt needed (run make fmt):"; echo "$$files"; exit 1; fi
	$(GO) test -race -timeout 20m ./...

# ./leasecron with the version from git.
build:
	$(GO) build -ldflags "$(LDFLAGS)" -o leasecron ./cmd/leasecron

# 3 throwaway Redis nodes + 2 daemons on jobs.example.yaml; Ctrl-C cleans up.
demo:
	./scripts/demo.sh

# Every Fuzz target of the module, FUZZTIME each (make fuzz FUZZTIME=5m).
fuzz:
	@set -e; for pkg in $$($(GO) list ./...); do \
		for f in $$($(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz' || true); do \
			echo "== $$pkg $$f"; \
			$(GO) test -run '^$$' -fuzz "^$$f\$$" -fuzztime $(FUZZTIME) $$pkg; \
		done; \
	done

fmt:
	gofmt -w .

vet:
	$(GO) vet ./...

clean:
	rm -f leasecron
	rm -rf .demo
