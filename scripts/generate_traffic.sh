#!/usr/bin/env bash
# Usage: scripts/generate_traffic.sh [count] [rate] [keys]
#
# Publishes keyed orders to orders.<key> with cg publish: count messages
# (default 1000; 0 until Ctrl-C) at rate (default 20/s) over keys customer
# keys (default 20). Every message carries Cg-Key and Cg-Key-Seq, so what the
# members handle can be checked for per-key order. Examples:
#   scripts/generate_traffic.sh               # 1000 messages at 20/s over 20 keys
#   scripts/generate_traffic.sh 0 50/s 100    # until Ctrl-C
#
# Environment: NATS_URL (default nats://127.0.0.1:4222, loopback only),
# SUBJECT (default 'orders.{key}'), CG (see scripts/lib.sh).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

COUNT="${1:-1000}"
RATE="${2:-20/s}"
KEYS="${3:-20}"
DEFAULT_SUBJECT='orders.{key}'
SUBJECT="${SUBJECT:-$DEFAULT_SUBJECT}"

say "cg publish '$SUBJECT' --keys $KEYS --count $COUNT --rate $RATE"
cg publish "$SUBJECT" --keys "$KEYS" --count "$COUNT" --rate "$RATE"
