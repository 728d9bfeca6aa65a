#!/usr/bin/env python3
# The trivial long-lived worker of the workers benchmark: it answers ok to
# every message, at once.
import json
import sys

out = sys.stdout
for line in sys.stdin:
    out.write('{"id":%d,"ok":true}\n' % json.loads(line)["id"])
    out.flush()
