"""Speed of the cost-model ranking: candidates ranked per second, and `opdesign rank` per example.

For every SPEC in examples/specs/: the in-process time of
`rank_candidates(spec, plan)` (enumerate, check the rules, score and sort every
candidate; best of `--repeat` warm runs, plus the first cold run), the rate in
candidates per second, and the wall time of `opdesign rank --spec S` in a fresh
interpreter (interpreter start-up included). SPECs not planned with SK-01 are
listed as not ranked. The last line checks the target: 10,000 candidates in
under 1 s, extrapolated from the largest example.

    python benchmarks/bench_rank.py [--repeat 3] [--json]

Exits 1 when the target is missed.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from opdesign.errors import SpecError
from opdesign.skeletons.registry import estimate, skeleton_of
from opdesign.spec import load_spec
from opdesign.tuning import rank_candidates

REPO = Path(__file__).resolve().parents[1]
TARGET_CANDIDATES, TARGET_SECONDS = 10_000, 1.0


def _timed(fn) -> tuple[float, object]:
    start = time.perf_counter()
    result = fn()
    return time.perf_counter() - start, result


def _cpu_timed(fn) -> float:
    """CPU seconds of ``fn()`` in this process (what a busy machine does not inflate much)."""
    start = time.process_time()
    fn()
    return time.process_time() - start


def bench(spec_path: Path, repeat: int) -> dict:
    spec = load_spec(spec_path)
    plan = estimate(spec)
    if not skeleton_of(plan).ranked:  # what `opdesign rank` refuses (rank_spec)
        return {"spec": spec_path.name, "ranked": False, "reason": f"planned with {plan.skeleton.id}, not ranked"}
    try:
        cold, ranking = _timed(lambda: rank_candidates(spec, plan, top=20))
    except SpecError as err:
        return {"spec": spec_path.name, "ranked": False, "reason": err.message}
    warm = min(_timed(lambda: rank_candidates(spec, plan, top=20))[0] for _ in range(repeat))
    warm_cpu = min(_cpu_timed(lambda: rank_candidates(spec, plan, top=20)) for _ in range(repeat))
    cli, proc = _timed(lambda: subprocess.run([sys.executable, "-m", "opdesign", "rank", "--spec", str(spec_path)],
                                              capture_output=True, text=True, check=False))
    return {"spec": spec_path.name, "ranked": True, "candidates": ranking.enumerated, "legal": ranking.legal,
            "cold_s": round(cold, 4), "warm_s": round(warm, 4),
            "candidates_per_s": round(ranking.enumerated / warm), "warm_cpu_s": round(warm_cpu, 4),
            "candidates_per_cpu_s": round(ranking.enumerated / warm_cpu), "cli_s": round(cli, 3),
            "cli_exit": proc.returncode,
            "chosen_rank": ranking.chosen_rank}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--spec", action="append", default=[], type=Path, help="rank this SPEC too (repeatable)")
    args = parser.parse_args()
    results = [bench(p, args.repeat) for p in [*sorted((REPO / "examples" / "specs").glob("*.yaml")), *args.spec]]
    ranked = [r for r in results if r["ranked"]]
    largest = max(ranked, key=lambda r: r["candidates"])
    per_target = TARGET_CANDIDATES / largest["candidates_per_s"]
    ok = per_target < TARGET_SECONDS and all(r["cli_exit"] == 0 for r in ranked)
    if args.json:
        print(json.dumps({"results": results, "seconds_per_10k": round(per_target, 4), "ok": ok}, indent=2))
        return 0 if ok else 1
    print(f"load average (1 min): {os.getloadavg()[0]:.2f}")
    print(f"{'spec':<26}{'candidates':>11}{'legal':>7}{'cold s':>9}{'warm s':>9}{'cand/s':>10}{'cand/cpu s':>11}"
          f"{'cli s':>8}  plan rank")
    for r in results:
        if not r["ranked"]:
            print(f"{r['spec']:<26}  not ranked: {r['reason']}")
            continue
        print(f"{r['spec']:<26}{r['candidates']:>11}{r['legal']:>7}{r['cold_s']:>9.3f}{r['warm_s']:>9.3f}"
              f"{r['candidates_per_s']:>10}{r['candidates_per_cpu_s']:>11}{r['cli_s']:>8.2f}  {r['chosen_rank']}")
    print(f"{TARGET_CANDIDATES} candidates at the rate of {largest['spec']} ({largest['candidates_per_s']}/s): "
          f"{per_target:.3f} s (target < {TARGET_SECONDS} s): {'ok' if ok else 'MISSED'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
