"""Dev check of the SK-01 real-kernel template: plan a SPEC, render the kernel, run every config.

Usage (a python with pypto 0.2.0 + torch 2.8.0 and opdesign's deps)::

    PYTHONPATH=<worktree>/src /work/venv-pypto/bin/python scripts/dev_kernel.py SPEC.yaml [SPEC ...]
        [--full] [--config NAME] [--mode verify|sim] [--mutants] [--out DIR]

For each SPEC: ``opdesign.pipeline.plan_from_spec_file``, render
``templates/sk01/kernel.py.j2`` with ``opdesign.render._env()``, write
``<op>_kernel.py`` under ``--out`` (default: a temp dir), ``py_compile`` it, check
every ``pypto.<name>`` against ``constraints/pypto_api.yaml``, then run each
config of its ``CONFIGS`` (the ``quick`` shape unless ``--full``) through
``opdesign.pypto_run.runner.run_isolated`` (one child process per config) and
print compiled, sim_us, utilization, verify status, max abs/rel diff, errors.
``--mutants`` also runs the mutation proof (text substitutions of the rendered
kernel that must give verify FAILED).

``opdesign.pypto_run`` is not in this worktree: it is imported from
``$OPDESIGN_PYPTO_RUN_SRC`` (default /work/main/src) by extending the
``opdesign`` package path after this worktree's own ``opdesign``.
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import py_compile
import re
import sys
import tempfile
import time
from pathlib import Path

import yaml

import opdesign
from opdesign.pipeline import plan_from_spec_file
from opdesign.render.design import render_kernel as _render_kernel

RUN_SRC = Path(os.environ.get("OPDESIGN_PYPTO_RUN_SRC", "/work/main/src"))
if not (Path(opdesign.__file__).parent / "pypto_run").is_dir():
    opdesign.__path__.append(str(RUN_SRC / "opdesign"))  # a worktree without pypto_run takes it from there
from opdesign.pypto_run.runner import run_isolated  # noqa: E402

PYTHON = os.environ.get("OPDESIGN_PYPTO_PYTHON", sys.executable)
API = next(p for p in (Path(opdesign.__file__).resolve().parents[2] / "constraints" / "pypto_api.yaml",
                       RUN_SRC.parent / "constraints" / "pypto_api.yaml") if p.exists())

# mutation proof on a causal plan: (label, old, new); each must give verify FAILED
MUTANTS = [
    ("dropped rescale of o",
     "o_run[:] = pypto.add(pypto.mul(o_old, alpha), pypto.mul(o_blk, beta))",
     "o_run[:] = pypto.add(o_old, pypto.mul(o_blk, beta))"),
    ("wrong causal offset (diagonal shifted by one)",
     "d = (q_off + diag - kv_off).max(-Q_TILE).min(KV_TILE - 1)",
     "d = (q_off + diag - kv_off + 1).max(-Q_TILE).min(KV_TILE - 1)"),
    ("wrong KV-head mapping (h % kv_heads)",
     "kv_h = h // GROUP",
     "kv_h = h % num_kv_heads"),
]


def render_kernel(spec: Path) -> tuple[str, str]:
    """(op_name, kernel source) of one SPEC."""
    plan = plan_from_spec_file(spec)
    if plan.skeleton.id != "SK-01":
        raise SystemExit(f"{spec}: plans to {plan.skeleton.id}, not SK-01")
    return plan.op_name, _render_kernel(plan)


def api_names() -> dict[str, set[str]]:
    """Module -> public names of the installed release's manifest."""
    data = yaml.safe_load(API.read_text())
    return {mod: set(names) for mod, names in data["modules"].items()}


def check_api(source: str) -> list[str]:
    """``pypto.<...>`` names of the kernel that the manifest does not list."""
    names = api_names()
    bad = []
    for dotted in sorted(set(re.findall(r"\bpypto(?:\.[A-Za-z_][A-Za-z0-9_]*)+", source))):
        parts = dotted.split(".")
        mod, i = "pypto", 1
        while i < len(parts) and f"{mod}.{parts[i]}" in names:
            mod, i = f"{mod}.{parts[i]}", i + 1
        if i < len(parts) and parts[i] not in names.get(mod, set()):
            bad.append(dotted)
    return bad


