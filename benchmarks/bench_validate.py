"""Wall time of `opdesign validate`: one generated design (fresh interpreter, interpreter start
included) and 200 designs in one invocation.

    python benchmarks/bench_validate.py [--runs 10] [--designs 200] [--distinct 1000] [--strict]

Designs are `opdesign new` outputs of every example SPEC (en and zh), copied
round-robin up to --designs folders. Prints wall and child CPU time (CPU time
shows the real cost when other processes load the machine) as JSON, and the in-process CPU time per
design: over the batch (copies: the validator's memo serves a copy of bytes it has checked) and on
first sight of each distinct design (memo cleared before each). `first_sight_bulk`: --distinct
designs that are all different bytes, each seen for the first time: the rendered designs above plus
`opdesign new --candidate 1..3` of every SPEC that has them, then copies of those made distinct by
one appended line (`<!-- copy N -->` in DESIGN.md, `# copy N` in the kernel), so that neither the
memo nor a kept tree serves any of them; validated in one process (in-process CPU, memo cleared
first) and in one `opdesign validate --format json` run (child CPU). With --strict
exits 1 when a target is missed (one design: median < 0.3 s; 200 designs < 10 s)
or when a design has an error- or warning-level finding.

`throughput` (issue 33): the same --distinct designs through the command line as a repository would
run it: `opdesign validate -j 2` first with no cache (`--no-cache`), then first sight writing
`.opdesign_cache/` (an empty cache), then again from that cache; each as designs per second of wall
time and per CPU-second (the CLI process and its workers). Targets: >= 45 designs/s first sight with
-j 2, >= 500 designs/s from the cache. The machine's 1-minute load average is printed with them.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TARGET_ONE_S = 0.3
TARGET_MANY_S = 10.0
TARGET_IN_PROCESS_MS = 10.0
TARGET_FIRST_SIGHT_PER_S = 45.0
TARGET_CACHED_PER_S = 500.0


def _generate(out: Path) -> list[Path]:
    sys.path.insert(0, str(REPO / "src"))
    from opdesign.workflows.new import new_design

    folders = []
    for spec in sorted((REPO / "examples" / "specs").glob("*.yaml")):
        for lang in ("en", "zh"):
            folder = out / "gen" / f"{spec.stem}_{lang}"
            new_design(spec, folder, lang=lang)
            folders.append(folder)
    return folders


def _candidates(out: Path) -> list[Path]:
    """`opdesign new --candidate N` (N = 1..3) of every example SPEC that has that many candidates."""
    folders = []
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    for spec in sorted((REPO / "examples" / "specs").glob("*.yaml")):
        for n in (1, 2, 3):
            folder = out / "cand" / f"{spec.stem}_c{n}"
            proc = subprocess.run([sys.executable, "-m", "opdesign", "new", "--spec", str(spec), "--out", str(folder),
                                   "--candidate", str(n)], capture_output=True, check=False, env=env)
            if proc.returncode == 0:
                folders.append(folder)
    return folders


def _distinct(bases: list[Path], count: int, out: Path) -> list[Path]:
    """``count`` designs of distinct bytes: the bases, then copies with one appended marker line."""
    folders = list(bases[:count])
    i = 0
    while len(folders) < count:
        base = bases[i % len(bases)]
        target = out / "distinct" / f"d{i:04d}"
        shutil.copytree(base, target)
        with (target / "DESIGN.md").open("a", encoding="utf-8") as fh:
            fh.write(f"\n<!-- copy {i} -->\n")
        for kernel in target.glob("*_kernel.py"):
            with kernel.open("a", encoding="utf-8") as fh:
                fh.write(f"# copy {i}\n")
        folders.append(target)
        i += 1
    return folders


def _first_sight_bulk(folders: list[Path], root: Path) -> dict:
    """CPU ms per design over distinct designs seen first: in this process and in one CLI run."""
    from opdesign.validate.engine import memo
    from opdesign.workflows.validate import validate_paths

    memo.clear()
    start = time.process_time()
    report = validate_paths(folders)
    in_process = 1000 * (time.process_time() - start) / len(folders)
    wall, cpu, proc = _run(["--no-cache", "-j", "1", "--format", "json", *[str(f.relative_to(root)) for f in folders]],
                           root)
    cli = json.loads(proc.stdout)
    return {"designs": len(folders), "distinct_files": len({(f / "DESIGN.md").read_bytes() for f in folders}),
            "in_process_cpu_ms_per_design": round(in_process, 2),
            "cli_cpu_ms_per_design": round(1000 * cpu / len(folders), 2),
            "cli_wall_ms_per_design": round(1000 * wall / len(folders), 2),
            "target_ms": TARGET_IN_PROCESS_MS, "summary": report.summary.model_dump(),
            "cli_summary": cli["summary"]}


def _throughput(folders: list[Path], root: Path, jobs: int = 2) -> dict:
    """Designs per second (wall and CPU) of `opdesign validate -j N` over ``folders``: without the cache,
    first sight into an empty cache, and from the cache."""
    names = [str(f.relative_to(root)) for f in folders]
    shutil.rmtree(root / ".opdesign_cache", ignore_errors=True)
    out: dict = {"designs": len(folders), "jobs": jobs, "load_average_1min_before": round(os.getloadavg()[0], 2)}
    summaries = {}
    for label, extra in (("first_sight_no_cache", ["--no-cache"]), ("first_sight_writing_cache", []),
                         ("cached", [])):
        wall, cpu, proc = _run(["-j", str(jobs), "--format", "json", *extra, *names], root)
        summaries[label] = json.loads(proc.stdout)["summary"]
        out[label] = {"wall_s": round(wall, 3), "cpu_s": round(cpu, 3),
                      "designs_per_s": round(len(folders) / wall, 1),
                      "designs_per_cpu_s": round(len(folders) / cpu, 1) if cpu else None}
    out["load_average_1min_after"] = round(os.getloadavg()[0], 2)
    out["cache_files"] = sum(1 for _ in (root / ".opdesign_cache").rglob("*.json"))
    out["same_summary"] = len({json.dumps(s, sort_keys=True) for s in summaries.values()}) == 1
    out["summary"] = summaries["cached"]
    out["targets_designs_per_s"] = {"first_sight": TARGET_FIRST_SIGHT_PER_S, "cached": TARGET_CACHED_PER_S}
    return out


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _run(args: list[str], cwd: Path) -> tuple[float, float, subprocess.CompletedProcess]:
    """(wall s, child CPU s, process): CPU time tells contention on a busy machine apart from real cost."""
    start, cpu = time.perf_counter(), _cpu()
    proc = subprocess.run([sys.executable, "-m", "opdesign", "validate", *args], cwd=cwd, capture_output=True,
                          text=True, check=False)
    return time.perf_counter() - start, _cpu() - cpu, proc


def _in_process(generated: list[Path], batch: list[str], root: Path) -> dict:
    """CPU ms per design in this process: the batch, and each distinct design seen first."""
    from opdesign.validate.engine import memo
    from opdesign.workflows.validate import validate_paths

    validate_paths([generated[0]])  # imports and catalog loads are not a design's cost
    first = []
    for folder in generated:
        memo.clear()
        start = time.process_time()
        validate_paths([folder])
        first.append(1000 * (time.process_time() - start))
    memo.clear()
    start = time.process_time()
    validate_paths([root / b for b in batch])
    batch_ms = 1000 * (time.process_time() - start) / len(batch)
    return {"batch_cpu_ms_per_design": round(batch_ms, 2), "designs": len(batch),
            "first_sight_cpu_ms_per_design": round(statistics.mean(first), 2), "distinct": len(generated),
            "target_ms": TARGET_IN_PROCESS_MS}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10, help="repetitions of the one-design run")
    parser.add_argument("--designs", type=int, default=200, help="designs in the batch run")
    parser.add_argument("--distinct", type=int, default=1000, help="distinct designs of the first-sight bulk run")
    parser.add_argument("--jobs", type=int, default=2, help="-j of the throughput runs")
    parser.add_argument("--strict", action="store_true", help="exit 1 when a target is missed")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        generated = _generate(root)
        batch = []
        for i in range(args.designs):
            target = root / "batch" / f"op{i:03d}"
            shutil.copytree(generated[i % len(generated)], target)
            batch.append(str(target.relative_to(root)))
        one = str(generated[0].relative_to(root))
        _run(["--no-cache", one], root)  # warm the file cache and __pycache__
        runs = [_run(["--no-cache", one], root) for _ in range(args.runs)]
        times, cpus = [r[0] for r in runs], [r[1] for r in runs]
        many_s, many_cpu, proc = _run(["--no-cache", "--format", "json", *batch], root)
        report = json.loads(proc.stdout)
        in_process = _in_process(generated, batch, root)
        distinct = _distinct(generated + _candidates(root), args.distinct, root)
        bulk = _first_sight_bulk(distinct, root)
        throughput = _throughput(distinct, root, args.jobs)
    figures = {
        "one_design_s": {"median": round(statistics.median(times), 3), "min": round(min(times), 3),
                         "max": round(max(times), 3), "cpu_median": round(statistics.median(cpus), 3),
                         "runs": args.runs, "target": TARGET_ONE_S},
        "batch": {"designs": args.designs, "wall_s": round(many_s, 3), "cpu_s": round(many_cpu, 3),
                  "target": TARGET_MANY_S, "per_design_ms": round(1000 * many_s / args.designs, 2),
                  "per_design_cpu_ms": round(1000 * many_cpu / args.designs, 2)},
        "in_process": in_process,
        "first_sight_bulk": bulk,
        "throughput": throughput,
        "load_average_1min": round(os.getloadavg()[0], 2),
        "batch_summary": report["summary"],
        "python": sys.version.split()[0],
    }
    print(json.dumps(figures, indent=2))
    missed = (statistics.median(times) >= TARGET_ONE_S or many_s >= TARGET_MANY_S
              or report["summary"]["error"] or report["summary"]["warning"]
              or throughput["first_sight_writing_cache"]["designs_per_s"] < TARGET_FIRST_SIGHT_PER_S
              or throughput["cached"]["designs_per_s"] < TARGET_CACHED_PER_S)
    return 1 if args.strict and missed else 0


if __name__ == "__main__":
    sys.exit(main())
