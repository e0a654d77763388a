"""The main job end to end: SPEC file -> Plan (+ cost-model rank) -> rendered artifacts on disk.

The CLI and the agent tools both call these functions. The cost model (numpy) is imported only
by the functions that rank, so a plain estimate stays numpy-free.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from opdesign.errors import OpdesignError, SpecError
from opdesign.plan.models import Plan
from opdesign.render.design import Lang, render_all
from opdesign.render.headings import DEFAULT_LANG
from opdesign.render.write import write_artifacts
from opdesign.skeletons.registry import SKELETONS, estimate, skeleton_of
from opdesign.spec import Spec, load_spec

if TYPE_CHECKING:
    from opdesign.costmodel import CostParams, Ranking


#: tuning candidates attached to a ranked plan (``Plan.tuning``)
TUNING_COUNT = 3


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
    from opdesign.golden import estimate_golden  # the golden estimator loads only for a SPEC that names one

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
    return plan_from_spec(load_spec(path), path, tuning)


def plan_from_spec(spec: Spec, spec_path: str | Path, tuning: bool = False) -> Plan:
    """:func:`plan_from_spec_file` for a SPEC already loaded from ``spec_path`` (its ``golden`` is relative to it)."""
    path = Path(spec_path)
    module_count = golden_module_count(spec, path)
    try:
        plan = estimate(spec, module_count)
    except SpecError as err:  # a field the planner refuses (layout TND, ...): name the file as load_spec does
        if err.message.startswith(f"{path}:"):
            raise
        raise SpecError(f"{path}: {err.message}", err.details) from None
    return with_tuning(spec, plan) if tuning else plan


def rank_spec(spec: Spec, plan: Plan, top: int | None = None, include_rejected: bool = False, *,
              params: CostParams | None = None) -> Ranking:
    """``opdesign rank``: the cost-model ranking of a plan's candidates.

    Raises:
        SpecError: the plan's skeleton is not one the cost model ranks (``Skeleton.ranked``).
    """
    from opdesign.costmodel import rank_candidates

    if not skeleton_of(plan).ranked:
        ranked = ", ".join(s.id for s in SKELETONS if s.ranked)
        raise SpecError(f"rank: the cost model ranks {ranked} tilings; {spec.op_name} is planned with {plan.skeleton.id}")
    return rank_candidates(spec, plan, top, include_rejected, params=params)


def with_tuning(spec: Spec, plan: Plan) -> Plan:
    """The plan plus the cost-model rank of its tiles and the next best legal candidates.

    Plans of a skeleton the cost model does not rank come back unchanged. Kept out of
    :func:`~opdesign.skeletons.registry.estimate` so that planning never calls the cost model;
    ``opdesign new`` attaches the ranking here.
    """
    if not skeleton_of(plan).ranked:
        return plan
    from opdesign.costmodel import rank_candidates, tuning_from_ranking

    ranking = rank_candidates(spec, plan, top=TUNING_COUNT + 1)  # ranked once: the plan's rank and the next best
    return plan.model_copy(update={"cost_rank": ranking.chosen_rank, "cost_legal": ranking.legal,
                                   "tuning": tuning_from_ranking(ranking, n=TUNING_COUNT)})


def new_design(spec_path: str | Path, out_dir: str | Path | None = None, lang: Lang = DEFAULT_LANG,
               force: bool = False, *, spec: Spec | None = None) -> NewResult:
    """``opdesign new``: plan the SPEC and write the three artifacts under ``out_dir``.

    ``out_dir`` defaults to ``./<op_name>``. Nothing is written when the SPEC is
    invalid or a target exists without ``force``. ``spec``: the SPEC already loaded from ``spec_path``.
    """
    plan = (plan_from_spec(spec, spec_path, tuning=True) if spec is not None
            else plan_from_spec_file(spec_path, tuning=True))
    files = render_all(plan, lang)
    written = write_artifacts(files, Path(out_dir) if out_dir is not None else Path(plan.op_name), force=force)
    return NewResult(plan=plan, files=written)
