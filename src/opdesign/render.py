"""Plan -> artifacts: DESIGN.md, eval/module_interfaces.yaml, <op_name>_scaffold.py.

Rendering formats what the estimator decided and never computes a design
number. Output is deterministic (same SPEC, same bytes): YAML is dumped with a
fixed key order, no timestamps, no absolute paths. :func:`write_artifacts`
renders everything in memory first and then writes each file atomically
(temporary file + ``os.replace``); on failure nothing new is left behind.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import Any, Literal

import yaml
from jinja2 import Environment, FileSystemLoader, StrictUndefined

from opdesign.errors import InputError, OutputExistsError
from opdesign.paths import data_dir
from opdesign.headings import HEADINGS, SUBHEADINGS
from opdesign.plan import Plan

Lang = Literal["en", "zh"]

def _cell(value: Any) -> str:
    """Markdown table cell: no pipes or newlines break the row."""
    text = value if isinstance(value, str) else yaml.safe_dump(value, default_flow_style=True, width=10_000).strip()
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ").strip() or "-"


def _env() -> Environment:
    env = Environment(
        loader=FileSystemLoader(str(data_dir("templates"))),
        undefined=StrictUndefined,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
        autoescape=False,
    )
    env.filters["cell"] = _cell
    env.filters["py"] = repr
    env.filters["kib"] = lambda b: f"{b / 1024:.2f} KiB"
    return env


def _dump_yaml(data: Any) -> str:
    return yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=100, default_flow_style=None)


def render_design(plan: Plan, lang: Lang = "en") -> str:
    """DESIGN.md text: front matter with the ``opdesign:`` block, then the seven chapters."""
    front = {
        "schema_version": 1,
        "op_name": plan.op_name,
        "dynamic_axes": plan.dynamic_axes,
        "opdesign": plan.design_block(),
    }
    body = _env().get_template("DESIGN.md.j2").render(
        plan=plan, h=HEADINGS[lang], sh=SUBHEADINGS[lang], lang=lang,
        pseudocode=render_pseudocode(plan), skeleton_dir=skeleton_dir(plan),
    )
    return "---\n" + _dump_yaml(front) + "---\n\n" + body


def skeleton_dir(plan: Plan) -> str:
    """Template folder of the plan's skeleton: ``SK-01`` -> ``sk01``."""
    return plan.skeleton.id.replace("-", "").lower()


def render_pseudocode(plan: Plan) -> str:
    """The PyPTO-style kernel pseudocode of the pseudocode chapter (parses with ``ast``)."""
    return _env().get_template(f"{skeleton_dir(plan)}/pseudocode.py.j2").render(plan=plan)


def render_interfaces(plan: Plan) -> str:
    """eval/module_interfaces.yaml in the CANNBot format (domain.md §9)."""
    data = {
        "schema_version": 1,
        "op": plan.op_name,
        "primary_inputs": [t.model_dump() for t in plan.primary_inputs],
        "modules": [m.model_dump() for m in plan.modules],
        "final_outputs": [{"name": t.name, "source": f"module_{plan.modules[-1].id}"} for t in plan.final_outputs],
        "composition_verification": {
            "rtol": plan.rtol,
            "atol": plan.atol,
            "representative_shapes": [{"name": c["name"], **c["shape"]} for c in plan.typical_configs],
            "seeds": sorted({c["seed"] for c in plan.typical_configs}),
        },
        "numerical_notes": _numerical_notes(plan),
    }
    return _dump_yaml(data)


