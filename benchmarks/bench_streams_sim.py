"""Streams in the generated kernel against PyPTO SIM (issue 11: a ``streams > 1`` row ranked above
``streams = 1`` of the same tiles, and SIM's verdict on it).

For one SPEC (default tests/fixtures/sk01/streams_h32_s256.yaml) and one tile set, renders the
kernel of ``head_group=1,streams=S`` for each S (``opdesign new --tiles`` machinery:
:func:`opdesign.workflows.pin.pinned_plan`), prints the row's rank and ``score_cycles`` from
``opdesign rank`` (``-`` for a stream count the ranking leaves out: more streams than units per core),
then compiles + simulates each kernel on the SPEC's typical shape
(:func:`opdesign.workflows.sim_rank.simulate`) and prints the SIM AICore time, the CPU seconds of the child
runs and the load average. Asserts nothing.

    PYTHONPATH=src python benchmarks/bench_streams_sim.py [--spec S] [--tiles T] [--streams 1,2,4]
        [--python /work/venv-pypto/bin/python]
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SPEC = ROOT / "tests" / "fixtures" / "sk01" / "streams_h32_s256.yaml"
TILES = "q_tile=128,kv_tile=256,qk_tile=128x128,pv_tile=128x256,vec_tile=16x256"


def main() -> int:
    from opdesign.render.design import render_kernel
    from opdesign.spec import load_spec
    from opdesign.workflows.pin import pinned_plan
    from opdesign.workflows.sim_rank import simulate

    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--spec", type=Path, default=SPEC)
    ap.add_argument("--tiles", default=TILES)
    ap.add_argument("--streams", default="1,2,4")
    ap.add_argument("--python", default=None, help="the framework's Python (default: this one)")
    ap.add_argument("--timeout", type=float, default=1200.0)
    args = ap.parse_args()
    spec = load_spec(args.spec)
    s = spec.shape
    shape = {"batch": s.batch, "num_heads": s.num_heads, "num_kv_heads": s.num_kv_heads, "seq_q": s.seq_q,
             "seq_kv": s.seq_kv, "head_dim": s.head_dim}
    print(f"{spec.op_name}: {args.tiles}; SIM shape {shape}")
    print("  streams  rank  score_cycles    sim_us  child_cpu_s  load_1min")
    for streams in (int(v) for v in args.streams.split(",")):
        plan = pinned_plan(spec, args.spec, tiles=f"{args.tiles},head_group=1,streams={streams}")
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        result = simulate(render_kernel(plan), shape, timeout=args.timeout, python=args.python)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
        sim = "-" if result["sim_us"] is None else f"{result['sim_us']:.2f}"
        rank, score = (("-" if plan.candidate[k] is None else plan.candidate[k]) for k in ("rank", "score_cycles"))
        print(f"  {streams:>7} {rank:>5} {score:>13} {sim:>9} "
              f"{cpu:>12.1f} {os.getloadavg()[0]:>10.2f}  {result['sim_error'] or ''}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
