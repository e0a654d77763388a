"""Dev check of the SK-02 / SK-16 real-kernel templates (templates/sk02|sk16/kernel.py.j2).

For each SPEC (a path, or a built-in variant name): plan it with this tree's opdesign, render
``<op>_kernel.py`` with ``opdesign.render._env()``, ``py_compile`` it, and run every config (quick
shape) through PyPTO's runner (``run_isolated``, verify mode: compile + pass verification + SIM).
With ``--mutants`` also run the mutants of the skeleton (one text substitution each on the rendered
kernel) and check that each one verifies FAILED.

Usage (python with pypto 0.2.0 + torch 2.8.0)::

    PYTHONPATH=src /work/venv-pypto/bin/python scripts/dev_kernel_k2.py [SPEC_OR_VARIANT ...] [--mutants]
        [--full] [--json FILE] [--out DIR]

Variants (temporary SPECs derived from the examples): sk02_bnsd, sk02_topk256_gqa, sk16_causal,
sk16_bsnd, sk16_fp16, sk16_mha. No argument: both examples and every variant.

The runner is loaded from /work/main/src/opdesign/pypto_run as a standalone package (its modules
import only each other), so this tree's ``opdesign`` package name stays free; its child process
runs with PYTHONPATH=/work/main/src (the runner does not need the rest of opdesign).
"""

import argparse
import importlib.util
import json
import py_compile
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from opdesign.pipeline import plan_from_spec_file  # noqa: E402
from opdesign.render import _env, skeleton_dir  # noqa: E402

RUNNER_PKG = Path("/work/main/src/opdesign/pypto_run")
PYTHON = "/work/venv-pypto/bin/python"
EXAMPLES = ROOT / "examples" / "specs"
SK02 = EXAMPLES / "sparse_topk_2048.yaml"
SK16 = EXAMPLES / "sk16_backward_lm.yaml"

# variant name -> (base SPEC, changes to the SPEC: top-level keys and "shape" keys, typical configs replaced)
VARIANTS = {
    "sk02_bnsd": (SK02, {"op_name": "sk02_bnsd", "layout": "BNSD"}),
    "sk02_topk256_gqa": (SK02, {"op_name": "sk02_topk256_gqa",
                                "shape": {"batch": 2, "num_heads": 8, "num_kv_heads": 2, "seq_q": 3, "seq_kv": 600,
                                          "head_dim": 128, "topk": 256},
                                "dynamic_axes": [{"name": "batch", "range": [1, 64], "uniform": True},
                                                 {"name": "seq_kv", "range": [1, 600], "uniform": False}],
                                "typical_configs": [
                                    {"name": "func_gqa_topk256", "type": "functional", "priority": "P0",
                                     "note": "GQA 4, kv lengths below topk in batch 0"},
                                    {"name": "func_short", "type": "functional", "priority": "P1", "seed": 3,
                                     "shape": {"seq_kv": 200}, "note": "every token sees < topk"}]}),
    "sk16_causal": (SK16, {"op_name": "sk16_causal", "mask": "causal"}),
    "sk16_bsnd": (SK16, {"op_name": "sk16_bsnd", "layout": "BSND"}),
    "sk16_fp16": (SK16, {"op_name": "sk16_fp16", "dtype": "fp16"}),
    "sk16_mha": (SK16, {"op_name": "sk16_mha", "shape": {"num_heads": 4, "num_kv_heads": 4},
                        "typical_configs": [
                            {"name": "func_mha_tail", "type": "functional", "priority": "P0"},
                            {"name": "func_mha_q129", "type": "functional", "priority": "P1", "seed": 3,
                             "shape": {"seq_q": 129, "seq_kv": 70}}]}),
}

