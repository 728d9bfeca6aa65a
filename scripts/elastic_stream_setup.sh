#!/usr/bin/env bash
# Usage: scripts/elastic_stream_setup.sh
#
# The seed article's elastic setup, with cg alone (no nats CLI):
#   1. a plain stream ORDERS on orders.* (no partition token)
#   2. the elastic group fulfillment over 10 partitions, which builds the hidden
#      work-queue stream ORDERS-fulfillment that stamps the partition as it sources
#   3. members m1 and m2 added live
# then shows the group. Run it against a local server ('cg server' in another
# shell); then:
#   cg elastic consume ORDERS fulfillment m1
#   cg elastic consume ORDERS fulfillment m2
#   scripts/generate_traffic.sh
#   cg elastic drop ORDERS fulfillment m1   # survivors pick up its partitions
#
# Environment: NATS_URL (default nats://127.0.0.1:4222, loopback only),
# STREAM (ORDERS), GROUP (fulfillment), CG and MKSTREAM (see scripts/lib.sh).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

STREAM="${STREAM:-ORDERS}"
GROUP="${GROUP:-fulfillment}"

cg help elastic >/dev/null 2>&1 || die "this cg has no 'elastic' commands yet (cg help elastic)"

say "A plain stream: no partition token in the subject"
mkstream --subjects 'orders.*' "$STREAM"

say "cg elastic create $STREAM $GROUP 10"
cg elastic create "$STREAM" "$GROUP" 10

say "cg elastic add $STREAM $GROUP m1 m2"
cg elastic add "$STREAM" "$GROUP" m1 m2

say "cg elastic info $STREAM $GROUP"
cg elastic info "$STREAM" "$GROUP"
