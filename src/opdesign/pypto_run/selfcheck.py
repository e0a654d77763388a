"""Self-check of a generated ``<op>_kernel.py``: compile, SIM and verify each typical config.

Used by the kernel file's own ``__main__`` (``python DIR/<op>_kernel.py``) and by
``opdesign verify DIR``. The kernel file is read, not imported, in this process:
its harness constants ``KERNEL_FUNCTION``, ``TOLERANCE`` and ``CONFIGS`` are
Python literals read with :func:`ast.literal_eval`, and every config runs in a
child process (:func:`~opdesign.pypto_run.runner.run_isolated`) that builds the
inputs with the file's ``make_case(config, quick)`` and the torch golden.

Each ``CONFIGS`` entry is ``{"name", "shape", "quick", "shrunk", "quick_shrunk"}``: the shape a run
uses without and with ``--quick``, and what each shrinks from the SPEC's typical config (a
sentence, or None when it runs as specified); the report repeats it so no shrink goes unsaid.
An optional ``"quick_constants"`` ({NAME: int}) makes ``--quick`` run a copy of the kernel with
those module-level constants re-assigned (:func:`with_constants`): the performance form's
compile-time lengths and tiles.

The report is plain data (the ``--json`` shape of ``opdesign verify``)::

    {"compiled": bool, "pypto_version": str, "calculator": {...},
     "configs": [{"name", "compiled", "sim_us", "utilization", "seconds", "shrunk",
                  "verify": {"status", "max_abs_diff", "max_rel_diff", "failed_passes"}}],
     "errors": [{"stage", "message", "kernel_line", "design_line", "config"}]}

``status`` is PASS / FAILED, or SKIPPED with ``verify=False`` (compile + SIM only).
"""

from __future__ import annotations

import argparse
import ast
import json
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ._lazy import ExtraMissing, UnsupportedRelease, require_supported_release
from .marker import HARNESS_MARKER  # the line that ends the kernel proper (PART A, the DESIGN.md pseudocode)

HARNESS_NAMES = ("KERNEL_FUNCTION", "TOLERANCE", "CONFIGS")

EXIT_OK, EXIT_FAILED, EXIT_INPUT = 0, 1, 2


class HarnessError(ValueError):
    """The kernel file lacks a readable self-check harness (exit 2)."""


def read_harness(kernel_file: Path) -> dict[str, Any]:
    """``KERNEL_FUNCTION``, ``TOLERANCE``, ``CONFIGS`` and ``kernel_lines`` of a kernel file.

    ``kernel_lines`` is the number of lines before the harness marker: the part
    the DESIGN.md pseudocode chapter shows. Raises :class:`HarnessError`.
    """
    try:
        text = kernel_file.read_text(encoding="utf-8")
        tree = ast.parse(text, filename=str(kernel_file))
    except (OSError, UnicodeDecodeError) as err:
        raise HarnessError(f"{kernel_file}: cannot read: {err}") from None
    except SyntaxError as err:
        raise HarnessError(f"{kernel_file}:{err.lineno}: syntax error: {err.msg}") from None
    found: dict[str, Any] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            name = node.targets[0].id
            if name in HARNESS_NAMES:
                try:
                    found[name] = ast.literal_eval(node.value)
                except ValueError:
                    raise HarnessError(f"{kernel_file}:{node.lineno}: {name} must be a Python literal") from None
    missing = [n for n in HARNESS_NAMES if n not in found]
    if missing:
        raise HarnessError(f"{kernel_file}: not an opdesign kernel file (missing {', '.join(missing)})")
    lines = text.splitlines()
    marker = next((i for i, line in enumerate(lines) if line.startswith(HARNESS_MARKER)), None)
    if marker is None:
        raise HarnessError(f"{kernel_file}: no self-check marker line ({HARNESS_MARKER!r})")
    found["kernel_lines"] = marker
    found["part_a"] = lines[:marker]
    return found