# skeleton -> [(label, old, new)]: each mutant must verify FAILED
MUTANTS = {
    "SK-02": [
        ("gather ignores the indices (first TOPK rows)",
         "k_sel = pypto.index_select(k_b, 0, idx)  # [TOPK, HEAD_DIM]\n"
         "                    v_sel = pypto.index_select(v_b, 0, idx)",
         "k_sel = pypto.view(k_b, [TOPK, HEAD_DIM], [0, 0])\n"
         "                    v_sel = pypto.view(v_b, [TOPK, HEAD_DIM], [0, 0])"),
        ("cur_seq == 0 rows not skipped",
         "cur_seq = (kv_len - seq_q + 1 + s_idx).max(0).min(TOPK)\n            if cur_seq > 0:",
         "cur_seq = (kv_len - seq_q + 1 + s_idx).max(1).min(TOPK)\n            if cur_seq > 0:"),
    ],
    "SK-16": [
        ("wrong KV-head mapping (every query head on KV head 0)", "kv_h = h_idx // GROUP", "kv_h = h_idx // NUM_HEADS"),
        ("dK without the scale", "dk_out = pypto.mul(dk_fin, SCALE)", "dk_out = dk_fin"),
        ("dQ accumulated in the input dtype",
         "dq_acc[:] = pypto.add(dq_old, dq_blk)", "dq_acc[:] = pypto.cast(pypto.cast(pypto.add(dq_old, dq_blk), "
                                                  "IN_DTYPE), pypto.DT_FP32)"),
    ],
}


def load_runner():
    """Import /work/main/src/opdesign/pypto_run as the standalone package ``pypto_run``."""
    spec = importlib.util.spec_from_file_location("pypto_run", RUNNER_PKG / "__init__.py",
                                                  submodule_search_locations=[str(RUNNER_PKG)])
    module = importlib.util.module_from_spec(spec)
    sys.modules["pypto_run"] = module
    spec.loader.exec_module(module)
    from pypto_run.runner import run_isolated  # type: ignore[import-not-found]
    return run_isolated


def variant_spec(name: str, tmp: Path) -> Path:
    base, changes = VARIANTS[name]
    data = yaml.safe_load(base.read_text())
    for key, value in changes.items():
        if key == "shape":
            data["shape"].update(value)
        else:
            data[key] = value
    path = tmp / f"{name}.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def render_kernel(spec_path: Path, out_dir: Path):
    plan = plan_from_spec_file(spec_path)
    text = _env().get_template(f"{skeleton_dir(plan)}/kernel.py.j2").render(plan=plan)
    path = out_dir / f"{plan.op_name}_kernel.py"
    path.write_text(text)
    py_compile.compile(str(path), doraise=True)
    return plan, path, text


def kernel_consts(path: Path):
    """KERNEL_FUNCTION, TOLERANCE, CONFIGS read back with ast.literal_eval (as selfcheck does)."""
    import ast

    out = {}
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            name = node.targets[0].id
            if name in ("KERNEL_FUNCTION", "TOLERANCE", "CONFIGS"):
                out[name] = ast.literal_eval(node.value)
    return out


def run_config(run_isolated, path: Path, consts: dict, config: str, work: Path, quick: bool) -> dict:
    start = time.perf_counter()
    res = run_isolated(path, consts["KERNEL_FUNCTION"], f"{path}:make_case", mode="verify",
                       tol=tuple(consts["TOLERANCE"]), work_dir=work,
                       case_args={"config": config, "quick": quick}, python=PYTHON)
    out = res.to_dict()
    if out["sim_us"] is None and out.get("output_dir"):
        swimlane_figure(out)
    out["wall_s"] = round(time.perf_counter() - start, 2)
    return out


def swimlane_figure(out: dict) -> None:
    """The SIM skips its swim-lane step (the only place 'AICore End-to-End Time' is printed) when the run has more
    than drawPngThresholdCycle = 500000 cycles; run PyPTO's own draw_swim_lane.py on the SIM output for the figure."""
    import re
    import subprocess

    odir = Path(out["output_dir"])
    swim = odir / "CostModelSimulationOutput" / "_simulate.swim.json"
    script = Path(PYTHON).parents[1] / "lib/python3.11/site-packages/pypto/lib/scripts/draw_swim_lane.py"
    if not swim.exists() or not script.exists():
        return
    proc = subprocess.run([PYTHON, str(script), str(swim.relative_to(odir)), "tmp_topo_json.json", "program.json",
                           "--label_type=1", "--time_convert_denominator=1800"],  # cycles -> us (1.8 GHz), as PyPTO calls it
                          cwd=odir, capture_output=True, text=True, timeout=600)
    e2e = re.findall(r"AICore End-to-End Time:\s*([-+0-9.eE]+)", proc.stdout)
    util = re.findall(r"AICore Utilization:\s*([-+0-9.eE]+)%", proc.stdout)
    if e2e:
        out["sim_us"] = float(e2e[-1])
        out["utilization"] = float(util[-1]) if util else None
        out["sim_us_from"] = "draw_swim_lane.py rerun (SIM skipped it above 500000 cycles)"
        out["errors"] = [e for e in out["errors"] if not (e["stage"] == "sim" and "End-to-End" in e["message"])]


