# everynode — build and test.
GO ?= go

.PHONY: build test vet
build:
	$(GO) build -o bin/everynode ./cmd/everynode

# The test command CI runs.
test: vet
	$(GO) test -race -count=1 ./...

vet:
	$(GO) vet ./...