def with_constants(kernel_file: Path, constants: dict[str, int], dest: Path) -> Path:
    """Write ``dest``: the kernel file with module-level integer constants re-assigned, line for line.

    The performance form's lengths and tiles are compile-time constants (``SEQ_Q = 8192``); a
    config's ``quick_constants`` names the smaller values ``--quick`` runs with. Only the value of
    each ``NAME = <int>`` statement changes, so kernel lines keep their numbers. Raises
    :class:`HarnessError` when a name is not such a statement.
    """
    lines = kernel_file.read_text(encoding="utf-8").splitlines(keepends=True)
    tree = ast.parse("".join(lines), filename=str(kernel_file))
    spans = {node.targets[0].id: node.value for node in tree.body
             if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
             and isinstance(node.value, ast.Constant) and type(node.value.value) is int
             and node.value.lineno == node.value.end_lineno}
    missing = sorted(set(constants) - set(spans))
    if missing:
        raise HarnessError(f"{kernel_file}: quick_constants names {', '.join(missing)}, "
                           "which are not module-level integer constants")
    for name, value in constants.items():
        node = spans[name]
        line = lines[node.lineno - 1]
        lines[node.lineno - 1] = line[:node.col_offset] + str(int(value)) + line[node.end_col_offset:]
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_text("".join(lines), encoding="utf-8")
    return dest


def design_line_offset(design: Path | None, part_a: list[str]) -> int | None:
    """Line offset of the kernel proper inside DESIGN.md: ``design_line = offset + kernel_line``.

    The pseudocode chapter holds the kernel proper as one fenced block; the
    block is found by exact comparison of its lines (trailing blank lines of
    the kernel part ignored). None when there is no DESIGN.md or no such block.
    """
    if design is None or not design.is_file():
        return None
    body = list(part_a)
    while body and not body[-1].strip():
        body.pop()
    if not body:
        return None
    try:
        lines = design.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError):
        return None
    for i, line in enumerate(lines):
        if line.startswith("```") and lines[i + 1:i + 1 + len(body)] == body:
            return i + 1  # kernel line 1 is DESIGN.md line i + 2 (1-based)
    return None


def _calculator(python: str) -> dict[str, Any]:
    """Build or load the cached calculator once, in a child (reports first-build vs cached time)."""
    start = time.perf_counter()
    proc = subprocess.run([python, "-m", "opdesign.pypto_run.cache"], capture_output=True, text=True,
                          timeout=1800, env=_child_env())
    info: dict[str, Any] = {"seconds": round(time.perf_counter() - start, 2)}
    try:
        data = json.loads(proc.stdout)
        info.update(built=data["built"], build_seconds=round(data["build_seconds"], 2), path=data["path"])
    except (ValueError, KeyError):
        info["error"] = (proc.stderr or proc.stdout)[-2000:]
    return info


def _child_env() -> dict[str, str]:
    import os

    env = dict(os.environ)
    src_root = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (src_root, env.get("PYTHONPATH")) if p)
    return env


def shape_text(shape: dict[str, Any] | None) -> str:
    """``batch 1, num_heads 8, ..., head_dim 128``: the shape a SIM time was measured at."""
    return ", ".join(f"{k} {v}" for k, v in (shape or {}).items())


def long_run_note(cfg: dict[str, Any], quick: bool) -> str | None:
    """What a config beyond the ~10 s budget of tile pairs says before it runs (None within it)."""
    from opdesign.pypto_run.shrink import BUDGET_PAIRS, estimate_seconds

    pairs = cfg.get("quick_tile_pairs" if quick else "tile_pairs")
    if pairs is None or pairs <= BUDGET_PAIRS:
        return None
    return (f"{cfg['name']}: {pairs} tile pairs at {shape_text(cfg['quick' if quick else 'shape'])}: expect about "
            f"{estimate_seconds(pairs):.0f} s of compile + SIM (~{BUDGET_PAIRS} pairs per 10 s)"
            + ("" if quick else "; --quick runs a shrunk shape"))


def _config_row(name: str, shrunk: str | None, result: Any, verify: bool,
                shape: dict[str, Any] | None = None) -> dict[str, Any]:
    v = result.verify
    status = v.status if verify else "SKIPPED"
    if verify and status == "NOT_RUN":
        status = "FAILED"
    return {
        "name": name,
        "compiled": bool(result.compiled),
        "sim_us": result.sim_us,
        "utilization": result.utilization,
        "seconds": result.seconds,
        "shrunk": shrunk,
        "shape": dict(shape or {}),
        "verify": {"status": status, "max_abs_diff": v.max_abs_diff if verify else None,
                   "max_rel_diff": v.max_rel_diff if verify else None,
                   "failed_passes": list(v.failed_passes) if verify else []},
    }


