"""Draw SPECs with Hypothesis from the space `opdesign new` accepts, then `new` + `verify` each one.

    python benchmarks/verify_generated_specs.py [--n 20] [--seed 0] [--quick] [--no-verify]

Needs the `opdesign[pypto]` extra. Prints one line per SPEC (its variant, then compiled / sim_us /
verify per config) and a summary; exits 1 when any SPEC fails to plan, compile, simulate or verify.
SPECs the planner refuses (exit 2 with the field named) are counted apart: they are not drawn on
purpose, but the strategy does not know every planning limit.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st


@st.composite
def specs(draw) -> dict:
    """A forward or backward attention SPEC with small typical configs (seconds in PyPTO's SIM)."""
    direction = draw(st.sampled_from(["forward", "forward", "backward"]))
    kv_heads = draw(st.sampled_from([1, 2]))
    heads = kv_heads * draw(st.sampled_from([1, 2, 4]))
    dtype = draw(st.sampled_from(["bf16", "fp16"]))
    head_dim = draw(st.sampled_from([64, 128]))
    mask = draw(st.sampled_from(["none", "causal"] + (["sliding_window"] if direction == "forward" else [])))
    paged = direction == "forward" and mask == "none" and draw(st.booleans())
    seq_q = 1 if paged else draw(st.integers(17, 300))
    seq_kv = draw(st.integers(17, 400))
    shape = {"batch": draw(st.integers(1, 2)), "num_heads": heads, "num_kv_heads": kv_heads,
             "seq_q": seq_q, "seq_kv": seq_kv, "head_dim": head_dim}
    if paged:
        shape["block_size"] = draw(st.sampled_from([64, 128]))
    if mask == "sliding_window":
        shape["window"] = draw(st.integers(8, 128))
    spec = {
        "schema_version": 1, "op_name": "gen_op", "kind": "attention", "direction": direction,
        "device": draw(st.sampled_from(["a2", "a3"])), "dtype": dtype,
        "layout": draw(st.sampled_from(["BSND", "BNSD"])), "shape": shape,
        "dynamic_axes": [{"name": "seq_kv", "range": [1, 4096], "uniform": True},
                         {"name": "seq_q", "range": [1, 4096], "uniform": True}],
        "mask": mask, "kv_cache": "paged" if paged else "contiguous", "quant": "none",
        "typical_configs": [{"name": "func_p0", "type": "functional", "priority": "P0"}],
    }
    if direction == "backward":
        spec["softmax_stats_input"] = True
    return spec


def draw_specs(n: int, seed_value: int) -> list[dict]:
    out: list[dict] = []

    @seed(seed_value)
    @settings(max_examples=n, database=None, deadline=None, suppress_health_check=list(HealthCheck))
    @given(specs())
    def collect(spec: dict) -> None:
        out.append(spec)

    collect()
    return out[:n]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--no-verify", action="store_true")
    args = parser.parse_args()
    failures = refused = 0
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="opdesign-gen-") as tmp:
        for i, spec in enumerate(draw_specs(args.n, args.seed)):
            spec["op_name"] = f"gen_op_{i}"
            path = Path(tmp) / f"{spec['op_name']}.yaml"
            path.write_text(yaml.safe_dump(spec, sort_keys=False))
            out = Path(tmp) / spec["op_name"]
            new = subprocess.run([sys.executable, "-m", "opdesign", "new", "--spec", str(path), "--out", str(out)],
                                 capture_output=True, text=True)
            what = (f"{spec['direction']} {spec['mask']} {spec['kv_cache']} {spec['layout']} {spec['dtype']} "
                    f"h{spec['shape']['num_heads']}/{spec['shape']['num_kv_heads']} d{spec['shape']['head_dim']} "
                    f"sq{spec['shape']['seq_q']} skv{spec['shape']['seq_kv']}")
            if new.returncode != 0:
                refused += new.returncode == 2
                failures += new.returncode != 2
                print(f"[{i}] {what}: new exit {new.returncode}: {new.stderr.strip()[:200]}")
                continue
            cmd = [sys.executable, "-m", "opdesign", "verify", str(out), "--json"]
            cmd += ["--quick"] if args.quick else []
            cmd += ["--no-verify"] if args.no_verify else []
            res = subprocess.run(cmd, capture_output=True, text=True)
            try:
                report = json.loads(res.stdout)
                rows = ", ".join(f"{c['name']}: compiled={c['compiled']} sim_us={c['sim_us']} "
                                 f"verify={c['verify']['status']} max_abs={c['verify']['max_abs_diff']}"
                                 for c in report["configs"])
            except (ValueError, KeyError):
                rows = res.stderr.strip()[-300:]
            failures += res.returncode != 0
            print(f"[{i}] {what}: verify exit {res.returncode}: {rows}", flush=True)
    print(f"{args.n} SPECs: {failures} failed, {refused} refused by the planner, "
          f"{time.perf_counter() - start:.0f} s")
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