def literals(source: str) -> dict:
    """The module-level literals selfcheck reads (KERNEL_FUNCTION, TOLERANCE, CONFIGS)."""
    out = {}
    for node in ast.parse(source).body:
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
            name = node.targets[0].id
            if name in ("KERNEL_FUNCTION", "TOLERANCE", "CONFIGS", "SEEDS"):
                out[name] = ast.literal_eval(node.value)
    return out


def run_config(kernel: Path, lit: dict, name: str, quick: bool, mode: str, work: Path) -> dict:
    start = time.perf_counter()
    res = run_isolated(kernel, lit["KERNEL_FUNCTION"], f"{kernel}:make_case", mode=mode,
                       tol=tuple(lit["TOLERANCE"]), work_dir=work,
                       case_args={"config": name, "quick": quick}, python=PYTHON)
    out = res.to_dict()
    out["wall_s"] = round(time.perf_counter() - start, 1)
    return out


def outcome(res: dict) -> str:
    if res["errors"]:
        return f"error:{res['errors'][0]['stage']}"
    return res["verify"]["status"]


def show(label: str, res: dict) -> None:
    v = res["verify"]
    print(f"  {label:34s} {outcome(res):13s} compiled={res['compiled']} sim_us={res['sim_us']} "
          f"util={res['utilization']} max_abs={v['max_abs_diff']} max_rel={v['max_rel_diff']} "
          f"call_s={res['seconds']} wall_s={res['wall_s']}", flush=True)
    for err in res["errors"]:
        print(f"      {err['stage']} line {err['kernel_line']}: {err['message'][:400]}")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("specs", nargs="+", type=Path)
    ap.add_argument("--full", action="store_true", help="run the 'shape' of each config, not 'quick'")
    ap.add_argument("--config", action="append", help="only these config names")
    ap.add_argument("--mode", default="verify", choices=["verify", "sim"])
    ap.add_argument("--mutants", action="store_true")
    ap.add_argument("--render-only", action="store_true")
    ap.add_argument("--out", type=Path)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    root = args.out or Path(tempfile.mkdtemp(prefix="opdesign-devkernel-"))
    report = []
    for spec in args.specs:
        op, source = render_kernel(spec)
        again = render_kernel(spec)[1]
        kdir = root / op
        kdir.mkdir(parents=True, exist_ok=True)
        kernel = kdir / f"{op}_kernel.py"
        kernel.write_text(source)
        py_compile.compile(str(kernel), doraise=True)
        bad = check_api(source)
        lit = literals(source)
        print(f"{spec.name}: {kernel} deterministic={source == again} unknown_api={bad}", flush=True)
        if args.render_only:
            continue
        for cfg in lit["CONFIGS"]:
            if args.config and cfg["name"] not in args.config:
                continue
            res = run_config(kernel, lit, cfg["name"], not args.full, args.mode, kdir / f"run_{cfg['name']}")
            shape = cfg["shape"] if args.full else cfg["quick"]
            print(f"    shape={shape} shrunk={cfg.get('shrunk' if args.full else 'quick_shrunk')}")
            show(cfg["name"], res)
            report.append({"spec": str(spec), "config": cfg["name"], "shape": shape, **res})
        if args.mutants:
            name = lit["CONFIGS"][0]["name"]
            for i, (label, old, new) in enumerate(MUTANTS):
                if source.count(old) != 1:
                    print(f"  mutant {label!r}: old string found {source.count(old)} times, skipped")
                    continue
                mdir = kdir / f"mutant{i}"
                mdir.mkdir(exist_ok=True)
                mfile = mdir / kernel.name
                mfile.write_text(source.replace(old, new))
                res = run_config(mfile, lit, name, True, "verify", mdir / "run")
                show(f"mutant: {label}", res)
                report.append({"spec": str(spec), "config": name, "mutant": label, "old": old, "new": new, **res})
    if args.json:
        args.json.write_text(json.dumps(report, indent=1, default=str))
    print(f"work dir: {root}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