def run(kernel_file: str | Path, *, configs: list[str] | None = None, quick: bool = False, verify: bool = True,
        design: str | Path | None = None, python: str | None = None,
        progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Compile + SIM (+ verify) every typical config of a generated kernel file; return the report.

    Raises:
        HarnessError: not an opdesign kernel file, or an unknown config name.
        ExtraMissing / UnsupportedRelease: PyPTO is not installed, or not 0.2.0.
    """
    import os

    kernel = Path(kernel_file).resolve()
    harness = read_harness(kernel)
    version = require_supported_release()
    say = progress or (lambda _msg: None)
    all_configs = harness["CONFIGS"]
    names = [c["name"] for c in all_configs]
    chosen = configs or names
    unknown = [n for n in chosen if n not in names]
    if unknown:
        raise HarnessError(f"--config: unknown config {', '.join(unknown)}; the kernel has {', '.join(names)}")
    offset = design_line_offset(Path(design) if design else kernel.parent / "DESIGN.md", harness["part_a"])
    interpreter = python or os.environ.get("OPDESIGN_PYPTO_PYTHON") or sys.executable
    say("calculator: building or loading the cached CPU calculator")
    report: dict[str, Any] = {"compiled": True, "pypto_version": version, "calculator": _calculator(interpreter),
                              "configs": [], "errors": []}
    from .runner import run_isolated

    for i, cfg in enumerate(c for c in all_configs if c["name"] in chosen):
        shrunk = cfg.get("quick_shrunk") if quick else cfg.get("shrunk")
        long_note = long_run_note(cfg, quick)
        if long_note:
            say(long_note)
        say(f"[{i + 1}/{len(chosen)}] {cfg['name']}: compile, SIM{' and verify' if verify else ''}"
            + (f" (shrunk: {shrunk})" if shrunk else ""))
        work = Path(tempfile.mkdtemp(prefix="opdesign-verify-"))
        try:
            constants = cfg.get("quick_constants") if quick else None
            source = with_constants(kernel, constants, work / "quick" / kernel.name) if constants else kernel
            result = run_isolated(source, harness["KERNEL_FUNCTION"], f"{source}:make_case",
                                  mode="verify" if verify else "sim", work_dir=work,
                                  tol=tuple(harness["TOLERANCE"]),
                                  case_args={"config": cfg["name"], "quick": quick}, python=interpreter)
        finally:
            shutil.rmtree(work, ignore_errors=True)
        row = _config_row(cfg["name"], shrunk, result, verify, cfg["quick" if quick else "shape"])
        report["configs"].append(row)
        for e in result.errors:
            if e.kernel_line is None and e.stage in ("parse", "compile"):
                e.kernel_line, e.reason = explain_unlocated(kernel.read_text(encoding="utf-8"),
                                                            cfg["quick" if quick else "shape"], constants)
        errors = [{"stage": e.stage, "message": e.message, "kernel_line": e.kernel_line,
                   "design_line": offset + e.kernel_line if offset is not None and e.kernel_line
                   and e.kernel_line <= harness["kernel_lines"] else None, "config": cfg["name"],
                   "reason": getattr(e, "reason", None)}
                  for e in result.errors]
        if row["compiled"] and not row["sim_us"] and not any(e["stage"] == "sim" for e in errors):
            errors.append({"stage": "sim", "message": "the SIM run printed no AICore end-to-end time",
                           "kernel_line": None, "design_line": None, "config": cfg["name"]})
        report["errors"] += errors
        report["compiled"] = report["compiled"] and row["compiled"]
        say(f"    {format_row(row)}")
    return report


#: config shape key -> the kernel constant that fixes it at compile time (a group is num_heads // num_kv_heads)
_FIXED = {"head_dim": "HEAD_DIM", "seq_q": "SEQ_Q", "seq_kv": "SEQ_KV", "num_heads": "NUM_HEADS",
          "num_kv_heads": "NUM_KV_HEADS", "topk": "TOPK", "group": "GROUP"}


def explain_unlocated(kernel_text: str, shape: dict[str, Any], constants: dict[str, Any] | None = None
                      ) -> tuple[int | None, str]:
    """(kernel line, reason) for a framework error that named no kernel line (issue 30 item 6): a value of
    the config's shape that differs from a compile-time constant of the kernel (``constants``: those
    --quick replaced), else a reason that says no such mismatch was found."""
    import ast

    from opdesign.pypto_run.constants import module_constants

    try:
        consts = module_constants(ast.parse(kernel_text.split("# --- self-check")[0]))
    except SyntaxError:
        consts = {}
    for name, value in (constants or {}).items():
        if name in consts:
            consts[name] = (value, consts[name][1])
    have = dict(shape)
    if shape.get("num_heads") and shape.get("num_kv_heads"):
        have["group"] = shape["num_heads"] // shape["num_kv_heads"]
    for key, const in _FIXED.items():
        if const in consts and key in have and have[key] != consts[const][0]:
            return consts[const][1], (f"the config has {key} {have[key]} but the kernel fixes {const} = "
                                      f"{consts[const][0]} at compile time")
    return None, ("the framework's error names no kernel line, and the config's shape agrees with every "
                  "compile-time constant of the kernel; see the log of the run")


def passed(report: dict[str, Any]) -> bool:
    """All configs compiled, simulated (sim_us > 0) and verified PASS (or SKIPPED), no error."""
    return bool(report["configs"]) and not report["errors"] and all(
        c["compiled"] and (c["sim_us"] or 0) > 0 and c["verify"]["status"] in ("PASS", "SKIPPED")
        for c in report["configs"])


def _num(value: float | None, fmt: str) -> str:
    return "n/a" if value is None else format(value, fmt)


def format_row(row: dict[str, Any]) -> str:
    """One line per config for people."""
    if not row["compiled"]:
        return f"{row['name']}: compile FAILED"
    v = row["verify"]
    diffs = "" if v["status"] == "SKIPPED" else \
        f" (max abs {_num(v['max_abs_diff'], '.3g')}, max rel {_num(v['max_rel_diff'], '.3g')})"
    at = f" at {shape_text(row['shape'])}" if row.get("shape") else ""
    return (f"{row['name']}: compiled, SIM {_num(row['sim_us'], '.2f')} us{at} "
            f"(AICore utilization {_num(row['utilization'], '.1f')} %), verify {v['status']}{diffs}")


def format_report(report: dict[str, Any]) -> str:
    """The whole report as text (``opdesign verify`` without ``--json``)."""
    calc = report.get("calculator", {})
    lines = [f"PyPTO {report['pypto_version']}; calculator "
             + ("built in " + str(calc.get("build_seconds")) + " s" if calc.get("built") else
                f"cached ({calc.get('seconds')} s to load)" if "error" not in calc else "FAILED")]
    for row in report["configs"]:
        lines.append(format_row(row) + (f" [shrunk: {row['shrunk']}]" if row["shrunk"] else ""))
    for err in report["errors"]:
        where = "".join(f" {k.split('_')[0]} line {err[k]}" for k in ("kernel_line", "design_line") if err[k])
        reason = f" ({err['reason']})" if err.get("reason") else ""
        lines.append(f"error: {err['config']}: {err['stage']}:{where}: {err['message']}{reason}")
    ok = sum(1 for c in report["configs"] if c["verify"]["status"] in ("PASS", "SKIPPED") and c["compiled"])
    lines.append(f"verify: {ok} of {len(report['configs'])} configs "
                 + ("passed" if passed(report) else "passed; FAILED"))
    return "\n".join(lines)


def main(kernel_file: str, argv: list[str] | None = None) -> int:
    """``python <op>_kernel.py [--config NAME] [--quick] [--no-verify] [--json]``."""
    parser = argparse.ArgumentParser(prog=Path(kernel_file).name,
                                     description="Compile, simulate and verify this kernel with PyPTO on the CPU.")
    parser.add_argument("--config", action="append", help="run only this typical config (repeatable)")
    parser.add_argument("--quick", action="store_true", help="shrunk shapes (stated in the output)")
    parser.add_argument("--no-verify", action="store_true", help="compile + SIM only (verify SKIPPED)")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    args = parser.parse_args(argv)
    try:
        report = run(kernel_file, configs=args.config, quick=args.quick, verify=not args.no_verify,
                     progress=lambda msg: print(msg, file=sys.stderr, flush=True))
    except (HarnessError, ExtraMissing, UnsupportedRelease) as err:
        print(f"error: {'extra_missing' if isinstance(err, ExtraMissing) else 'invalid_input'}: {err}",
              file=sys.stderr)
        return EXIT_INPUT
    print(json.dumps(report, indent=1, sort_keys=True) if args.json else format_report(report))
    return EXIT_OK if passed(report) else EXIT_FAILED
