"""A tool-call worker for the MCP process-pool tests: it answers only once a flag file exists."""

from __future__ import annotations

import os
import time


def wait_for_flag(name, arguments, root):
    flag = os.path.join(root, "release")
    with open(os.path.join(root, "started"), "w"):
        pass
    for _ in range(60_000):  # at most about 10 minutes: the test creates the flag after its ping
        if os.path.exists(flag):
            return {"rules": []}, True
        time.sleep(0.01)
    return {"error": {"code": "internal_error", "message": "never released", "details": None}}, False
