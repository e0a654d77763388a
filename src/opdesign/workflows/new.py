"""The main job end to end: SPEC file -> Plan (+ cost-model rank) -> rendered artifacts on disk.

The CLI and the agent tools both call these functions. The cost model (numpy) is imported only
by the functions that rank, so a plain estimate stays numpy-free.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from opdesign.catalog.headings import DEFAULT_LANG
from opdesign.errors import InputError, NotFoundError, OpdesignError, PathOutsideRootError, SpecError, TooLargeError
from opdesign.io.publish import FolderTarget, RootTarget
from opdesign.io.safefs import read_regular
from opdesign.plan.models import Plan
from opdesign.plan.runnable import check_runnable
from opdesign.render.design import Lang, render_all
from opdesign.skeletons.registry import SKELETONS, estimate, skeleton_of, static_axes
from opdesign.spec import Spec, load_spec

if TYPE_CHECKING:
    from opdesign.tuning import CostParams, Ranking


#: tuning candidates attached to a ranked plan (``Plan.tuning``)
TUNING_COUNT = 3


@dataclass(frozen=True)
class NewResult:
    plan: Plan
    files: list[Path]


#: ``read(relative_golden) -> (bytes, name)``: how a SPEC's golden is read (the tools read it inside their root).
GoldenReader = Callable[[str], tuple[bytes, str]]


def golden_module_count(spec: Spec, spec_path: Path, read: GoldenReader | None = None) -> tuple[int, str] | None:
    """Module count and reason from the SPEC's ``golden`` (path relative to the SPEC file).

    The golden is opened once and its bytes parsed (bounded read of a regular file); ``read``
    replaces the plain open next to the SPEC.

    Raises:
        SpecError: the golden is not a ``.py`` file, is missing, or cannot be analysed.
        PathOutsideRootError, TooLargeError: from ``read`` (an agent tool's root and limits).
    """
    if spec.golden is None:
        return None
    from opdesign.golden import estimate_golden  # the golden estimator loads only for a SPEC that names one
    from opdesign.golden.estimate import MAX_GOLDEN_BYTES

    if not spec.golden.endswith(".py"):
        raise SpecError(f"{spec_path}: golden: {spec.golden!r} is not an existing .py file next to the SPEC")
    try:
        if read is None:
            name = str(Path(spec_path).parent / spec.golden)
            data = read_regular(name, MAX_GOLDEN_BYTES)
        else:
            data, name = read(spec.golden)
        report = estimate_golden(Path(name), source=data)
    except (PathOutsideRootError, TooLargeError):
        raise
    except InputError as err:  # a FIFO, a device or a folder: unusable input, as for any file read
        raise InputError(f"{spec_path}: golden: {err.message}", {"field": "golden", "path": spec.golden}) from None
    except NotFoundError as err:
        why = " (symlink loop)" if "loop" in err.message else ""
        raise NotFoundError(f"{spec_path}: golden: {spec.golden!r} is not an existing .py file next to the SPEC{why}",
                            {"field": "golden", "path": spec.golden}) from None
    except OpdesignError as err:
        raise SpecError(f"{spec_path}: golden: {err.message}") from None
    return report.module_count, report.reason


def plan_from_spec_file(spec_path: str | Path, tuning: bool = False, *, params: CostParams | None = None) -> Plan:
    """Load, validate and estimate a SPEC file (raises SpecError on bad input).

    ``tuning=True`` adds the cost-model rank and tuning candidates (:func:`with_tuning`).
    """
    path = Path(spec_path)
    return plan_from_spec(load_spec(path), path, tuning=tuning, params=params)


def plan_from_spec(spec: Spec, spec_path: str | Path, tuning: bool = False, read: GoldenReader | None = None, *,
                   params: CostParams | None = None) -> Plan:
    """Estimate a loaded SPEC (``spec_path`` names it; its golden is read with ``read``, see above)."""
    path = Path(spec_path)
    module_count = golden_module_count(spec, path, read)
    try:
        plan = estimate(spec, module_count)
    except SpecError as err:  # a field the planner refuses (layout TND, ...): name the file as load_spec does
        if err.message.startswith(f"{path}:"):
            raise
        raise SpecError(f"{path}: {err.message}", err.details) from None
    return with_tuning(spec, plan, params) if tuning else plan


def rank_spec(spec: Spec, plan: Plan, top: int | None = None, include_rejected: bool = False, *,
              params: CostParams | None = None, within_form: bool = False) -> Ranking:
    """``opdesign rank``: the cost-model ranking of a plan's candidates.

    Raises:
        InputError: the plan's skeleton is not one the cost model ranks (``Skeleton.ranked``): the SPEC
            is valid, the command does not cover it (``invalid_input``, as for any argument it refuses).
    """
    from opdesign.tuning import rank_candidates
    from opdesign.tuning.model.calibration import load_params

    if not skeleton_of(plan).ranked:
        ranked = [s.id for s in SKELETONS if s.ranked]
        raise InputError(f"rank: ranking covers {', '.join(ranked)} only; {spec.op_name} is a valid SPEC planned with "
                         f"{plan.skeleton.id} (`opdesign estimate` prints its plan)",
                         {"field": "spec", "skeleton": plan.skeleton.id, "ranked": ranked})
    return rank_candidates(spec, plan, top, include_rejected, params=params or load_params(), within_form=within_form)


def with_tuning(spec: Spec, plan: Plan, params: CostParams | None = None) -> Plan:
    """The plan plus the cost-model rank of its tiles and the next best legal candidates.

    Plans of a skeleton the cost model does not rank come back unchanged. Kept out of
    :func:`~opdesign.skeletons.registry.estimate` so that planning never calls the cost model;
    ``opdesign new`` attaches the ranking here.
    """
    if not skeleton_of(plan).ranked:
        return plan
    from opdesign.tuning import rank_candidates, tuning_from_ranking
    from opdesign.tuning.model.calibration import load_params

    # ranked once: the plan's rank and the next best among the candidates that keep the plan's form
    ranking = rank_candidates(spec, plan, top=TUNING_COUNT + 1, within_form=True, params=params or load_params())
    return plan.model_copy(update={"cost_rank": ranking.chosen_rank, "cost_legal": ranking.legal,
                                   "tuning": tuning_from_ranking(ranking, n=TUNING_COUNT)})


def new_design(spec_path: str | Path, out_dir: str | Path | None = None, lang: Lang = DEFAULT_LANG,
               force: bool = False, before_publish: Callable[[list[str]], None] | None = None, *,
               spec: Spec | None = None, plan: Plan | None = None, params: CostParams | None = None,
               target: FolderTarget | RootTarget | None = None) -> NewResult:
    """``opdesign new`` and the ``new_design`` tool: plan the SPEC and write the artifacts, all or nothing.

    ``target``: where (:class:`~opdesign.io.publish.FolderTarget` of ``out_dir``, the default, or the
    agent's :class:`~opdesign.io.publish.RootTarget`); ``out_dir`` defaults to ``./<op_name>``. Nothing is
    written when the SPEC is invalid, a target exists without ``force``, or ``before_publish`` (called
    with the paths about to
    be written, after every file is staged) raises. ``spec``: the SPEC already loaded from ``spec_path``.
    ``plan``: a plan made already (``opdesign new --candidate`` / ``--tiles``: :mod:`opdesign.workflows.pin`).
    ``params``: cost-model figures of the ranking (default: the committed calibration, else CostParams).
    A typical config that differs from an axis the kernel fixes at compile time is refused
    (:func:`opdesign.plan.runnable.check_runnable`, ``spec_invalid``) before anything is written.
    """
    if plan is None:
        plan = (plan_from_spec(spec, spec_path, tuning=True, params=params) if spec is not None
                else plan_from_spec_file(spec_path, tuning=True, params=params))
    try:  # the kernel written below must run every typical config (issue 30 item 6)
        check_runnable(plan, static_axes(plan))
    except SpecError as err:
        raise SpecError(f"{spec_path}: {err.message}", err.details) from None
    files = render_all(plan, lang)
    target = target if target is not None else FolderTarget(out_dir)
    written = target.write(files, plan.op_name, force, before_publish)
    return NewResult(plan=plan, files=[Path(path) for path in written])
