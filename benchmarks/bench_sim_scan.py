"""SIM a list of pinned SK-01 tilings and say where PyPTO placed V1: the data behind ``v1_on_aic``.

For each ``--tiles`` string (the ``opdesign new --tiles`` syntax) the script renders the design with
``opdesign new``, compiles and simulates its kernel in PyPTO SIM on the SPEC's typical shape, and
reads the SIM's pipe trace (``CostModelSimulationOutput/_simulate.pipe.swim.json``): the busy cycles per
core type and pipe, and whether vector ops ran on an AIC core (``AIC:VECTOR_ALU``, V1 placed in the
cube core's subgraph). One JSON line per tiling goes to ``--out`` (appended; tilings already there are
skipped), and one summary line to stdout. Needs the ``opdesign[pypto]`` extra (``--python``).

    python benchmarks/bench_sim_scan.py --spec benchmarks/specs/calib_dense_s512.yaml --out scan.jsonl \\
        --grid [--jobs 2] [--python /path/to/python-with-pypto]
    python benchmarks/bench_sim_scan.py --spec S --out scan.jsonl --tiles q_tile=..,kv_tile=..,... [...]

``--grid`` runs the 48 tilings of the committed fit data: q_tile 64 / 128 x kv_tile 256 / 512 x QK
64x64 .. 128x128 x vec 16x64 / 16x128 / 16x256, PV 64 x kv_tile, unroll 1, one chain and stream
(the rows the SPEC's budgets refuse are reported as refused). Prints figures only.
"""

from __future__ import annotations

import argparse
import collections
import json
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))


def grid() -> list[str]:
    out = []
    for q in (64, 128):
        for kv in (256, 512):
            for qk in ("64x64", "64x128", "64x256", "128x64", "128x128"):
                m, n = map(int, qk.split("x"))
                if m > q or n > kv:
                    continue
                for vec in ("16x64", "16x128", "16x256"):
                    out.append(f"q_tile={q},kv_tile={kv},qk_tile={qk},pv_tile=64x{kv},vec_tile={vec},"
                               "unroll_factor=1,head_group=1,streams=1")
    return out


def _busy(run_dir: Path) -> tuple[dict[str, int], dict[str, list[int]]]:
    """Busy cycles per ``coreType:pipe`` and [tasks, mean cycles] per ``coreType`` + subgraph."""
    busy: collections.Counter = collections.Counter()
    tasks: dict[str, list[int]] = collections.defaultdict(list)
    for trace in run_dir.rglob("_simulate.pipe.swim.json"):
        for core in json.loads(trace.read_text(encoding="utf-8")):
            for pipe, logs in core.get("pipeLogs", {}).items():
                busy[f"{core['coreType']}:{pipe}"] += sum(op["execEnd"] - op["execStart"] for op in logs)
    for swim in run_dir.rglob("_simulate.swim.json"):
        for core in json.loads(swim.read_text(encoding="utf-8")):
            for t in core.get("tasks", []):
                tasks[f"{core['coreType']}{t['subGraphId']}"].append(t["execEnd"] - t["execStart"])
    return dict(busy), {k: [len(v), round(sum(v) / len(v))] for k, v in sorted(tasks.items())}


def one(spec: Path, tiles: str, python: str, timeout: float) -> dict:
    from opdesign.pypto_run import simcase
    from opdesign.pypto_run.runner import run_isolated
    from opdesign.pypto_run.selfcheck import read_harness
    from opdesign.spec import load_spec

    work = Path(tempfile.mkdtemp(prefix="opdesign-scan-"))
    try:
        new = subprocess.run([sys.executable, "-m", "opdesign", "new", "--spec", str(spec), "--tiles", tiles,
                              "--out", str(work / "d"), "-q"], capture_output=True, text=True,
                             env={"PYTHONPATH": str(REPO / "src"), "PATH": "/usr/bin:/bin"})
        if new.returncode != 0:
            return {"tiles": tiles, "refused": new.stderr.strip()[:300]}
        kernel = next((work / "d").glob("*_kernel.py"))
        harness = read_harness(kernel)
        s = load_spec(spec).shape
        shape = {k: getattr(s, k) for k in ("batch", "num_heads", "num_kv_heads", "seq_q", "seq_kv", "head_dim")}
        res = run_isolated(kernel, harness["KERNEL_FUNCTION"], f"{simcase.__file__}:fixed_shape_case", mode="sim",
                           work_dir=work / "run", python=python, timeout=timeout,
                           case_args={"kernel_file": str(kernel), "config": harness["CONFIGS"][0]["name"],
                                      "shape": shape})
        busy, tasks = _busy(work / "run")
        return {"tiles": tiles, "sim_us": res.sim_us, "seconds": res.seconds,
                "errors": [e.message[:300] for e in res.errors], "busy": busy, "tasks": tasks}
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spec", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True, help="JSON lines, appended")
    parser.add_argument("--tiles", nargs="*", default=[])
    parser.add_argument("--grid", action="store_true", help="the 48 tilings of the committed fit data")
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--timeout", type=float, default=900.0)
    parser.add_argument("--python", default=sys.executable, help="interpreter with pypto (default: this one)")
    args = parser.parse_args(argv)
    todo = (grid() if args.grid else []) + args.tiles
    done = {json.loads(line)["tiles"] for line in args.out.read_text().splitlines()} if args.out.exists() else set()
    todo = [t for t in todo if t not in done]

    def run(tiles: str) -> None:
        rec = one(args.spec, tiles, args.python, args.timeout)
        with args.out.open("a", encoding="utf-8") as fh:
            fh.write(json.dumps(rec) + "\n")
        where = "V1 on AIC" if rec.get("busy", {}).get("AIC:VECTOR_ALU") else "V1 on AIV"
        print(tiles, rec.get("sim_us"), rec.get("refused") or rec.get("errors") or where, flush=True)

    with ThreadPoolExecutor(max(args.jobs, 1)) as pool:
        list(pool.map(run, todo))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
