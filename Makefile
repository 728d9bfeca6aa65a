# cg's everyday targets. `make test` is README's test command.
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT  ?= $(shell git rev-parse --short HEAD 2>/dev/null)
LDFLAGS := -s -w -X github.com/cg-dev/cg/cmd.Version=$(VERSION) -X github.com/cg-dev/cg/cmd.Commit=$(COMMIT)

.PHONY: build test lint check docs demo bench bench-all bench-compare bench-batches chaos-concurrent chaos-partition chaos-partition-concurrent chaos-rolling snapshot clean

build:
	go build -ldflags '$(LDFLAGS)' -o cg .

test:
	scripts/test.sh

lint:
	@test -z "$$(gofmt -l .)" || (gofmt -l . && exit 1)
	go vet ./...

check: lint test

# The command reference (docs/cli) and man pages (docs/man), regenerated
# from the command tree; a test fails when the committed ones drift.
docs:
	go run ./internal/gendocs -dir docs

demo:
	go run . demo

# Figures, not pass/fail: consume rate, info and lag cost, move planning.
# Each benchmark gets a count that suits its cost (a consume op is one
# message, a lag op a whole 256-partition info); `make bench` stays well
# under a minute, `make bench-all` adds info on 4000 and 16000 partitions.
BENCH = go test -run '^$$' -benchmem ./pkg/cg/ -bench
bench:
	$(BENCH) '^BenchmarkMemberConsume$$' -benchtime 2000x
	$(BENCH) '^BenchmarkStaticInfoLag256$$' -benchtime 10x
	$(BENCH) '^BenchmarkInfoPartitions$$/^1000$$' -benchtime 10x
	go test -run '^$$' -benchmem ./pkg/cg/partition/ -bench '^BenchmarkMinimalMappings$$' -benchtime 200x

bench-all: bench
	$(BENCH) '^BenchmarkInfoPartitions$$/^(4000|16000)$$' -benchtime 5x

# issue 11's comparison (docs/performance.md): cg's static groups against
# the reference library and a plain pull consumer, back to back on one
# in-process server; then backlogs of 100 000 messages over 1 000, 10 000
# and 100 000 keys, static and elastic (BenchmarkKeys, each run bounded to
# 100 s), and the per-message path (BenchmarkPerMessage). Up to about 15
# minutes. BENCHFLAGS=-short for a quick look.
bench-compare:
	go test -run '^$$' -bench '^Benchmark(Compare|CompareConcurrent|Elastic|Plain|Keys)$$' -benchtime 1x -timeout 40m $(BENCHFLAGS) ./internal/bench/
	go test -run '^$$' -bench '^BenchmarkPerMessage$$' -benchtime 1x -timeout 10m $(BENCHFLAGS) ./cmd/bench/

# issue 12's figure (docs/batches.md, docs/performance.md): one member's
# rate through a sink costing 1ms a call + 20µs a message, one message a
# call against ordered batches of 10, 50 and 100, back to back; ~1 minute.
bench-batches:
	go test -run '^$$' -bench '^BenchmarkBatchVsSingle$$' -benchtime 1x -timeout 10m $(BENCHFLAGS) ./pkg/cg/

# The chaos suite (kills, freezes, black holes, restarts, rebalance storms)
# with every member running concurrent lanes: its per-key order and loss
# counts then hold for concurrent members too. About 3 to 5 minutes.
# CG_CHAOS_LAYOUT from the environment passes through to each chaos target:
# `CG_CHAOS_LAYOUT=partition make chaos-concurrent` is chaos-partition-concurrent.
chaos-concurrent:
	CG_CHAOS_CONCURRENCY=8 go test -race -count=1 -timeout 15m ./test/chaos/

# The whole chaos suite on the partition layout (one pinned consumer per
# partition): every group a scenario creates has it, the instance disrupted
# is the one holding the most of its member's partition pins, and each
# partition it held must resume within the suite's 1 s. About 3 to 4 minutes.
chaos-partition:
	CG_CHAOS_LAYOUT=partition go test -race -count=1 -timeout 15m ./test/chaos/

# Both: the partition layout with every member running 8 lanes.
chaos-partition-concurrent:
	CG_CHAOS_LAYOUT=partition CG_CHAOS_CONCURRENCY=8 go test -race -count=1 -timeout 15m ./test/chaos/

# A rolling restart of a 3-node cluster in lame-duck mode under traffic
# (docs/reliability.md), three times; about a minute. Opt-in: not yet
# reliable enough for the suite.
chaos-rolling:
	CG_CHAOS_ROLLING=1 go test -race -count=3 -timeout 15m -run '^TestRollingRestartLameDuck$$' -v ./test/chaos/

# Release builds use goreleaser from PATH; v2.15.1 is the newest that builds
# with cg's Go. `make snapshot` builds every archive into dist/ (git-ignored)
# from the module cache, with the network shut for the Go builds, and
# publishes nothing.
GORELEASER_INSTALL := go install github.com/goreleaser/goreleaser/v2@v2.15.1
need-goreleaser = @command -v goreleaser >/dev/null 2>&1 || { \
	echo "goreleaser is not on PATH. Install it (into \$$(go env GOPATH)/bin, or \$$GOBIN) with:" >&2; \
	echo "  $(GORELEASER_INSTALL)" >&2; exit 1; }

# goreleaser reads the commit and tags from git, but in a repository without
# a remote (a plain `git init`) it gives up on git altogether: commit "none",
# version 0.0.0. Lend it the project's URL for the run through git's
# environment, leaving the repository's config alone.
git-remote-env = $(if $(shell git remote 2>/dev/null),,GIT_CONFIG_COUNT=1 \
	GIT_CONFIG_KEY_0=remote.origin.url GIT_CONFIG_VALUE_0=https://github.com/cg-dev/cg.git)

.PHONY: release-check
release-check:
	$(need-goreleaser)
	goreleaser check

snapshot: release-check
	go mod download
	$(git-remote-env) GOPROXY=off GOTOOLCHAIN=local goreleaser release --snapshot --clean

clean:
	rm -rf cg dist