def outcome(res: dict) -> str:
    if res["errors"]:
        return f"error:{res['errors'][0]['stage']}"
    return res["verify"]["status"]


def show(label: str, res: dict) -> None:
    v = res["verify"]
    print(f"  {label:34s} compiled={res['compiled']} sim_us={res['sim_us']}{'*' if res.get('sim_us_from') else ''} util={res['utilization']} "
          f"verify={v['status']} max_abs={v['max_abs_diff']} max_rel={v['max_rel_diff']} "
          f"call_s={res['seconds']} wall_s={res['wall_s']}", flush=True)
    for err in res["errors"]:
        print(f"      {err['stage']} line {err['kernel_line']}: {err['message'][:400]!r}")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("specs", nargs="*")
    parser.add_argument("--mutants", action="store_true")
    parser.add_argument("--full", action="store_true", help="run the typical shapes instead of the quick ones")
    parser.add_argument("--only", help="run only this config name")
    parser.add_argument("--first", action="store_true", help="run only the first config of each SPEC")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--out", type=Path, help="keep the rendered kernels here")
    args = parser.parse_args()
    run_isolated = load_runner()
    tmp = Path(tempfile.mkdtemp(prefix="opdesign-k2-"))
    out_dir = args.out or tmp
    out_dir.mkdir(parents=True, exist_ok=True)
    names = args.specs or [str(SK02), str(SK16), *VARIANTS]
    report, bad = [], 0
    for name in names:
        spec = variant_spec(name, tmp) if name in VARIANTS else Path(name)
        plan, path, text = render_kernel(spec, out_dir)
        consts = kernel_consts(path)
        print(f"{name}: {path} ({plan.skeleton.id}, {plan.layout}, {plan.dtype}, mask {plan.mask}, "
              f"q_tile {plan.q_tile}, kv_tile {plan.kv_tile}, passes in plan {plan.passes})", flush=True)
        configs = [c for c in consts["CONFIGS"] if not args.only or c["name"] == args.only]
        if args.first:
            configs = configs[:1]
        for cfg in configs:
            res = run_config(run_isolated, path, consts, cfg["name"], tmp / f"{plan.op_name}_{cfg['name']}",
                             not args.full)
            show(f"{cfg['name']} ({'full' if args.full else 'quick'})", res)
            bad += outcome(res) != "PASS"
            report.append({"spec": name, "config": cfg["name"], "mutant": None, "outcome": outcome(res),
                           **{k: res[k] for k in ("compiled", "sim_us", "utilization", "verify", "errors",
                                                  "seconds", "wall_s")}})
        if not args.mutants:
            continue
        cfg = configs[0]
        for i, (label, old, new) in enumerate(MUTANTS[plan.skeleton.id]):
            if text.count(old) != 1:
                print(f"  [BAD] mutant {label!r}: old string found {text.count(old)} times")
                bad += 1
                continue
            mdir = tmp / f"{plan.op_name}_m{i}"
            mdir.mkdir(parents=True, exist_ok=True)
            mpath = mdir / path.name
            mpath.write_text(text.replace(old, new))
            res = run_config(run_isolated, mpath, consts, cfg["name"], mdir, not args.full)
            got = outcome(res)
            ok = got == "FAILED"
            bad += not ok
            print(f"  [{'OK ' if ok else 'BAD'}] mutant {label!r}: {got} max_abs={res['verify']['max_abs_diff']}",
                  flush=True)
            for err in res["errors"]:
                print(f"      {err['stage']} line {err['kernel_line']}: {err['message'][:300]!r}")
            report.append({"spec": name, "config": cfg["name"], "mutant": label, "old": old, "new": new,
                           "outcome": got, "verify": res["verify"], "errors": res["errors"]})
    if args.json:
        args.json.write_text(json.dumps(report, indent=1, default=str))
    print(f"work dirs under {tmp}; {bad} unexpected outcome(s)")
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
