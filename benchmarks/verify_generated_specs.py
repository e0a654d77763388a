"""Draw SPECs with Hypothesis from the space `opdesign new` accepts, then `new` + `verify` each one.

    python benchmarks/verify_generated_specs.py [--n 20] [--seed 0] [--quick] [--no-verify] [--keep DIR]

Needs the `opdesign[pypto]` extra. The SPECs are drawn per variant (SK-01 dense, causal GQA, sliding
window, tensor mask, varlen, paged decode; SK-02 top-k; SK-16 backward) so that every variant gets
its share: Hypothesis draws a pool of SPECs (fixed seed, no database), the pool is split by variant,
and the SPECs are taken round-robin over the variants (duplicates dropped). Same --n/--seed -> same
SPECs. Prints one Markdown table row per config (SPEC, variant, config, compiled, sim_us, verify,
max abs diff, seconds) and a summary; exits 1 when any SPEC fails to plan, compile, simulate or
verify. A SPEC that `new` refuses with exit 2 is counted apart (the refusal names the field).
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml
from hypothesis import HealthCheck, Phase, given, seed, settings
from hypothesis import strategies as st

VARIANTS = ("sk01_dense", "sk01_causal_gqa", "sk01_sliding_window", "sk01_tensor_mask", "sk01_varlen",
            "sk01_paged_decode", "sk01_perf_form", "sk02_topk", "sk16_backward")
POOL = 400  # Hypothesis examples drawn before the round-robin pick


def _axes(varlen_kv: bool, static_seq: bool) -> list[dict]:
    if static_seq:  # compile-time lengths (performance form condition 1): only the batch varies
        return [{"name": "batch", "range": [1, 4], "uniform": True}]
    return [{"name": "seq_kv", "range": [1, 4096], "uniform": not varlen_kv},
            {"name": "seq_q", "range": [1, 4096], "uniform": True}]


@st.composite
def spec_of(draw, variant: str) -> dict:
    """One SPEC of ``variant`` with small typical configs (seconds each in PyPTO's SIM)."""
    perf = variant == "sk01_perf_form"
    kv_heads = draw(st.sampled_from([4, 8] if perf else [1, 2]))  # perf: root_count = batch * heads * 2 >= 16
    group = draw(st.sampled_from([2, 4] if variant == "sk01_causal_gqa" else [1, 2, 4]))
    dtype = draw(st.sampled_from(["bf16", "fp16"]))
    head_dim = draw(st.sampled_from([64, 128]))
    backward = variant == "sk16_backward"
    mask = {"sk01_dense": "none", "sk01_causal_gqa": "causal", "sk01_sliding_window": "sliding_window",
            "sk01_tensor_mask": "tensor", "sk01_paged_decode": "none", "sk02_topk": "topk"}.get(variant)
    if mask is None:  # varlen, performance form and backward: with or without the causal mask
        mask = draw(st.sampled_from(["none", "causal"]))
    paged = variant == "sk01_paged_decode"
    decode = paged or variant == "sk02_topk"
    seq_q = draw(st.integers(1, 4)) if decode else draw(st.integers(64 if perf else 17, 300))
    seq_kv = draw(st.integers(64 if perf else 17, 600 if decode else 400))
    shape = {"batch": draw(st.integers(1, 2)), "num_heads": kv_heads * group, "num_kv_heads": kv_heads,
             "seq_q": seq_q, "seq_kv": seq_kv, "head_dim": head_dim}
    if paged:
        shape["block_size"] = draw(st.sampled_from([64, 128]))
    if mask == "sliding_window":
        shape["window"] = draw(st.integers(8, 128))
    if mask == "topk":
        shape["topk"] = draw(st.sampled_from([16, 32, 64, 128]))
    varlen_kv = paged or variant == "sk01_varlen" or (variant == "sk02_topk" and draw(st.booleans()))
    configs = [{"name": "func_p0", "type": "functional", "priority": "P0"}]
    if perf:  # a performance config at the SPEC's shape (its lengths are compile-time constants)
        configs.insert(0, {"name": "perf_p0", "type": "performance", "priority": "P0"})
    elif draw(st.booleans()):  # a second config with other lengths
        other = {"seq_kv": draw(st.integers(17, 600 if decode else 400))}
        if not decode:
            other["seq_q"] = draw(st.integers(17, 300))
        configs.append({"name": "func_p1", "type": "functional", "priority": "P1", "shape": other, "seed": 3})
    spec = {
        "schema_version": 1, "op_name": "gen_op", "kind": "attention",
        "direction": "backward" if backward else "forward",
        "device": draw(st.sampled_from(["a2", "a3"])), "dtype": dtype,
        "layout": draw(st.sampled_from(["BSND", "BNSD"])), "shape": shape,
        "dynamic_axes": _axes(varlen_kv, perf), "mask": mask, "kv_cache": "paged" if paged else "contiguous",
        "quant": "none", "typical_configs": configs,
    }
    if perf:  # condition 4: a target more than perf_ratio_min (5) x from the baseline
        spec["performance"] = {"baseline_us": 100, "current_us": draw(st.integers(600, 5000))}
    if backward:  # SK-16-WHEN-2: SK-16 reads the forward l and m
        spec["softmax_stats_input"] = True
    return spec


def draw_specs(n: int, seed_value: int) -> list[tuple[str, dict]]:
    """``n`` (variant, SPEC) pairs, round-robin over :data:`VARIANTS`; deterministic in ``seed_value``."""
    pool: dict[str, list[dict]] = {v: [] for v in VARIANTS}
    seen: set[str] = set()

    @seed(seed_value)
    @settings(max_examples=POOL, database=None, deadline=None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck))
    @given(st.sampled_from(VARIANTS).flatmap(lambda v: st.tuples(st.just(v), spec_of(v))))
    def collect(pair: tuple[str, dict]) -> None:
        key = json.dumps(pair[1], sort_keys=True)
        if key not in seen:
            seen.add(key)
            pool[pair[0]].append(pair[1])

    collect()
    rng = random.Random(seed_value)
    for specs in pool.values():
        rng.shuffle(specs)
    out: list[tuple[str, dict]] = []
    while len(out) < n and any(pool.values()):
        for variant in VARIANTS:
            if pool[variant] and len(out) < n:
                out.append((variant, pool[variant].pop()))
    return out


