# cg's everyday targets. `make test` is README's test command.
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT  ?= $(shell git rev-parse --short HEAD 2>/dev/null)
LDFLAGS := -s -w -X github.com/cg-dev/cg/cmd.Version=$(VERSION) -X github.com/cg-dev/cg/cmd.Commit=$(COMMIT)

.PHONY: build test lint check demo bench snapshot clean

build:
	go build -ldflags '$(LDFLAGS)' -o cg .

test:
	scripts/test.sh

lint:
	@test -z "$$(gofmt -l .)" || (gofmt -l . && exit 1)
	go vet ./...

check: lint test

demo:
	go run . demo

# Figures, not pass/fail: consume rate and handover gaps.
bench:
	go test -run '^$$' -bench . -benchtime 2000x ./pkg/cg/

snapshot:
	goreleaser release --snapshot --clean

clean:
	rm -rf cg dist
