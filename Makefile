# cps-extender: the verbs people type. `make help` lists them.
SHELL := /usr/bin/env bash
GO ?= go
BIN := bin
E2E_TIMEOUT ?= 45m

.DEFAULT_GOAL := help

.PHONY: help
help: ## List the targets.
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z0-9_-]+:.*## / {printf "  %-12s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

.PHONY: build
build: ## Build the cps-extender binary into bin/.
	$(GO) build -trimpath -o $(BIN)/cps-extender .

IMAGE ?= cps-extender:dev
.PHONY: image
image: ## The container image IMAGE (cps-extender:dev): docker build if a daemon answers, else bin/image/cps-extender.tar and bin/image/oci without one; PUSH=1 pushes.
	IMAGE='$(IMAGE)' PUSH='$(PUSH)' GO='$(GO)' test/tools/build-image.sh

.PHONY: lint
lint: ## go vet (also the e2e-tagged code) and a gofmt check.
	$(GO) vet ./...
	$(GO) vet -tags e2e ./test/...
	$(GO) vet -tags e2e,field ./test/e2e/...
	$(GO) vet -tags load ./test/load/...
	cd test/tools/image && $(GO) vet ./...
	cd test/tools/monitoring && $(GO) vet ./...
	$(GO) test -count=1 ./test/doccheck/
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi

.PHONY: controlplane
controlplane: ## Build (or reuse) etcd, kube-apiserver, kube-scheduler and kwok in .cache/.
	test/tools/build-controlplane.sh

.PHONY: volcano
volcano: ## Build (or reuse) Volcano's vc-scheduler and vc-controller-manager (v1.14.1) and its CRDs in .cache/.
	test/tools/build-volcano.sh

.PHONY: controllers
controllers: ## Build (or reuse) kube-controller-manager (v1.37.2), the Kubeflow training-operator (v1.9.2) and JobSet (v0.10.1), with their CRDs, in .cache/.
	test/tools/build-controllers.sh

.PHONY: controllers-extra
controllers-extra: ## Build (or reuse) the optional operators of `make field`, not part of `make test`: Kubeflow Trainer v2 (v2.0.0) and LeaderWorkerSet (v0.7.0), with their CRDs, in .cache/.
	test/tools/build-controllers-extra.sh

.PHONY: unit
unit: ## Unit tests with the race detector.
	$(GO) test -race -count=1 ./...

