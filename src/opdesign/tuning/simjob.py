"""One SIM run of a rendered kernel, in this process (a warm worker) or in a fresh child (today's path).

A job is plain data (it crosses process and Dask boundaries)::

    {"kernel_text": str, "config": str | None, "quick": bool, "timeout": float, "label": str}

The run shape is the kernel file's own: ``CONFIGS[config]["shape"]`` (``"quick"`` with ``quick``, with the
config's ``quick_constants`` written into a copy of the kernel, as ``opdesign verify --quick`` does), so
every candidate of one SPEC runs the same shape (:mod:`opdesign.pypto_run.shrink`). The result::

    {"sim_us", "utilization", "seconds" (compile + SIM inside the kernel call), "wall" (the job from the
     caller's side), "sim_error", "shape", "quick", "config", "pid", "output_dir"}
"""

from __future__ import annotations

import ast
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

_RUNS = 0  # jobs this process has run (a warm worker's count)


def harness_configs_of(kernel_text: str) -> list[dict[str, Any]]:
    """The ``CONFIGS`` literal of a rendered kernel text (no import)."""
    for node in ast.parse(kernel_text).body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name) \
                and node.targets[0].id == "CONFIGS":
            return ast.literal_eval(node.value)
    raise ValueError("the kernel text has no CONFIGS")


def run_shape(kernel_text: str, config: str | None, quick: bool) -> tuple[str, dict[str, Any], dict[str, int] | None]:
    """(config name, the shape the run uses, the constants --quick writes into a copy, or None)."""
    configs = harness_configs_of(kernel_text)
    cfg = next((c for c in configs if c["name"] == config), None) if config else configs[0]
    if cfg is None:
        raise ValueError(f"unknown config {config!r}; the kernel has {', '.join(c['name'] for c in configs)}")
    return cfg["name"], dict(cfg["quick" if quick else "shape"]), (cfg.get("quick_constants") if quick else None)


def _error_text(result: Any) -> str | None:
    text = "; ".join(f"{e.stage}: {e.message}" for e in result.errors)[:500]
    ok = result.sim_us is not None and result.sim_us > 0 and not result.errors
    return None if ok else (text or "no SIM time")


def _prepare(job: dict[str, Any], work: Path) -> tuple[Path, str, dict[str, Any]]:
    from opdesign.pypto_run.selfcheck import with_constants

    config, shape, constants = run_shape(job["kernel_text"], job.get("config"), bool(job.get("quick")))
    kernel = work / "candidate_kernel.py"
    kernel.write_text(job["kernel_text"], encoding="utf-8")
    if constants:
        kernel = with_constants(kernel, constants, work / "quick" / kernel.name)
    return kernel, config, shape


def run_here(job: dict[str, Any]) -> dict[str, Any]:
    """Compile + SIM one job in this process, in its own work folder; PyPTO's global options are reset
    before and after (a warm worker runs one job after another)."""
    global _RUNS
    start = time.perf_counter()
    from opdesign.pypto_run._lazy import import_pypto
    from opdesign.pypto_run.runner import load_kernel, run_in_process
    from opdesign.pypto_run.selfcheck import read_harness
    from opdesign.pypto_run.simcase import fixed_shape_case

    pypto = import_pypto()
    work = Path(tempfile.mkdtemp(prefix="opdesign-sim-"))
    out: dict[str, Any] = {"pid": os.getpid(), "quick": bool(job.get("quick"))}
    loaded = set(sys.modules)
    try:
        kernel, config, shape = _prepare(job, work)
        out.update(config=config, shape=shape)
        pypto.reset_options()
        harness = read_harness(kernel)
        case = fixed_shape_case(str(kernel), config, shape)
        fn = load_kernel(kernel, harness["KERNEL_FUNCTION"])
        result = run_in_process(fn, case["args"], case.get("goldens"), mode="sim", work_dir=work / "run")
        out.update(sim_us=result.sim_us if _error_text(result) is None else None, utilization=result.utilization,
                   seconds=result.seconds, sim_error=_error_text(result),
                   output_dir=(result.output_dir if result.output_dir and
                               Path(result.output_dir).resolve().is_relative_to(work.resolve()) else
                               f"outside the job's folder: {result.output_dir}"))
    except Exception as exc:  # noqa: BLE001 - a candidate's failure is data
        out.update(sim_us=None, utilization=None, seconds=None, sim_error=f"{type(exc).__name__}: {exc}"[:500])
    finally:
        try:
            pypto.reset_options()
        except Exception:  # noqa: BLE001
            pass
        for name in set(sys.modules) - loaded:  # the candidate's kernel modules
            if name.startswith("_opdesign_kernel_"):
                sys.modules.pop(name, None)
        shutil.rmtree(work, ignore_errors=True)
        _RUNS += 1
    out["wall"] = round(time.perf_counter() - start, 3)
    out["runs_in_process"] = _RUNS
    return out


