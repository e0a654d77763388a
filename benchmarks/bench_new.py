"""Wall time of `opdesign new` per example SPEC (fresh interpreter each run), byte-identity of a
second `--force` run, and the scaffold self-check time and error figures.

Also the CPU time (user + system of the child, interpreter start included: the figure a busy machine
does not inflate much) and the peak RSS of the first run. ``--million`` adds dense_fa_8192 at
seq_q = seq_kv = 1048576 (dynamic seq axes up to that), the large-SPEC case of issue 15.

    python benchmarks/bench_new.py [--skip-scaffold] [--million]
"""

from __future__ import annotations

import argparse
import hashlib
import os
import resource
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


def million_spec(folder: Path) -> Path:
    """dense_fa_8192 at 1M tokens (seq_q = seq_kv = 1048576) with dynamic seq axes that hold it."""
    import yaml

    data = yaml.safe_load((REPO / "examples" / "specs" / "dense_fa_8192.yaml").read_text(encoding="utf-8"))
    data["op_name"] = "dense_fa_1m"
    data["shape"].update(seq_q=1 << 20, seq_kv=1 << 20)
    data["dynamic_axes"] += [{"name": "seq_q", "range": [1, 1 << 20]}, {"name": "seq_kv", "range": [1, 1 << 20]}]
    path = folder / "dense_fa_1m.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return path


def _child_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _run_new(spec: Path, out: Path, extra: list[str]) -> tuple[float, float, float, subprocess.CompletedProcess]:
    """(wall s, CPU s, peak RSS MiB, process) of one `opdesign new` (RSS read by /usr/bin/time when present)."""
    timer = ["/usr/bin/time", "-f", "%M"] if os.path.exists("/usr/bin/time") else []
    start, cpu = time.perf_counter(), _child_cpu()
    res = subprocess.run([*timer, sys.executable, "-m", "opdesign", "new", "--spec", str(spec), "--out", str(out),
                          *extra],
                         capture_output=True, text=True)
    wall, used = time.perf_counter() - start, _child_cpu() - cpu
    lines = res.stderr.strip().splitlines()
    rss = int(lines[-1]) / 1024 if timer and lines and lines[-1].isdigit() else float("nan")
    return wall, used, rss, res


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--skip-scaffold", action="store_true")
    parser.add_argument("--million", action="store_true", help="add the 1M-token SPEC (its scaffold is skipped)")
    args = parser.parse_args()
    print(f"load average (1 min): {os.getloadavg()[0]:.2f}")
    # PYTHONDONTWRITEBYTECODE set: each run compiles the modules it imports from source again
    cache = "off (PYTHONDONTWRITEBYTECODE set)" if os.environ.get("PYTHONDONTWRITEBYTECODE") else "on"
    print(f"bytecode cache: {cache}")
    print(f"{'spec':<24} {'new_s':>6} {'cpu_s':>6} {'rss_MiB':>7} {'again_s':>7} {'identical':>9} "
          f"{'scaffold_s':>10}  self-check")
    worst = 0
    with tempfile.TemporaryDirectory() as tmp:
        specs = sorted((REPO / "examples" / "specs").glob("*.yaml"))
        if args.million:
            specs.append(million_spec(Path(tmp)))
        for spec in specs:
            out = Path(tmp) / spec.stem
            times = []
            digests = []
            cpu = rss = float("nan")
            for extra in ([], ["--force"]):
                wall, used, peak, res = _run_new(spec, out, extra)
                times.append(wall)
                if not extra:
                    cpu, rss = used, peak
                if res.returncode != 0:
                    print(f"{spec.stem:<24} new failed: {res.stderr.strip()}")
                    worst = 1
                    break
                digests.append(_digest(out))
            else:
                scaffold_s, summary = "-", "skipped"
                if not args.skip_scaffold and spec.parent != Path(tmp):
                    scaffold = next(out.glob("*_scaffold.py"))
                    start = time.perf_counter()
                    res = subprocess.run([sys.executable, str(scaffold)], capture_output=True, text=True)
                    scaffold_s = f"{time.perf_counter() - start:.2f}"
                    summary = " | ".join(line for line in res.stdout.splitlines()
                                         if "max_abs_err" in line or "kernel error" in line)
                    worst |= res.returncode != 0
                print(f"{spec.stem:<24} {times[0]:6.2f} {cpu:6.2f} {rss:7.1f} {times[1]:7.2f} "
                      f"{str(digests[0] == digests[1]):>9} {scaffold_s:>10}  {summary}")
    return worst


if __name__ == "__main__":
    sys.exit(main())
