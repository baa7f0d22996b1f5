# everynode — build and test.
GO ?= go

# Unit and controller tests run with the race detector. The end-to-end suite builds
# everynode (which embeds the upstream control plane) once, without it: a race build
# of k8s.io/kubernetes would double CI's compile time.
UNIT_PKGS := ./internal/daemon/... ./internal/controller/... ./internal/nodesim/...
E2E_PKGS := ./test/e2e/...

.PHONY: build sandbox test unit e2e vet
build:
	$(GO) build -o bin/everynode ./cmd/everynode

# Build, then start the sandbox in the foreground (Ctrl-C stops it).
sandbox: build
	bin/everynode sandbox

# The test command CI runs.
test: vet unit e2e

unit:
	$(GO) test -race -count=1 $(UNIT_PKGS)

e2e:
	$(GO) test -count=1 -timeout 20m $(E2E_PKGS)

vet:
	$(GO) vet ./...
