# everynode — build and test.
GO ?= go

# Packages that do not link the upstream control plane.
UNIT_PKGS := ./internal/daemon/... ./internal/controller/... ./internal/nodesim/... ./internal/inspect/... \
	./internal/bench/... ./internal/component/... ./internal/sandbox/... ./internal/sandboxpath/... \
	./internal/rolloutplan/... ./internal/dashboard/... ./internal/browsertest/... ./internal/gather/... \
	./internal/realnode/... ./internal/chart/... ./internal/scalemodel/... ./internal/fakeapi/...
LIGHT_PKGS := $(UNIT_PKGS) ./test/...
# Packages that embed kube-apiserver, kube-scheduler, kube-controller-manager and
# kubectl: their first build takes 15-20 minutes on a 2-core machine, and vetting them
# as much again (go vet analyses every dependency).
SANDBOX_PKGS := ./cmd/...

.PHONY: build sandbox test vet unit race e2e faults vet-sandbox bench-smoke image tools fuzz
# The embedded Kubernetes components report the version of k8s.io/kubernetes that
# go.mod names (kubelet registers real nodes with it), not v0.0.0-master.
K8S_VERSION = $(shell $(GO) list -m -f '{{.Version}}' k8s.io/kubernetes)
VERSION_LDFLAGS = -X k8s.io/component-base/version.gitVersion=$(K8S_VERSION) \
	-X k8s.io/component-base/version.gitMajor=$(patsubst v%,%,$(word 1,$(subst ., ,$(K8S_VERSION)))) \
	-X k8s.io/component-base/version.gitMinor=$(word 2,$(subst ., ,$(K8S_VERSION)))

# everynode, and beside it what real nodes' images are built from: the static test
# agent, and the static controller binary (as tools/image builds it) of everynode's
# own image, which `sandbox --controller chart` installs.
build:
	$(GO) build -ldflags "$(VERSION_LDFLAGS)" -o bin/everynode ./cmd/everynode
	CGO_ENABLED=0 $(GO) build -o bin/everynode-agent ./cmd/everynode-agent
	CGO_ENABLED=0 $(GO) build -tags nosandbox -trimpath -ldflags "-s -w" -o bin/everynode-controller ./cmd/everynode

# Build, then start the sandbox in the foreground (Ctrl-C stops it).
sandbox: build
	bin/everynode sandbox

# The test command: vet, the unit tests, the tools' tests (the controller image built
# and read back), then the end-to-end suite (which builds everynode and starts
# sandboxes).
test: vet unit tools e2e

vet:
	$(GO) vet $(LIGHT_PKGS)

# The command's own tests link the upstream control plane too; the end-to-end suite
# builds the same binary, so they cost a link, not a second compile.
unit:
	$(GO) test -count=1 $(UNIT_PKGS)
	$(GO) test -count=1 $(SANDBOX_PKGS)

# The unit tests under the race detector (a second build of every dependency).
race:
	$(GO) test -race -count=1 $(UNIT_PKGS)

# The end-to-end suite: builds everynode, starts a sandbox, runs user scenarios.
e2e:
	$(GO) test -count=1 -timeout 40m ./test/e2e/...

# The API fault scenarios of the end-to-end suite (TestFaults: cold create, rolling
# and surge updates, waves and a rollback, each without and with faults injected
# between the controller and the API server) at NODES simulated nodes; CI runs them
# at 20 with the rest of the suite. Prints the writes the faults cost.
NODES ?= 100
faults:
	EVERYNODE_FAULT_NODES=$(NODES) $(GO) test -count=1 -timeout 60m -v -run '^TestFaults$$' ./test/e2e/

# tools/image, a module of its own (so that go-containerregistry's dependencies stay
# out of everynode's): vetted, and its test run.
tools:
	cd tools/image && $(GO) vet ./... && $(GO) test -count=1 ./...

# A short run of every fuzz test; their seed corpora, in testdata/fuzz, also run with
# the unit tests. Each run is bounded by a count of executions, not a duration: a
# duration-bounded run can end in a spurious "context deadline exceeded" from Go's
# fuzzing coordinator (golang/go#75804). The counts take 10-20 s each on 2 cores.
FUZZ_POLICY ?= 100000x
FUZZ_DECIDE ?= 20000x
FUZZ_BEHAVIOUR ?= 30000x
FUZZ_GATE ?= 50000x
fuzz:
	$(GO) test -run '^$$' -fuzz '^FuzzParsePolicy$$' -fuzztime $(FUZZ_POLICY) ./internal/daemon
	$(GO) test -run '^$$' -fuzz '^FuzzDecide$$' -fuzztime $(FUZZ_DECIDE) ./internal/daemon
	$(GO) test -run '^$$' -fuzz '^FuzzParseBehaviour$$' -fuzztime $(FUZZ_BEHAVIOUR) ./internal/nodesim
	$(GO) test -run '^$$' -fuzz '^FuzzNodeGate$$' -fuzztime $(FUZZ_GATE) ./internal/daemon

# The controller's image as an OCI layout in bin/image, built offline: no Docker
# daemon, no base image pulled. The Dockerfile builds the same where one can be.
image:
	cd tools/image && $(GO) run . --out ../../bin/image

vet-sandbox:
	$(GO) vet $(SANDBOX_PKGS)

# A quick end-to-end run of the benchmark (docs/benchmarks.md), so that it cannot rot:
# at QPS 20, the create scenario at 50 nodes in two rounds (--rounds; the JSON must
# hold both rounds of both controllers), the rolling and in-place scenarios at 100
# nodes and the burst at 50 + 20; then, with no client rate limit as documented, the
# churn (with the floor controller) at 100 nodes and the big cluster at 100 nodes and
# 1,000 pods of no DaemonSet. (create-5, surge and steady are not run here.) Each with
# kube-controller-manager's DaemonSet controller and with everynode, on fresh
# sandboxes; fails if any run fails, or if the churn's profiles of everynode and the
# floor (--profile-dir) were not saved. About eleven minutes after the build.
bench-smoke: build
	bin/everynode bench --scenarios create --nodes 50 --rounds 2 --json bin/bench-rounds-smoke.json
	test "$$(grep -c '"round": 2' bin/bench-rounds-smoke.json)" = 2
	bin/everynode bench --scenarios rolling,in-place,burst --nodes 100 --burst-nodes 50 --burst-add 20 --json bin/bench-smoke.json
	rm -rf bin/bench-smoke-profiles
	bin/everynode bench --kube-api-qps 0 --scenarios churn,big-cluster \
		--churn-nodes 100 --churn-rate 10 --churn-duration 10s --churn-add-nodes 20 \
		--big-nodes 100 --big-pods 1000 --profile-dir bin/bench-smoke-profiles
	test -s bin/bench-smoke-profiles/churn-everynode-heap.pprof
	test -s bin/bench-smoke-profiles/churn-floor-heap.pprof
	bin/everynode bench model --nodes 200,400 --churn-rate 50 --churn-duration 4s \
		--json bin/bench-model-smoke.json --svg bin/bench-model-smoke.svg
