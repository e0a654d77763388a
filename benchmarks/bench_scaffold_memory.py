"""Peak memory and wall time of each example's numpy scaffold (issue 14 item 7).

Generates every `examples/specs/*.yaml` with `opdesign new` from the opdesign source tree given
(default: this one; `--src OTHER/src` measures another tree, e.g. an older commit unpacked with
`git archive`), runs each `<op>_scaffold.py` in a child process, and reads the child's peak
resident set size (ru_maxrss of os.wait4, Linux: KiB) and wall time. Linux / macOS only.

    python benchmarks/bench_scaffold_memory.py [--quick] [--src DIR] [--only NAME]... [--limit-mib 500]

Prints one row per example and the figures as JSON; exits 1 when a scaffold fails its self-check
or, with --limit-mib, when a peak is at or above the limit. Times depend on the machine's load.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _generate(src: Path, spec: Path, out: Path) -> Path:
    env = dict(os.environ, PYTHONPATH=str(src))
    subprocess.run([sys.executable, "-m", "opdesign", "new", "--spec", str(spec), "--out", str(out), "--force"],
                   check=True, capture_output=True, env=env)
    return out / f"{spec.stem}_scaffold.py"


def _run(script: Path, quick: bool) -> dict:
    args = [sys.executable, str(script)] + (["--quick"] if quick else [])
    start = time.perf_counter()
    with open(os.devnull, "w") as devnull:
        proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=devnull, text=True, cwd=script.parent)
        stdout = proc.stdout.read()
        _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    rss_kib = usage.ru_maxrss if sys.platform != "darwin" else usage.ru_maxrss // 1024
    last = stdout.strip().splitlines()[-1] if stdout.strip() else ""
    return {"exit": proc.returncode, "peak_mib": round(rss_kib / 1024, 1),
            "seconds": round(time.perf_counter() - start, 1), "result": last}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="run the scaffolds with --quick")
    parser.add_argument("--src", type=Path, default=REPO / "src", help="opdesign source tree that generates")
    parser.add_argument("--only", action="append", help="example name (repeatable)")
    parser.add_argument("--limit-mib", type=float, help="exit 1 when a peak is at or above this")
    args = parser.parse_args(argv)
    specs = sorted((REPO / "examples" / "specs").glob("*.yaml"))
    if args.only:
        specs = [s for s in specs if s.stem in args.only]
    rows, bad = {}, False
    with tempfile.TemporaryDirectory(prefix="bench-scaffold-") as tmp:
        for spec in specs:
            script = _generate(args.src.resolve(), spec, Path(tmp) / spec.stem)
            row = _run(script, args.quick)
            rows[spec.stem] = row
            bad |= row["exit"] != 0 or (args.limit_mib is not None and row["peak_mib"] >= args.limit_mib)
            print(f"{spec.stem}: peak {row['peak_mib']} MiB, {row['seconds']} s, exit {row['exit']}: {row['result']}",
                  flush=True)
    print(json.dumps({"quick": args.quick, "src": str(args.src), "scaffolds": rows}, indent=1, sort_keys=True))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
