# podfence — build, test, fuzz, benchmark and end-to-end targets.
# `make test` is the README's test command and the first thing CI runs.

GO          ?= go
STATICCHECK ?= $(GO) run honnef.co/go/tools/cmd/staticcheck@v0.8.2
FUZZTIME    ?= 10s
BENCHTIME   ?= 1s
PKGS        ?= ./...

.PHONY: all build test lint unit fuzz bench e2e clean

all: build test

# A static binary: the process starter runs it inside containers without glibc.
build:
	CGO_ENABLED=0 $(GO) build -o bin/podfence ./cmd/podfence

# Unit and integration tests (no root needed), with vet, gofmt and staticcheck.
test: lint unit

lint:
	@fmt=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$fmt" ]; then echo "gofmt needed: $$fmt"; exit 1; fi
	$(GO) vet $(PKGS)
	$(STATICCHECK) $(PKGS)

unit:
	$(GO) test -race -count=1 $(PKGS)

# Every fuzz target, FUZZTIME each.
fuzz:
	@bash hack/fuzz.sh $(FUZZTIME)

# Benchmarks: the allocator, the planner, the checkpoint and the NRI round trip.
bench:
	$(GO) test -run '^$$' -bench . -benchtime $(BENCHTIME) $(PKGS)

# End to end on a real containerd with NRI (root; builds and caches the tools).
e2e:
	bash e2e/run.sh

clean:
	rm -rf bin
