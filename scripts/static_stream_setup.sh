#!/usr/bin/env bash
# Usage: scripts/static_stream_setup.sh
#
# The seed article's static setup, with cg alone (no nats CLI):
#   1. the stream ORDERS on orders.*, partition-stamped by the transform
#      orders.* -> {{partition(10,1)}}.orders.{{wildcard(1)}}
#   2. the static group fulfillment over 10 partitions, balanced over m1 and m2
# then shows the group. Run it against a local server ('cg server' in another
# shell); then start members and traffic:
#   cg static consume ORDERS fulfillment m1 --sleep 25ms   # in two shells: one pinned, one standby
#   cg static consume ORDERS fulfillment m2 --sleep 25ms
#   scripts/generate_traffic.sh
#
# Environment: NATS_URL (default nats://127.0.0.1:4222, loopback only),
# STREAM (ORDERS), GROUP (fulfillment), CG and MKSTREAM (see scripts/lib.sh).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

STREAM="${STREAM:-ORDERS}"
GROUP="${GROUP:-fulfillment}"

say "Partition the stream up front: a deterministic token 0..9 hashed from the customer id"
mkstream --subjects 'orders.*' \
	--transform-source 'orders.*' \
	--transform-destination '{{partition(10,1)}}.orders.{{wildcard(1)}}' "$STREAM"

say "cg static create balanced $STREAM $GROUP 10 m1 m2 --filter '>'"
cg static create balanced "$STREAM" "$GROUP" 10 m1 m2 --filter '>'

say "cg static info $STREAM $GROUP"
cg static info "$STREAM" "$GROUP"