# A count, not a duration: a duration's deadline can race the fuzz workers in Go 1.26 and fail a
# target with a bare "context deadline exceeded" and no input (golang/go#75804, fixed in 1.27).
FUZZTIME ?= 4000x
FUZZMINIMIZETIME ?= 2s
.PHONY: fuzz
fuzz: ## A short fuzz run ($(FUZZTIME) inputs) of every handler's fuzz target (seed corpora run in `unit` too).
	@for pkg in $$($(GO) list ./extender/...); do \
	  for f in $$($(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz'); do \
	    echo "fuzz $$pkg $$f"; $(GO) test -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) -fuzzminimizetime $(FUZZMINIMIZETIME) $$pkg || exit 1; \
	  done; \
	done

.PHONY: tools
tools: ## Tests of the tool modules in test/tools: `make image` without a daemon, checked from the image; deploy/monitoring against the metrics served.
	cd test/tools/image && $(GO) test -count=1 ./...
	cd test/tools/monitoring && $(GO) test -count=1 ./...

BENCH ?= .
BENCHTIME ?= 300ms
BENCHCOUNT ?= 3
.PHONY: bench
bench: ## Go benchmarks (ns/op, B/op, allocs/op) of the model, the handlers, the bind decision and the queue recompute; BENCH=regexp to pick.
	$(GO) test -run '^$$' -bench '$(BENCH)' -benchtime $(BENCHTIME) -count $(BENCHCOUNT) -benchmem ./priority ./extender/...

LOAD_NODES ?= 5000
LOAD_JOBS ?= 4000
LOAD_PODS_PER_JOB ?= 5
LOAD_CONCURRENCY ?= 1 4
LOAD_REQUESTS ?= 2000
# The same throughput backlog once more on this many nodes, native gang and cps-extender only.
THROUGHPUT_ENVELOPE_NODES ?= 5000
.PHONY: load
load: controlplane ## Load test: LOAD_NODES kwok nodes + LOAD_JOBS x LOAD_PODS_PER_JOB pending pods, curl replay (test/load/run.sh), RSS; then throughput, a backlog at scheduler start and 10k waiting pods; then throughput on THROUGHPUT_ENVELOPE_NODES nodes.
	CPS_CONTROLPLANE_BIN=$$(test/tools/build-controlplane.sh | tail -n1) \
	  LOAD_NODES=$(LOAD_NODES) LOAD_JOBS=$(LOAD_JOBS) LOAD_PODS_PER_JOB=$(LOAD_PODS_PER_JOB) \
	  LOAD_CONCURRENCY='$(LOAD_CONCURRENCY)' LOAD_REQUESTS=$(LOAD_REQUESTS) \
	  $(GO) test -tags load -count=1 -timeout 60m -v ./test/load/
	CPS_CONTROLPLANE_BIN=$$(test/tools/build-controlplane.sh | tail -n1) \
	  THROUGHPUT_NODES=$(THROUGHPUT_ENVELOPE_NODES) THROUGHPUT_RUNS='native gang,cps-extender webhook' \
	  $(GO) test -tags load -count=1 -timeout 30m -run 'TestThroughput$$' -v ./test/load/

.PHONY: e2e
e2e: controlplane volcano controllers ## End-to-end tests on a real local control plane (etcd, kube-apiserver, kube-scheduler, kwok; vc-scheduler for the Volcano tests; kube-controller-manager, training-operator and JobSet for the workload tests).
	CPS_CONTROLPLANE_BIN=$$(test/tools/build-controlplane.sh | tail -n1) \
	  CPS_VOLCANO_BIN=$$(test/tools/build-volcano.sh | tail -n1) \
	  CPS_CONTROLLERS_BIN=$$(test/tools/build-controllers.sh | tail -n1) \
	  $(GO) test -tags e2e -count=1 -timeout $(E2E_TIMEOUT) -v ./test/e2e/... ./test/eval/...

# The end-to-end tests of build tag field: workloads of the optional operators, as users submit them.
FIELD_TESTS ?= TestTrainJobAsSubmitted|TestLeaderWorkerSetAsSubmitted
.PHONY: field
field: controlplane controllers controllers-extra ## Not part of `make test` (docs/testing.md): a Kubeflow Trainer v2 TrainJob and a LeaderWorkerSet through the real operators, end to end (~75 s once built).
	CPS_CONTROLPLANE_BIN=$$(test/tools/build-controlplane.sh | tail -n1) \
	  CPS_CONTROLLERS_BIN=$$(test/tools/build-controllers.sh | tail -n1) \
	  CPS_CONTROLLERS_EXTRA_BIN=$$(test/tools/build-controllers-extra.sh | tail -n1) \
	  $(GO) test -tags e2e,field -count=1 -timeout 10m -v -run '^($(FIELD_TESTS))$$' ./test/e2e/

.PHONY: test
test: lint unit tools fuzz e2e ## Everything CI runs: lint, unit tests (-race), the tool modules' tests, short fuzz runs and the end-to-end suite.

.PHONY: demo
demo: controlplane ## Local control plane + extender + kube-scheduler + a sample PS/worker workload; prints where each pod went.
	CPS_CONTROLPLANE_BIN=$$(test/tools/build-controlplane.sh | tail -n1) $(GO) run ./test/demo

# EVAL_SEEDS is how many workloads (seeds) every setup runs in `make eval`: the summary gives
# 95% intervals over them (none with 1). EVAL_SIZE is the workload: small, medium or large.
# EVAL_SETUPS, when set, runs only these setups (comma-separated names; default all ten).
EVAL_SEEDS ?= 3
EVAL_SIZE ?= medium
EVAL_SETUPS ?=

.PHONY: eval
eval: controlplane ## Every scheduler setup on the EVAL_SIZE workload (default medium, ~22 min a seed) of EVAL_SEEDS seeds (default 3), with 95% intervals: results/eval/<time>-<size>/, copied to docs/eval/<size>/.
	CPS_CONTROLPLANE_BIN=$$(test/tools/build-controlplane.sh | tail -n1) $(GO) run ./test/eval/cmd/eval -size $(EVAL_SIZE) -seeds $(EVAL_SEEDS) -setups '$(EVAL_SETUPS)' -docs docs/eval/$(EVAL_SIZE)

.PHONY: eval-small
eval-small: ## make eval EVAL_SIZE=small (~9 min a seed).
	$(MAKE) eval EVAL_SIZE=small

.PHONY: clean
clean: ## Remove build outputs (not the control plane cache; see clean-cache).
	rm -rf $(BIN)

.PHONY: clean-cache
clean-cache: ## Remove the cached control plane, Volcano and workload controller binaries.
	rm -rf .cache
