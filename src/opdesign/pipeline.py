"""The main job end to end: SPEC file -> Plan -> rendered artifacts on disk.

The CLI and the agent tools both call these functions.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from typing import TYPE_CHECKING

from opdesign.errors import OpdesignError, SpecError
from opdesign.estimate import estimate, with_tuning
from opdesign.plan import Plan
from opdesign.spec import Spec, load_spec

if TYPE_CHECKING:
    from opdesign.render import Lang


@dataclass(frozen=True)
class NewResult:
    plan: Plan
    files: list[Path]


def golden_module_count(spec: Spec, spec_path: Path) -> tuple[int, str] | None:
    """Module count and reason from the SPEC's ``golden`` (path relative to the SPEC file).

    Raises:
        SpecError: the golden is missing, not a ``.py`` file, or cannot be analysed.
    """
    if spec.golden is None:
        return None
    from opdesign.golden import estimate_golden

    path = (spec_path.parent / spec.golden).resolve()
    if path.suffix != ".py" or not path.is_file():
        raise SpecError(f"{spec_path}: golden: {spec.golden!r} is not an existing .py file next to the SPEC")
    try:
        report = estimate_golden(path)
    except OpdesignError as err:
        raise SpecError(f"{spec_path}: golden: {err.message}") from None
    return report.module_count, report.reason


def plan_from_spec_file(spec_path: str | Path, tuning: bool = False) -> Plan:
    """Load, validate and estimate a SPEC file (raises SpecError on bad input).

    ``tuning=True`` adds the cost-model rank and tuning candidates (:func:`with_tuning`).
    """
    path = Path(spec_path)
    spec = load_spec(path)
    plan = estimate(spec, golden_module_count(spec, path))
    return with_tuning(spec, plan) if tuning else plan


def new_design(spec_path: str | Path, out_dir: str | Path | None = None, lang: Lang = "en",
               force: bool = False) -> NewResult:
    """``opdesign new``: plan the SPEC and write the three artifacts under ``out_dir``.

    ``out_dir`` defaults to ``./<op_name>``. Nothing is written when the SPEC is
    invalid or a target exists without ``force``.
    """
    from opdesign.render import render_all, write_artifacts

    plan = plan_from_spec_file(spec_path, tuning=True)
    files = render_all(plan, lang)
    written = write_artifacts(files, Path(out_dir) if out_dir is not None else Path(plan.op_name), force=force)
    return NewResult(plan=plan, files=written)
