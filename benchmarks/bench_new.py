"""Wall time of `opdesign new` per example SPEC (fresh interpreter each run), byte-identity of a
second `--force` run, and the scaffold self-check time and error figures.

    python benchmarks/bench_new.py [--skip-scaffold]
"""

from __future__ import annotations

import argparse
import hashlib
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _digest(folder: Path) -> str:
    h = hashlib.sha256()
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        h.update(path.relative_to(folder).as_posix().encode())
        h.update(path.read_bytes())
    return h.hexdigest()[:16]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--skip-scaffold", action="store_true")
    args = parser.parse_args()
    print(f"{'spec':<24} {'new_s':>6} {'again_s':>7} {'identical':>9} {'scaffold_s':>10}  self-check")
    worst = 0
    with tempfile.TemporaryDirectory() as tmp:
        for spec in sorted((REPO / "examples" / "specs").glob("*.yaml")):
            out = Path(tmp) / spec.stem
            times = []
            digests = []
            for extra in ([], ["--force"]):
                start = time.perf_counter()
                res = subprocess.run([sys.executable, "-m", "opdesign", "new", "--spec", str(spec), "--out", str(out), *extra],
                                     capture_output=True, text=True)
                times.append(time.perf_counter() - start)
                if res.returncode != 0:
                    print(f"{spec.stem:<24} new failed: {res.stderr.strip()}")
                    worst = 1
                    break
                digests.append(_digest(out))
            else:
                scaffold_s, summary = "-", "skipped"
                if not args.skip_scaffold:
                    scaffold = next(out.glob("*_scaffold.py"))
                    start = time.perf_counter()
                    res = subprocess.run([sys.executable, str(scaffold)], capture_output=True, text=True)
                    scaffold_s = f"{time.perf_counter() - start:.2f}"
                    summary = " | ".join(line for line in res.stdout.splitlines() if "max_abs_err" in line or "kernel error" in line)
                    worst |= res.returncode != 0
                print(f"{spec.stem:<24} {times[0]:6.2f} {times[1]:7.2f} {str(digests[0] == digests[1]):>9} {scaffold_s:>10}  {summary}")
    return worst


if __name__ == "__main__":
    sys.exit(main())
