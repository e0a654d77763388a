"""Cost-model fidelity against PyPTO SIM: Spearman rho, Kendall tau and top-1 regret per SPEC (issue 11 item 4).

For each held-out SPEC (benchmarks/specs/fidelity_*.yaml, never used to fit CostParams) the
``opdesign rank --sim`` machinery (:func:`opdesign.workflows.sim_rank.sim_rank`) simulates the top K and K
evenly spaced candidates (K = 10: 20 candidates a SPEC) on the SPEC's typical shape and compares
``score_cycles`` with ``sim_us``. Per SPEC it prints the simulated rows, rho, tau, the SIM rank of
opdesign's top-1, its regret (how much slower it is than the fastest simulated candidate) and,
to say which stage the model gets wrong, the rank correlation of each stage's modelled time
(stage cycles x tasks on the busiest core) with the SIM times.

Needs the pypto extra (run with the framework's Python):

    PYTHONPATH=src /work/venv-pypto/bin/python benchmarks/bench_costmodel_fidelity.py [--k 10] [--json OUT]

Targets (issue 11): rho >= 0.8 and opdesign's top-1 within SIM's top 3. The figures printed are
whatever the run measures; this script asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
#: the required SPEC (the dense example scaled down) first, then the two of our choice
HELD_OUT = sorted((ROOT / "benchmarks" / "specs").glob("fidelity_*.yaml"),
                  key=lambda p: ("dense" not in p.name, p.name))
STAGES = ("C1", "V1", "C2", "V2", "sched")


def run_spec(path: Path, k: int, timeout: float, *, calibrated: bool = True, max_task_count: int = 0,
             split: int = 1) -> dict:
    """The ``rank --sim k`` report of one SPEC (progress on stderr).

    ``max_task_count`` > 0: rows with more KV steps in all (``task_count``) are not simulated (their
    SIM takes longer than the timeout; the report's ``skipped`` says how many ranked rows that leaves
    out). ``split`` > 1: the picks run in that many threads (each one SIM child at a time), merged into
    one report whose agreement is computed over all of them."""
    from concurrent.futures import ThreadPoolExecutor

    from opdesign.spec import load_spec
    from opdesign.tuning.model.calibration import load_params
    from opdesign.workflows.new import plan_from_spec, rank_spec
    from opdesign.workflows.sim_rank import agreement, sim_rank

    spec = load_spec(path)
    plan = plan_from_spec(spec, path)
    ranking = rank_spec(spec, plan, None, params=load_params(calibrated))
    allowed = [r.rank for r in ranking.rows if not max_task_count or r.task_count <= max_task_count]
    say = lambda m: print(f"  {spec.op_name}: {m}", file=sys.stderr, flush=True)  # noqa: E731
    only = None if len(allowed) == len(ranking.rows) else allowed
    if split <= 1:
        report = sim_rank(spec, path, plan, ranking, k, timeout=timeout, progress=say, only=only)
    else:
        parts = [allowed[i::split] for i in range(split)]  # sim_rank makes its own picks; each part keeps its share
        with ThreadPoolExecutor(max_workers=split) as pool:
            reports = list(pool.map(lambda part: sim_rank(spec, path, plan, ranking, k, timeout=timeout,
                                                          progress=say, only=part), parts))
        report = reports[0]
        by_rank = {r["rank"]: r for r in report["rows"]}
        for other in reports[1:]:
            for r in other["rows"]:
                if r["simulated"] or r["rank"] not in by_rank:
                    by_rank[r["rank"]] = r
        report["rows"] = [by_rank[rank] for rank in sorted(by_rank)]
        report["sim"]["picks"] = sorted(p for other in reports for p in other["sim"]["picks"])
        report["agreement"] = agreement([r for r in report["rows"] if r["simulated"]])
    report["skipped"] = {"max_task_count": max_task_count, "rows_over": len(ranking.rows) - len(allowed),
                         "legal": len(ranking.rows)}
    return report


def stage_agreement(report: dict) -> dict[str, float | None]:
    """Spearman rho of each stage's modelled time (cycles per task x tasks per core) with sim_us."""
    from opdesign.workflows.sim_rank import spearman

    done = [r for r in report["rows"] if r["simulated"] and r["sim_us"] is not None]
    sims = [r["sim_us"] for r in done]
    out = {}
    for stage in STAGES:
        x = [r["stages"][stage] * r["tasks_per_core"] for r in done]
        rho = spearman(x, sims)
        out[stage] = None if rho is None else round(rho, 3)
    return out


def print_report(report: dict, stages: dict) -> None:
    from opdesign.workflows.sim_rank import format_sim_text

    print(format_sim_text(report))
    bottlenecks = {}
    for r in report["rows"]:
        if r["simulated"]:
            bottlenecks[r["bottleneck"]] = bottlenecks.get(r["bottleneck"], 0) + 1
    print("per-stage rank correlation with SIM (stage cycles x tasks per core): "
          + ", ".join(f"{s} {v}" for s, v in stages.items()) + f"; model bottlenecks of the picks: {bottlenecks}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--k", type=int, default=10, help="top K plus K spread candidates per SPEC (default 10)")
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds per candidate compile + SIM")
    parser.add_argument("--spec", action="append", type=Path, help="SPEC (repeatable; default: the held-out set)")
    parser.add_argument("--uncalibrated", action="store_true", help="raw CostParams, not the committed calibration")
    parser.add_argument("--json", type=Path, help="also write every report here")
    parser.add_argument("--jobs", type=int, default=1, help="SPECs simulated at once (each runs one child at a time)")
    parser.add_argument("--split", type=int, default=1, help="threads per SPEC, each simulating a share of its picks")
    parser.add_argument("--max-task-count", type=int, default=0,
                        help="do not simulate rows with more KV steps in all than this (0: no limit)")
    args = parser.parse_args(argv)
    specs = args.spec or HELD_OUT
    summary, reports = [], {}

    def one(path: Path) -> tuple[dict, float]:
        start = time.perf_counter()
        return (run_spec(path, args.k, args.timeout, calibrated=not args.uncalibrated,
                         max_task_count=args.max_task_count, split=args.split), time.perf_counter() - start)

    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        done = list(pool.map(one, specs))
    if args.json:  # first: a report that fails to print must not lose the SIM times
        args.json.write_text(json.dumps({p.name: r for p, (r, _s) in zip(specs, done, strict=True)}, indent=1))
    for path, (report, seconds) in zip(specs, done, strict=True):
        stages = stage_agreement(report)
        print(f"\n== {path.name} ({seconds:.0f} s)")
        print_report(report, stages)
        skipped = report["skipped"]
        if skipped["max_task_count"]:
            print(f"not simulated: rows with task_count > {skipped['max_task_count']} (SIM too slow for the timeout): "
                  f"{skipped['rows_over']} of {skipped['legal']} legal rows; a spread pick on one of them is dropped")
        a = report["agreement"]
        summary.append((report["op_name"], a["n"], a["spearman"], a["kendall"], a["top1_sim_rank"],
                        a["top1_regret_pct"]))
        reports[path.name] = {**report, "stage_agreement": stages}
    print("\nSPEC                          n   spearman  kendall  top1_sim_rank  top1_regret_%")
    for name, n, rho, tau, top1, regret in summary:
        print(f"{name:<28} {n:>3} {rho if rho is not None else 'n/a':>10} {tau if tau is not None else 'n/a':>8} "
              f"{top1 if top1 is not None else 'n/a':>14} {regret if regret is not None else 'n/a':>14}")
    if args.json:
        args.json.write_text(json.dumps(reports, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
