"""Wall and CPU time of a test run (the README's default `python -m pytest`, or the arguments given).

The run is a child process; its CPU time is user + system of it and all its children
(resource.getrusage(RUSAGE_CHILDREN): the xdist workers and the CLI subprocesses the tests
start), so other processes on a busy machine do not count. The load average before and
after is printed too: on a loaded machine the wall time says little, and the quiet wall
time is bounded below by CPU / workers (the test run's own CPU spread over the cores it
uses). Prints figures only; nothing is asserted.

    python benchmarks/bench_tests.py [--json] [-- PYTEST-ARGS...]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def run(pytest_args: list[str]) -> dict:
    load_before = os.getloadavg()
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *pytest_args], cwd=REPO,
                          capture_output=True, text=True, check=False)
    wall = time.perf_counter() - start
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    summary = next((line for line in reversed(proc.stdout.splitlines()) if " in " in line and "passed" in line), "")
    cores = os.cpu_count() or 1
    cpu = usage.ru_utime + usage.ru_stime
    return {"args": pytest_args, "exit_code": proc.returncode, "summary": summary.strip("= "),
            "wall_s": round(wall, 1), "cpu_s": round(cpu, 1), "cores": cores,
            "cpu_per_core_s": round(cpu / cores, 1), "max_rss_mb": round(usage.ru_maxrss / 1024),
            "load_before": [round(x, 2) for x in load_before], "load_after": [round(x, 2) for x in os.getloadavg()]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true")
    parser.add_argument("pytest_args", nargs="*")
    args = parser.parse_args()
    figures = run(args.pytest_args)
    if args.json:
        print(json.dumps(figures, indent=2))
        return
    print(f"pytest {' '.join(figures['args'])}: {figures['summary']} (exit {figures['exit_code']})")
    print(f"wall {figures['wall_s']} s, CPU {figures['cpu_s']} s (user + system, all children), "
          f"CPU / {figures['cores']} cores = {figures['cpu_per_core_s']} s, largest process {figures['max_rss_mb']} MB")
    print(f"load average before {figures['load_before']}, after {figures['load_after']}")


if __name__ == "__main__":
    main()
