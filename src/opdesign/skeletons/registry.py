"""The skeleton registry: which skeletons exist and which one plans a SPEC.

Selection (first match in :data:`SKELETONS`): ``direction: backward`` -> SK-16;
``mask: topk`` -> SK-02 when its conditions hold; every other forward SPEC -> SK-01.
A skeleton whose conditions fail returns :class:`~opdesign.skeletons.base.Rejected`;
then :data:`FALLBACK` plans the SPEC with ``fallback_from`` and the evaluated checks.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from opdesign.skeletons import sk01, sk02, sk16
from opdesign.skeletons.base import GoldenCount, Rejected, Skeleton

if TYPE_CHECKING:
    from opdesign.plan.models import Plan
    from opdesign.spec import Spec

#: In selection order; the last one applies to every SPEC.
SKELETONS: tuple[Skeleton, ...] = (sk16.SKELETON, sk02.SKELETON, sk01.SKELETON)
#: Plans a SPEC whose skeleton rejected it, and is the skeleton the validator assumes for a design
#: that names none.
FALLBACK: Skeleton = sk01.SKELETON


def find(skeleton_id: str | None) -> Skeleton | None:
    """The registered skeleton with this id (exact spelling), or None."""
    return next((s for s in SKELETONS if s.id == skeleton_id), None)


def skeleton_of(plan: Plan) -> Skeleton:
    """The skeleton that made ``plan``."""
    found = find(plan.skeleton.id)
    if found is None:
        raise KeyError(f"plan {plan.op_name} has the unregistered skeleton {plan.skeleton.id}")
    return found


def static_axes(plan: Plan) -> dict[str, tuple[Any, str]]:
    """Axis (or ``group``) -> (the kernel's compile-time value, the kernel constant that holds it):
    ``HEAD_DIM`` for every skeleton, plus what the plan's skeleton fixes (``Skeleton.static_axes``)."""
    fixed: dict[str, tuple[Any, str]] = {"head_dim": (plan.head_dim, "HEAD_DIM")}
    own = skeleton_of(plan).static_axes
    if own is not None:
        fixed.update(own(plan))
    return fixed


def select(spec: Spec) -> Skeleton:
    """The first registered skeleton whose ``applies`` holds for the SPEC."""
    return next(s for s in SKELETONS if s.applies(spec))


def estimate(spec: Spec, golden_module_count: GoldenCount = None) -> Plan:
    """Decide the whole design of a SPEC: pick the skeleton, plan it, fall back when it rejects.

    Args:
        spec: a validated SPEC.
        golden_module_count: ``(module_count, reason)`` from the golden estimator, if any.

    Raises:
        SpecError: the chosen skeleton (or the fallback) does not plan this variant, or no legal
            tiling fits the device.
    """
    skeleton = select(spec)
    planned = skeleton.plan(spec, golden_module_count)
    if isinstance(planned, Rejected):
        return FALLBACK.plan(spec, golden_module_count, fallback_from=skeleton.id, skeleton_checks=planned.checks)
    return planned
