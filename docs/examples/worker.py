#!/usr/bin/env python3
"""A long-lived cg worker in Python, speaking cg's line protocol:

    cg static consume ORDERS fulfillment m1 --worker 'python3 docs/examples/worker.py' --concurrency 16

cg writes one JSON line per message on stdin and reads one result line per
message from stdout (docs/workers.md). Results may come back in any order;
cg sends a key's next message only after the previous one's result, so
per-key order holds however many messages are in flight. Anything printed
to stderr reaches cg's stderr behind a [worker #N] prefix; stdout is the
protocol's alone.
"""
import base64
import json
import sys


def handle(msg):
    body = base64.b64decode(msg["data"]) if msg.get("base64") else msg["data"].encode()
    if b"invalid" in body:
        # An error fails this delivery: cg's retry policy decides.
        raise ValueError("cannot ship an invalid order")
    print(f"order {msg.get('key')} (seq {msg['seq']}, delivery {msg['delivered']}): {body.decode(errors='replace')}",
          file=sys.stderr, flush=True)


for line in sys.stdin:
    msg = json.loads(line)
    try:
        handle(msg)
        result = {"id": msg["id"], "ok": True}
    except Exception as e:  # noqa: BLE001 - every failure is reported to cg
        result = {"id": msg["id"], "error": str(e)}
    sys.stdout.write(json.dumps(result) + "\n")
    sys.stdout.flush()
