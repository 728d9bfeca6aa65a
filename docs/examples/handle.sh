#!/bin/sh
# A per-message cg worker in shell:
#   cg static consume ORDERS fulfillment m1 --exec docs/examples/handle.sh
# cg runs it once per message: the body on stdin, the metadata in CG_*
# variables (docs/workers.md). Exit 0 acks the message; any other exit
# fails this delivery, and cg's retry policy (--max-deliver, --backoff,
# --on-poison) decides what happens next. What it prints reaches cg's
# stderr behind the message's [p<partition> seq <seq>] prefix.
body=$(cat)
case "$body" in
*invalid*)
	echo "cannot ship an invalid order" >&2
	exit 1
	;;
esac
echo "order $CG_KEY (seq $CG_STREAM_SEQ, delivery $CG_DELIVERED): $body"
