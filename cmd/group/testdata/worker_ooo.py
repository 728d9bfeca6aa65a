#!/usr/bin/env python3
# A test worker for cg's line protocol: it records "key seq delivered" for
# every message as it arrives (to argv[1]), and answers out of order:
# what has arrived within a few milliseconds, newest first. With
# argv[2] = N and argv[3] = a marker path, the first run exits abruptly on
# its N-th message, with earlier ones unanswered.
import json
import os
import sys
import threading
import time

rec = open(sys.argv[1], "a", buffering=1)
crash_at = int(sys.argv[2]) if len(sys.argv) > 2 else 0
marker = sys.argv[3] if len(sys.argv) > 3 else ""
if crash_at and os.path.exists(marker):
    crash_at = 0

lock = threading.Condition()
pending = []


def answer():
    while True:
        with lock:
            while not pending:
                lock.wait()
        time.sleep(0.003)
        with lock:
            batch = pending[:]
            pending.clear()
        for msg in reversed(batch):
            sys.stdout.write(json.dumps({"id": msg["id"], "ok": True}) + "\n")
        sys.stdout.flush()


threading.Thread(target=answer, daemon=True).start()
n = 0
for line in sys.stdin:
    msg = json.loads(line)
    n += 1
    rec.write(f"{msg.get('key')} {msg['seq']} {msg['delivered']}\n")
    if crash_at and n == crash_at:
        open(marker, "w").close()
        os._exit(3)
    with lock:
        pending.append(msg)
        lock.notify()
