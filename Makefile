# podfence — build, test, fuzz, benchmark and end-to-end targets.
# `make test` is the README's test command and the first thing CI runs.

GO          ?= go
STATICCHECK ?= $(GO) run honnef.co/go/tools/cmd/staticcheck@v0.8.2
FUZZTIME    ?= 10s
BENCHTIME   ?= 1s
PKGS        ?= ./...

.PHONY: all build test lint unit fuzz bench bench-pressure mutation image e2e e2e-node qemu qemu-bench qemu-node clean

all: build test

# A static binary: the process starter runs it inside containers without glibc. grpcnotrace
# (gRPC's own tag) leaves golang.org/x/net/trace out: its html/template calls methods by name,
# which makes the linker keep every exported method of every type (the agent binary is 20 %
# smaller without, and its RSS with it: BenchmarkAgentRSS). Every build of the binaries uses it.
BUILD_TAGS := grpcnotrace
build:
	CGO_ENABLED=0 $(GO) build -tags $(BUILD_TAGS) -o bin/podfence ./cmd/podfence
	CGO_ENABLED=0 $(GO) build -tags $(BUILD_TAGS) -o bin/podfence-extender ./cmd/podfence-extender
	CGO_ENABLED=0 $(GO) build -tags $(BUILD_TAGS) -o bin/podfence-dra ./cmd/podfence-dra

# Unit and integration tests (no root needed), with vet, gofmt and staticcheck.
test: lint unit

lint:
	@fmt=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$fmt" ]; then echo "gofmt needed: $$fmt"; exit 1; fi
	$(GO) vet $(PKGS)
	$(STATICCHECK) $(PKGS)

# -timeout is go test's bound on each package's test binary, there only to end a hang: 30m,
# not the default 10m, which a loaded machine comes near (internal/admission: 6 minutes
# beside a second make test and other work on 2 CPUs). Waits in tests end shortly before it
# (internal/testwait), never at a time of their own.
unit:
	$(GO) test -race -count=1 -timeout 30m $(PKGS)
	$(GO) test -count=1 -timeout 30m -run 'Memory' ./internal/extender

# Every fuzz target, FUZZTIME each.
fuzz:
	@bash hack/fuzz.sh $(FUZZTIME)

# Benchmarks: the allocator, the planner, the checkpoint and the NRI round trip. ./nri's
# BenchmarkLifecycle runs 10 pod lifecycles per plugin per b.N at each K (BENCHTIME=200x:
# 2,000; about 3 minutes on 2 cores): the timeout is raised above go test's 10 minutes.
bench:
	$(GO) test -run '^$$' -bench . -benchtime $(BENCHTIME) -timeout 30m $(PKGS)

# The agent's NRI events under pressure (BenchmarkLifecyclePressure): PRESSURE_LIFECYCLES pod
# lifecycles through the real NRI runtime side to the agent and to a do-nothing plugin, without
# pressure and beside CPU hogs and write+fsync loops on the checkpoint's filesystem; p50, p99,
# p99.9 and max per event, agent restarts' Synchronize too (about 10 minutes on 2 cores).
PRESSURE_LIFECYCLES ?= 10000
bench-pressure:
	$(GO) test -run '^$$' -bench 'LifecyclePressure' -benchtime $(PRESSURE_LIFECYCLES)x -timeout 60m ./internal/nodeagent/nriplugin

# Mutation testing (gremlins): the packages that decide CPUs, groups and admission, each
# against its own tests; prints each package's efficacy and fails under MUTATION_FLOOR (%).
MUTATION_PKGS ?= ./internal/cpu/allocate ./internal/cpu/pools ./internal/cpu/plan ./internal/nodeagent/checkpoint \
	./internal/nodeagent/nriplugin ./internal/coresched ./internal/admission
MUTATION_FLOOR ?= 0
mutation:
	bash hack/mutation.sh $(MUTATION_FLOOR) $(MUTATION_PKGS)

# The podfence image without a Docker daemon (deploy/Dockerfile's, built by hack/image.sh with
# crane): make image IMAGE=<registry>/podfence:<tag> [VERSION=<main.version>].
image:
	@test -n "$(IMAGE)" || { echo "make image IMAGE=<registry>/podfence:<tag> [VERSION=...]"; exit 2; }
	bash hack/image.sh -t $(IMAGE) $(if $(VERSION),--version $(VERSION))

# End to end on a real containerd with NRI (root; builds and caches the tools).
e2e:
	bash test/e2e/run.sh

# A real one-node Kubernetes (etcd, kube-apiserver, kubelet; v1.37.2, or PODFENCE_E2E_K8S_VERSION=v1.31.0) with the
# agent, webhook and DRA driver (root; cached).
e2e-node:
	bash test/e2e/node/run.sh

# The Helm chart deploy/helm/podfence: lint, render with several value sets, validate every
# object, and compare with the kustomize base deploy/ object by object (helm is built once
# with go install and cached under /var/cache/podfence-helm).
.PHONY: chart
chart:
	bash hack/helm.sh

# Real-kernel tests: each package's tests run as init of a small SMT kernel under QEMU
# (core scheduling, cgroup v2, misc). The kernel is built once from the in-repo fragment
# hack/qemu/podfence-kernel.config (PODFENCE_KERNEL_FRAGMENT=<file> builds another) and cached.
# An entry PKG:REGEXP runs only the tests matching REGEXP there.
QEMU_PKGS ?= ./internal/coresched/kernel ./internal/coresched/enforce ./internal/epc/enforce:TestProbeInQEMUGuest ./internal/sandbox/host:^TestReal
qemu:
	@for e in $(QEMU_PKGS); do p=$${e%%:*}; r=$${e#$$p}; bash hack/qemu/run-go-test.sh $$p $${r#:} || exit 1; done

# containerd with NRI, runc and the agent inside that guest (cgroup v2, cgroupfs driver): pods
# through CRI, one PASS/FAIL line per fact read back from the guest's cgroup v2 files and /proc
# (root; reuses test/e2e's cached tools and images and the cached kernel).
qemu-node:
	bash hack/qemu/run-node.sh

# exec -> core-scheduling cookie on the guest's real kernel (BenchmarkQEMUExecToCookie in
# coresched/enforce: the watcher against the same fork+exec without it, one run), 1,000
# samples of each. The guest gets no more vCPUs than the host has CPUs (1 core x 2 threads
# on a 2-CPU host): a vCPU the host preempts stalls the guest's kernel for a host time slice.
QEMU_BENCH_CORES ?= $(shell n=$$(nproc); echo $$(( n >= 4 ? 2 : 1 )))
QEMU_BENCHTIME ?= 1000x
qemu-bench:
	PODFENCE_QEMU_BENCH=QEMUExecToCookie PODFENCE_QEMU_BENCHTIME=$(QEMU_BENCHTIME) PODFENCE_QEMU_CORES=$(QEMU_BENCH_CORES) \
		bash hack/qemu/run-go-test.sh ./internal/coresched/enforce '^$$'

clean:
	rm -rf bin
