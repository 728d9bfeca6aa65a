#!/usr/bin/env bash
# Shared setup for the walkthrough scripts; source it, do not run it.
#
# Environment:
#   NATS_URL  server to use (default nats://127.0.0.1:4222); loopback only
#   CG        how to run cg (default: cg on PATH, else a build of this repository)
#   MKSTREAM  how to run the stream maker (default: go run ./scripts/mkstream)

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export NATS_URL="${NATS_URL:-nats://127.0.0.1:4222}"

die() { echo "$(basename "$0"): $*" >&2; exit 1; }

# These scripts set up a local walkthrough: refuse a server elsewhere.
check_loopback() {
	local url host
	IFS=',' read -ra urls <<<"$NATS_URL"
	for url in "${urls[@]}"; do
		host="${url#*://}"
		host="${host#*@}"
		host="${host%%/*}"
		case "$host" in
		\[::1\]* | 127.* | localhost | localhost:*) ;;
		*) die "NATS_URL=$url is not on loopback; these scripts only set up a local server (start one with 'cg server')" ;;
		esac
	done
}

# cg: run the cg command line.
if [[ -z "${CG:-}" ]]; then
	if command -v cg >/dev/null 2>&1; then
		# The path, not the name: the function cg below would call itself.
		CG="$(command -v cg)"
	else
		command -v go >/dev/null 2>&1 || die "neither cg nor go is on PATH; install cg or Go"
		CG_BUILD_DIR="$(mktemp -d)"
		trap 'rm -rf "$CG_BUILD_DIR"' EXIT
		(cd "$ROOT" && go build -o "$CG_BUILD_DIR/cg" .) || die "cannot build cg"
		CG="$CG_BUILD_DIR/cg"
	fi
fi
cg() { "$CG" "$@"; }

# mkstream: create a stream (cg has no stream commands of its own).
mkstream() {
	if [[ -n "${MKSTREAM:-}" ]]; then
		"$MKSTREAM" "$@"
	else
		(cd "$ROOT" && go run ./scripts/mkstream "$@")
	fi
}

# say: show a step and the command behind it.
say() { printf '\n# %s\n' "$*" >&2; }

check_loopback