def run_fresh(job: dict[str, Any], python: str | None = None) -> dict[str, Any]:
    """Today's path (``opdesign rank --sim``): a fresh ``python -m opdesign.pypto_run.worker`` child per job."""
    from opdesign.pypto_run import simcase
    from opdesign.pypto_run.runner import run_isolated
    from opdesign.pypto_run.selfcheck import read_harness

    start = time.perf_counter()
    work = Path(tempfile.mkdtemp(prefix="opdesign-sim-fresh-"))
    out: dict[str, Any] = {"pid": None, "quick": bool(job.get("quick"))}
    try:
        kernel, config, shape = _prepare(job, work)
        out.update(config=config, shape=shape)
        result = run_isolated(kernel, read_harness(kernel)["KERNEL_FUNCTION"], f"{simcase.__file__}:fixed_shape_case",
                              mode="sim", work_dir=work / "run", python=python, timeout=float(job.get("timeout", 900)),
                              case_args={"kernel_file": str(kernel), "config": config, "shape": shape})
        out.update(sim_us=result.sim_us if _error_text(result) is None else None, utilization=result.utilization,
                   seconds=result.seconds, sim_error=_error_text(result), output_dir=None)
    except Exception as exc:  # noqa: BLE001
        out.update(sim_us=None, utilization=None, seconds=None, sim_error=f"{type(exc).__name__}: {exc}"[:500])
    finally:
        shutil.rmtree(work, ignore_errors=True)
    out["wall"] = round(time.perf_counter() - start, 3)
    return out


def run_fake(job: dict[str, Any]) -> dict[str, Any]:
    """A deterministic stand-in for tests and dry runs (``OPDESIGN_SIM_RUNNER=fake``): no PyPTO.

    The figure depends on the kernel's tile constants and text only: ``20 + 3 x 10^5 / Q_TILE / KV_TILE x
    ... `` plus a hash jitter under 5 %, so it is the same in every process and for every completion order.
    ``OPDESIGN_FAKE_SIM_SECONDS`` makes each run sleep that long (to be killed mid-run in tests).
    """
    import hashlib

    if job.get("fake_crash"):  # a candidate that kills its worker process (pool tests)
        os._exit(3)
    delay = float(os.environ.get("OPDESIGN_FAKE_SIM_SECONDS", "0") or 0)
    if delay:
        time.sleep(delay)
    text = job["kernel_text"]
    config, shape, constants = run_shape(text, job.get("config"), bool(job.get("quick")))
    consts = {n.targets[0].id: n.value.value for n in ast.parse(text).body
              if isinstance(n, ast.Assign) and len(n.targets) == 1 and isinstance(n.targets[0], ast.Name)
              and isinstance(n.value, ast.Constant) and type(n.value.value) is int}
    consts.update(constants or {})
    q, kv = consts.get("Q_TILE", 64), consts.get("KV_TILE", 64)
    chains = consts.get("CHAINS", 1)
    jitter = int(hashlib.sha256(text.encode()).hexdigest()[:6], 16) / 0xFFFFFF
    pairs = shape["batch"] * shape["num_heads"] * -(-shape["seq_q"] // q) * -(-shape["seq_kv"] // kv)
    sim_us = round(20 + pairs * (2.0 + q * kv / 8192) / (1 + 0.3 * (chains > 1)) * (1 + 0.05 * jitter), 3)
    return {"sim_us": sim_us, "utilization": None, "seconds": round(delay, 3), "wall": round(delay, 3),
            "sim_error": None, "shape": shape, "quick": bool(job.get("quick")), "config": config, "pid": os.getpid(),
            "output_dir": None, "fake": True}


def main(argv: list[str] | None = None) -> int:
    """``python -m opdesign.tuning.simjob JOB.json OUT.json``: one job in this (fresh) process."""
    args = sys.argv[1:] if argv is None else argv
    job = json.loads(Path(args[0]).read_text(encoding="utf-8"))
    Path(args[1]).write_text(json.dumps(run_here(job)), encoding="utf-8")
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
