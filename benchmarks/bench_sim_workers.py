"""Per-candidate overhead of SIM runs, warm workers vs today's fresh process (issue 32 deliver 5).

Renders the first N within-form candidates of a small SPEC (default tests/fixtures/sk01/simrank_tiny.yaml),
runs each through today's path (a fresh ``python -m opdesign.pypto_run.worker`` per candidate) and through
one warm worker (:class:`opdesign.tuning.pool.LocalPool`, jobs 1), and prints per candidate: the SIM time
both ways (they must agree), the wall time per candidate, the compile + SIM time inside the kernel call,
and the overhead (wall - compile + SIM). The warm pool's first job pays the worker's PyPTO import; it is
printed apart. Needs the pypto extra; run it under ``flock /tmp/pypto.lock``.

    python benchmarks/bench_sim_workers.py [--spec FILE] [-n 4] [--quick]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--spec", default=str(ROOT / "tests" / "fixtures" / "sk01" / "simrank_tiny.yaml"))
    ap.add_argument("-n", type=int, default=4)
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args(argv)
    from opdesign.render.design import render_kernel
    from opdesign.spec import load_spec
    from opdesign.tuning import rank_candidates
    from opdesign.tuning.pool import FreshPool, LocalPool
    from opdesign.workflows.new import plan_from_spec
    from opdesign.workflows.pin import pins_from_row, plan_for_pins

    spec = load_spec(args.spec)
    plan = plan_from_spec(spec, args.spec)
    jobs = []
    for row in rank_candidates(spec, plan, within_form=True).rows:
        if len(jobs) == args.n:
            break
        if row.head_group * row.streams > 1:
            continue
        kernel = render_kernel(plan_for_pins(spec, args.spec, plan, pins_from_row(row), validate=False))
        jobs.append({"kernel_text": kernel, "config": None, "quick": args.quick, "timeout": 900,
                     "label": f"rank {row.rank}"})
    t0 = time.perf_counter()
    fresh = FreshPool().map(jobs)
    fresh_total = time.perf_counter() - t0
    pool = LocalPool(1)
    t0 = time.perf_counter()
    warm = pool.map(jobs)
    warm_total = time.perf_counter() - t0
    pool.close()
    rows = []
    for job, f, w in zip(jobs, fresh, warm, strict=True):
        rows.append({"label": job["label"], "fresh_sim_us": f["sim_us"], "warm_sim_us": w["sim_us"],
                     "fresh_wall": f["wall"], "fresh_inside": f["seconds"],
                     "fresh_overhead": round(f["wall"] - (f["seconds"] or 0), 2),
                     "warm_wall": w["wall"], "warm_inside": w["seconds"],
                     "warm_overhead": round(w["wall"] - (w["seconds"] or 0), 2), "warm_pid": w["pid"],
                     "errors": [f["sim_error"], w["sim_error"]]})
    for r in rows:
        print(json.dumps(r))
    later = rows[1:] or rows
    mean = lambda k: sum(r[k] for r in later) / len(later)  # noqa: E731
    print(f"{len(jobs)} candidates of {Path(args.spec).name}{' --quick' if args.quick else ''}: "
          f"fresh total {fresh_total:.1f} s, warm total {warm_total:.1f} s (pool start + imports included)")
    print(f"per candidate after the first: fresh overhead {mean('fresh_overhead'):.2f} s on "
          f"{mean('fresh_inside'):.2f} s "
          f"compile + SIM ({100 * mean('fresh_overhead') / mean('fresh_inside'):.0f} %); warm overhead "
          f"{mean('warm_overhead'):.2f} s on {mean('warm_inside'):.2f} s "
          f"({100 * mean('warm_overhead') / mean('warm_inside'):.0f} %)")
    same = all(r["fresh_sim_us"] == r["warm_sim_us"] for r in rows)
    print(f"same SIM figures warm and fresh: {same}")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
