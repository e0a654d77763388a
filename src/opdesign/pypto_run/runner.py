"""Compile, simulate and verify one PyPTO kernel config; return plain data.

Two entry points:

- :func:`run_in_process` runs a ``@pypto.frontend.jit`` kernel object in this
  process: SIM run (``RunMode.SIM``) for the cost-model figures and, unless
  ``mode="sim"``, pass verification against the caller's golden tensors, both in
  one kernel call (with verification on, the same call compiles, verifies every
  selected pass and then simulates). Output goes to ``work_dir`` (see
  :mod:`.isolation`), fds 1/2 are captured for the figures and diagnostics.
- :func:`run_isolated` does the same in a child process
  (``python -m opdesign.pypto_run.worker``). That is the default for tools:
  PyPTO keeps global state (options, kernel caches, the loaded calculator) and
  its native code can abort or segfault (e.g. a non-jit ``pypto.function``
  verify ended in SIGSEGV); a child keeps the caller alive, gives every config a
  clean state, and bounds its time. The child pays ~1-2 s of import and loads
  the cached calculator (:mod:`.cache`) instead of rebuilding it.
"""

from __future__ import annotations

import importlib.util
import inspect
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ._lazy import import_pypto
from .adapter import verify_data_fix
from .diagnose import classify_chain, classify_exception  # noqa: F401 (re-exported)
from .isolation import OUTPUT_SUBDIR, capture_fds, isolated, work_env
from .results import (
    KernelError,
    RunResult,
    diagnostic_line,
    find_verify_csvs,
    merge_verify,
    parse_sim_figures,
    parse_verify_csv,
    strip_ansi,
)
from .swimlane import rerun_figures

MODES = ("sim", "verify")
DEFAULT_TOL = (1e-3, 1e-3)