def describe(spec: dict) -> str:
    s = spec["shape"]
    extra = "".join(f" {k}{s[k]}" for k in ("window", "topk", "block_size") if k in s)
    return (f"{spec['mask']} {spec['layout']} {spec['dtype']} {spec['device']} b{s['batch']} "
            f"h{s['num_heads']}/{s['num_kv_heads']} d{s['head_dim']} sq{s['seq_q']} skv{s['seq_kv']}{extra}"
            + (" varlen" if any(not a["uniform"] for a in spec["dynamic_axes"]) else "")
            + (" perf-target" if "performance" in spec else ""))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--no-verify", action="store_true")
    parser.add_argument("--only", type=int, nargs="*", help="run only these SPEC indices")
    parser.add_argument("--keep", type=Path, help="write the SPECs and design folders here (default: a temp dir)")
    args = parser.parse_args()
    failures = refused = 0
    start = time.perf_counter()
    print("| SPEC | drawn as: skeleton, variant | config | compiled | sim_us | verify | max abs diff | s |")
    print("|---|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory(prefix="opdesign-gen-") as tmp:
        root = args.keep or Path(tmp)
        root.mkdir(parents=True, exist_ok=True)
        for i, (variant, spec) in enumerate(draw_specs(args.n, args.seed)):
            if args.only is not None and i not in args.only:
                continue
            spec["op_name"] = f"gen_op_{i}"
            path = root / f"{spec['op_name']}.yaml"
            path.write_text(yaml.safe_dump(spec, sort_keys=False))
            out = root / spec["op_name"]
            label = f"[{i}] {describe(spec)}"
            new = subprocess.run([sys.executable, "-m", "opdesign", "new", "--spec", str(path), "--out", str(out),
                                  "--force"], capture_output=True, text=True)
            if new.returncode != 0:
                refused += new.returncode == 2
                failures += new.returncode != 2
                print(f"| {label} | {variant} | - | new exit {new.returncode}: {new.stderr.strip()[:200]} |||||")
                continue
            kernel = (out / f"{spec['op_name']}_kernel.py").read_text(encoding="utf-8")
            # the plan's skeleton and variant, from the kernel's first docstring line
            variant += ": " + kernel.splitlines()[0].split(": ", 1)[1].removesuffix(".").replace(
                "Online flash attention, ", "").replace("Single-pass attention, ", "").replace(
                "Single-pass attention backward, ", "")
            if "compile-time sequence lengths (performance form" in kernel:
                variant += ", performance form"
            cmd = [sys.executable, "-m", "opdesign", "verify", str(out), "--json"]
            cmd += ["--quick"] if args.quick else []
            cmd += ["--no-verify"] if args.no_verify else []
            t0 = time.perf_counter()
            res = subprocess.run(cmd, capture_output=True, text=True)
            failures += res.returncode != 0
            try:
                report = json.loads(res.stdout)
                for c in report["configs"]:
                    print(f"| {label} | {variant} | {c['name']} | {c['compiled']} | {c['sim_us']} | "
                          f"{c['verify']['status']} | {c['verify']['max_abs_diff']} | {c['seconds']} |")
                for e in report["errors"]:
                    print(f"|   error | {e['config']} | {e['stage']} | {e['message'][:300]} |||||")
            except (ValueError, KeyError):
                print(f"| {label} | {variant} | - | verify exit {res.returncode}: {res.stderr.strip()[-300:]} |||||")
            print(f"|   total | exit {res.returncode} | {time.perf_counter() - t0:.0f} s |||||", flush=True)
    print(f"{len(draw_specs(args.n, args.seed)) if args.only is None else len(args.only)} SPECs: {failures} failed, "
          f"{refused} refused by the planner, {time.perf_counter() - start:.0f} s")
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