def _numerical_notes(plan: Plan) -> list[str]:
    if plan.skeleton.id == "SK-16":
        return [
            "P is rebuilt from the forward l/m inputs, never recomputed (SK-16-R2); S, dP, P, dS and D stay FP32",
            f"P and dS are cast to {plan.dtype} before C2 (SK-16-R9, C-API-02 equal operand dtypes)",
            "dq, dk, dv accumulate in FP32 GM tensors the host zero-initialises (SK-16-R4, C-API-05)"
            if plan.passes == 1 else "dq, dk, dv accumulate in FP32 UB and are assembled on the last step (C-API-05)",
        ]
    if plan.skeleton.id == "SK-02":
        return [
            "single pass: scores, row max and row sum stay FP32 within one pass; no state is carried (SK-02-R3, AT-02)",
            f"P is cast to {plan.dtype} before C2 (C-API-02 equal operand dtypes)",
            "topk_indices slots past cur_seq hold -1 and are clamped to 0; tokens with cur_seq == 0 keep the zeros "
            "of the output allocation (SK-02-R6)",
        ]
    return [
        "mi, li, oi stay FP32 across KV tiles; only the final output is cast (SK-01-R6)",
        f"P is cast to {plan.dtype} before C2 (C-API-02 equal operand dtypes)",
    ]


def render_scaffold(plan: Plan) -> str:
    """The numpy scaffold running the designed loop nest, with a float64 golden and a self-check."""
    return _env().get_template(f"{skeleton_dir(plan)}/scaffold.py.j2").render(plan=plan)


def render_all(plan: Plan, lang: Lang = "en") -> dict[str, str]:
    """Relative path -> file text for the three artifacts."""
    return {
        "DESIGN.md": render_design(plan, lang),
        "eval/module_interfaces.yaml": render_interfaces(plan),
        f"{plan.op_name}_scaffold.py": render_scaffold(plan),
    }


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def write_artifacts(files: dict[str, str], out_dir: str | Path, force: bool = False) -> list[Path]:
    """Write rendered files under ``out_dir``: all or nothing, as far as the file system allows.

    Every target is checked before anything is written (a parent that is a
    file, a target that is a folder, an existing file without ``force``); then
    each file is written to a temporary file beside it and renamed into place
    with the usual ``0o666 & ~umask`` mode. If a write still fails, the files
    and folders this call created are removed again.

    Raises:
        OutputExistsError: a target exists and ``force`` is False (nothing written).
        InputError: a target or one of its parents is of the wrong kind, or a
            write failed (nothing new is left behind).
    """
    out = Path(out_dir)
    targets = [out / rel for rel in files]
    try:
        problems = []
        for target in targets:
            for parent in reversed(target.parents):
                if parent.exists() and not parent.is_dir():
                    problems.append(f"{parent} exists and is not a directory")
            if target.is_dir():
                problems.append(f"{target} is a directory")
        if problems:
            raise InputError(f"{out}: cannot write artifacts: {'; '.join(sorted(set(problems)))}")
        existing = [str(t) for t in targets if t.exists()]
    except OSError as err:  # e.g. a path component longer than the file system allows
        raise InputError(f"{out}: unusable output path: {err.strerror or err}") from None
    if existing and not force:
        raise OutputExistsError(f"refusing to overwrite {', '.join(existing)} (use --force)", details=existing)
    mode = 0o666 & ~_umask()
    created_dirs: list[Path] = []
    created_files: list[Path] = []
    try:
        for target, text in zip(targets, files.values()):
            for parent in reversed(target.parents):
                if not parent.exists():
                    parent.mkdir()
                    created_dirs.append(parent)
            fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
            try:
                with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as fh:
                    fh.write(text)
                os.chmod(tmp, mode)
                if not target.exists():
                    created_files.append(target)
                os.replace(tmp, target)
            finally:
                if os.path.exists(tmp):
                    os.unlink(tmp)
    except (OSError, UnicodeError) as err:
        for path in created_files:
            path.unlink(missing_ok=True)
        for folder in reversed(created_dirs):
            shutil.rmtree(folder, ignore_errors=True)
        raise InputError(f"{out}: cannot write artifacts: {getattr(err, 'strerror', None) or err}") from None
    return targets


def render_plan_text(plan: Plan) -> str:
    """The Plan for people (``opdesign estimate``)."""
    return _env().get_template("plan.txt.j2").render(plan=plan)