def load_kernel(kernel_file: str | Path, function: str) -> Any:
    """Import ``kernel_file`` under a private module name and return ``function`` from it."""
    path = Path(kernel_file).resolve()
    mod_name = f"_opdesign_kernel_{path.stem}_{abs(hash(str(path))) % 10**8}"
    spec = importlib.util.spec_from_file_location(mod_name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import kernel module {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[mod_name] = module
    spec.loader.exec_module(module)
    if not hasattr(module, function):
        raise AttributeError(f"{path} has no attribute {function!r}")
    return getattr(module, function)


def _tensor_param_names(kernel: Any) -> list[str]:
    """Names of the kernel's tensor parameters, in call order."""
    original = getattr(kernel, "_original_func", kernel)
    pypto = import_pypto()
    names = []
    for p in inspect.signature(original).parameters.values():
        if isinstance(p.annotation, pypto.Tensor) or "Tensor" in str(p.annotation):
            names.append(p.name)
    return names


def _golden_list(kernel: Any, n_args: int, goldens: Sequence[Any] | Mapping[str, Any]) -> list[Any]:
    """One golden entry per tensor argument (None where there is no golden)."""
    if isinstance(goldens, Mapping):
        names = _tensor_param_names(kernel)
        unknown = set(goldens) - set(names)
        if unknown:
            raise KeyError(f"goldens for unknown kernel parameters: {sorted(unknown)}")
        return [goldens.get(name) for name in names[:n_args]]
    out = list(goldens)
    if len(out) != n_args:
        raise ValueError(f"{len(out)} goldens for {n_args} tensor arguments (use None for inputs)")
    return out


def _kernel_file(kernel: Any) -> str | None:
    original = getattr(kernel, "_original_func", None)
    code = getattr(original, "__code__", None)
    return code.co_filename if code is not None else None


def run_in_process(
    kernel: Any,
    args: Sequence[Any],
    goldens: Sequence[Any] | Mapping[str, Any] | None = None,
    *,
    mode: str = "verify",
    work_dir: str | Path | None = None,
    tol: tuple[float, float] = DEFAULT_TOL,
    passes: list[str] | None = None,
    kwargs: Mapping[str, Any] | None = None,
    echo: bool = False,
) -> RunResult:
    """Run one config of ``kernel`` (a ``pypto.frontend.jit`` object) in this process.

    ``args`` are the concrete torch tensors for every tensor parameter, outputs
    included (pre-allocated). ``goldens``: a list aligned with ``args`` (None for
    inputs) or a dict ``{param_name: tensor}``. ``mode``: ``"sim"`` (SIM only) or
    ``"verify"`` (pass verification + SIM in one call). ``tol``: the
    ``pass_verify_error_tol`` pair. ``passes``: ``pass_verify_pass_filter``
    (default ``[]``: tensor_graph vs golden only). ``kwargs``: non-tensor params.
    """
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}")
    pypto = import_pypto()
    result = RunResult()
    kernel_file = _kernel_file(kernel)
    own_tmp = work_dir is None
    work = Path(tempfile.mkdtemp(prefix="opdesign-pypto-")) if own_tmp else Path(work_dir)
    verify = mode == "verify"
    saved_run = dict(getattr(kernel, "_runtime_options", {}) or {})
    saved_verify = getattr(kernel, "_verify_options", None)
    kernel._runtime_options = {**saved_run, "run_mode": pypto.RunMode.SIM.value}
    if verify:
        kernel._verify_options = {
            "enable_pass_verify": True,
            "pass_verify_pass_filter": list(passes or []),
            "pass_verify_error_tol": [float(tol[0]), float(tol[1])],
        }
    else:
        kernel._verify_options = {"enable_pass_verify": False}
    with isolated(work) as wdir, capture_fds(echo=echo) as cap:
        before = set(find_verify_csvs(wdir / OUTPUT_SUBDIR))
        start = time.perf_counter()
        try:
            if verify:
                if goldens is None:
                    raise ValueError("mode='verify' needs goldens")
                with verify_data_fix():
                    pypto.set_verify_golden_data(goldens=_golden_list(kernel, len(args), goldens))
                    kernel(*args, **dict(kwargs or {}))
            else:
                kernel(*args, **dict(kwargs or {}))
            result.compiled = True
        except Exception as exc:  # noqa: BLE001 - every failure becomes data
            # diagnostics text is only readable after the fds are restored (filled below)
            result.errors.extend(classify_chain(exc, kernel_file, ""))
        finally:
            result.seconds = round(time.perf_counter() - start, 3)
            kernel._runtime_options = saved_run
            kernel._verify_options = saved_verify
    text = cap.text
    for err in result.errors:
        if err.kernel_line is None and err.stage in ("parse", "compile"):
            err.kernel_line = diagnostic_line(text, kernel_file)
    result.sim_us, result.utilization = parse_sim_figures(text)
    result.log_tail = strip_ansi(text)[-3000:]
    outputs = sorted((wdir / OUTPUT_SUBDIR).glob("output_*"), key=lambda p: p.stat().st_mtime)
    result.output_dir = str(outputs[-1]) if outputs else None
    if any(e.stage == "sim" for e in result.errors):
        result.compiled = True  # the SIM runs after compilation (and verification) finished
    if verify and result.compiled:
        # Note: the CSV rows are flushed at process exit; in-process callers see NOT_RUN
        # here and should use run_isolated (which re-reads the CSV after the child exits).
        new = [p for p in find_verify_csvs(wdir / OUTPUT_SUBDIR) if p not in before]
        result.verify = merge_verify([parse_verify_csv(p, tol) for p in new])
        if not new:
            result.errors.append(KernelError("verify", "no verify_result_brief.csv was written"))
    if result.compiled and result.sim_us is None and not result.errors:
        result.errors.append(
            KernelError("sim", "the SIM run printed no 'AICore End-to-End Time' figure")
        )
    return result


def run_isolated(
    kernel_file: str | Path,
    function: str,
    case: str,
    *,
    mode: str = "verify",
    work_dir: str | Path | None = None,
    tol: tuple[float, float] = DEFAULT_TOL,
    passes: list[str] | None = None,
    case_args: Mapping[str, Any] | None = None,
    python: str | None = None,
    timeout: float = 2400.0,
) -> RunResult:
    """Run one config in a child ``python -m opdesign.pypto_run.worker`` process.

    ``case`` names a callable ``"path/to/file.py:func"`` that the child calls as
    ``func(**case_args)`` and that returns ``{"args": [...], "goldens": [...] or
    {...}, "kwargs": {...}}`` (torch tensors built in the child, so the caller
    needs neither torch nor pypto). ``python``: interpreter with pypto
    (default: ``$OPDESIGN_PYPTO_PYTHON`` or this one).
    """
    work = Path(work_dir) if work_dir else Path(tempfile.mkdtemp(prefix="opdesign-pypto-"))
    work = work.resolve()
    work.mkdir(parents=True, exist_ok=True)
    job = {
        "kernel_file": str(Path(kernel_file).resolve()),
        "function": function,
        "case": case,
        "case_args": dict(case_args or {}),
        "mode": mode,
        "tol": list(tol),
        "passes": passes,
        "work_dir": str(work),
        "result_file": str(work / "result.json"),
    }
    job_file = work / "job.json"
    job_file.write_text(json.dumps(job, indent=1))
    env = dict(os.environ)
    env.update(work_env(work))
    src_root = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (src_root, env.get("PYTHONPATH")) if p)
    interpreter = python or os.environ.get("OPDESIGN_PYPTO_PYTHON") or sys.executable
    log_file = work / "worker.log"
    start = time.perf_counter()
    try:
        with log_file.open("wb") as log:
            proc = subprocess.run(
                [interpreter, "-m", "opdesign.pypto_run.worker", str(job_file)],
                cwd=work, env=env, stdout=log, stderr=subprocess.STDOUT, timeout=timeout,
            )
        returncode = proc.returncode
    except subprocess.TimeoutExpired:
        returncode = None
    log_text = log_file.read_text(encoding="utf-8", errors="replace")
    result_path = Path(job["result_file"])
    if result_path.exists():
        result = RunResult.from_dict(json.loads(result_path.read_text()))
        if mode == "verify" and result.compiled:
            # PyPTO flushes verify_result_brief.csv only when the process exits: read it now
            result.verify = merge_verify([parse_verify_csv(p, tol) for p in find_verify_csvs(work / OUTPUT_SUBDIR)])
            result.errors = [e for e in result.errors if e.stage != "verify"]
            if result.verify.status == "NOT_RUN":
                result.errors.append(KernelError("verify", "no verification row was written"))
        if result.compiled and result.sim_us is None and result.output_dir:
            result.sim_us, result.utilization = rerun_figures(result.output_dir, interpreter)
            if result.sim_us is not None:  # the SIM ran; it only skipped printing its figure
                result.errors = [e for e in result.errors if not (e.stage == "sim" and "End-to-End" in e.message)]
        return result
    result = RunResult(seconds=round(time.perf_counter() - start, 3), log_tail=strip_ansi(log_text)[-3000:])
    result.sim_us, result.utilization = parse_sim_figures(log_text)
    if returncode is None:
        result.errors.append(KernelError("compile", f"worker timed out after {timeout} s", kind="timeout"))
    else:
        stage = "sim" if "AICore" in log_text or "Start time:" in log_text else "compile"
        how = f"signal {-returncode}" if returncode < 0 else f"exit code {returncode}"
        result.errors.append(KernelError(
            stage, f"worker died ({how}) before writing a result", diagnostic_line(log_text), "signal"))
    return result


def load_case(case: str, case_args: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Resolve ``"file.py:func"`` and call it to build a case dict."""
    file_part, _, func = case.rpartition(":")
    factory: Callable[..., dict[str, Any]] = load_kernel(file_part, func)
    return factory(**dict(case_args or {}))
