#!/usr/bin/env bash
# Usage: scripts/test.sh [go test flags...]
#
# cg's whole test command, the one README gives and CI runs: formatting
# check, go vet, then every test with the race detector. Tests start their
# own embedded NATS servers on loopback; nothing needs to be installed or
# running but Go.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go' -not -path './.git/*'))
if [[ -n $unformatted ]]; then
	echo "gofmt would change these files (run 'gofmt -w .'):" >&2
	echo "$unformatted" >&2
	exit 1
fi
echo "gofmt: ok"
go vet ./...
echo "go vet: ok"
go test -race -count=1 -timeout 12m "$@" ./...
