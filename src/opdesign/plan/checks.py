"""Design checks over the ``opdesign:`` block: the verdicts DESIGN.md prints and the validator reports.

Each check is a pure function ``block -> [Problem]`` over the mapping of :meth:`Plan.design_block`
(the planner's own block) or the front matter of a DESIGN.md (parsed back by the validator). The
planner stores one :class:`~opdesign.plan.models.CheckRow` per verification row on the plan
(:func:`with_checks`); the validator's number rules call the same functions and turn each
problem's block path into a line. A value of the wrong type is read as missing (no exception):
OD-NUM-02 and C-TILE-06 report malformed values.

Thresholds come from the catalog: C-TILE-02 ``align_bytes`` / ``dtype_bytes``, C-TILE-05
``cube_align_elems``, C-TILE-04 ``expansion_limit``, ``constraints/devices.yaml`` capacities.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from opdesign.catalog import load_catalog
from opdesign.catalog.dtypes import DTYPE_BYTES
from opdesign.plan.buffers import l0_budgets
from opdesign.plan.core import CubeTile, VecTile

if TYPE_CHECKING:
    from opdesign.plan.models import CheckRow, Plan

#: Largest tile or size value taken as a number (bigger ones are C-TILE-06's business).
MAX_VALUE = 2**31 - 1
FP32_NAMES = frozenset({"fp32", "float32", "dt_fp32"})
CUBE_STAGES = ("C1", "C2")
VEC_STAGES = ("V1", "V2")


@dataclass(frozen=True)
class Problem:
    """One broken condition: ``path`` is the key path inside the block (for the line), ``message`` says what."""

    path: tuple[Any, ...]
    message: str


Check = Callable[[dict[str, Any]], list[Problem]]


@dataclass(frozen=True)
class Row:
    """A verification row of DESIGN.md: its key in ``Plan.design_checks``, the validator rule that
    computes it and the check function."""

    key: str
    rule: str
    check: Check


def pos_int(value: Any, limit: int = MAX_VALUE) -> int | None:
    """``value`` if it is an int in [1, limit] (not a bool), else None."""
    if isinstance(value, int) and not isinstance(value, bool) and 0 < value <= limit:
        return value
    return None


def pair(value: Any) -> tuple[int, int] | None:
    """``(a, b)`` of a two-item list of positive ints, else None."""
    if isinstance(value, list) and len(value) == 2:
        a, b = pos_int(value[0]), pos_int(value[1])
        if a is not None and b is not None:
            return a, b
    return None


def dtype_name(value: Any) -> str | None:
    """A known input / tile dtype (``bf16``, ``fp16``, ``fp32`` ...), else None (lists and dicts included)."""
    return value if isinstance(value, str) and value in DTYPE_BYTES else None


def is_fp32(name: Any) -> bool:
    return isinstance(name, str) and name.strip().lower() in FP32_NAMES


def device(block: dict[str, Any]):
    """The block's device profile, or None."""
    name = block.get("device")
    return load_catalog().devices.get(name.strip().lower()) if isinstance(name, str) else None


def cube_tiles(block: dict[str, Any]) -> dict[str, CubeTile] | None:
    """``{stage: CubeTile}`` when every cube tile of the block is well-formed, else None."""
    raw = block.get("cube_tiles")
    if not isinstance(raw, dict) or not raw:
        return None
    out = {}
    for stage, tile in raw.items():
        if stage not in CUBE_STAGES or not isinstance(tile, dict):
            return None
        axes = [pair(tile.get(a)) for a in ("m", "k", "n")]
        if None in axes or dtype_name(tile.get("operand_dtype")) is None:
            return None
        out[stage] = CubeTile(stage=stage, m=axes[0], k=axes[1], n=axes[2], operand_dtype=tile["operand_dtype"],
                              reason="from the DESIGN.md opdesign block")
    return out


def vec_tiles(block: dict[str, Any]) -> dict[str, VecTile] | None:
    """``{stage: VecTile}`` when every vector tile of the block is well-formed, else None."""
    raw = block.get("vec_tiles")
    if not isinstance(raw, dict) or not raw:
        return None
    out = {}
    for stage, tile in raw.items():
        if stage not in VEC_STAGES or not isinstance(tile, dict):
            return None
        shape, view = pair(tile.get("shape")), pair(tile.get("view"))
        if shape is None or view is None or dtype_name(tile.get("dtype")) is None:
            return None
        out[stage] = VecTile(stage=stage, shape=shape, dtype=tile["dtype"], view=view,
                             reason="from the DESIGN.md opdesign block")
    return out


# --- the checks ---


def tail_alignment(block: dict[str, Any]) -> list[Problem]:
    """C-TILE-02: ``cols x dtype_bytes % align_bytes == 0`` for the tail axis of every vector tile, in the
    tile's dtype and in the input dtype the stage casts to (P before C2, the output after V2)."""
    c02 = load_catalog().constraint("C-TILE-02")
    align, sizes = c02.param("align_bytes"), c02.param("dtype_bytes")
    tiles = block.get("vec_tiles")
    out = []
    for stage, tile in tiles.items() if isinstance(tiles, dict) else []:
        shape = tile.get("shape") if isinstance(tile, dict) else None
        cols = pos_int(shape[-1]) if isinstance(shape, list) and shape else None
        if cols is None:
            continue
        for dtype, role in ((tile.get("dtype"), "tile"), (block.get("dtype"), "cast")):
            size = sizes.get(dtype) if isinstance(dtype, str) else None
            if size and (cols * size) % align:
                out.append(Problem(("vec_tiles", stage, "shape"), f"{stage} tail axis {cols} x {dtype} ({size} B, "
                                   f"{role}) = {cols * size} B is not a multiple of {align} B"))
                break
    return out


def cube_axis_problems(l0: int, l1: int, align: int | None) -> list[str]:
    """C-TILE-05 on one ``[L0, L1]`` axis: ``0 < L0 <= L1``, ``L1 % L0 == 0``, ``align``-element multiples."""
    out = []
    if not 0 < l0 <= l1:
        out.append(f"needs 0 < L0 <= L1, got [{l0}, {l1}]")
    elif l1 % l0:
        out.append(f"L1 {l1} is not a multiple of L0 {l0}")
    if align and (l0 % align or l1 % align):
        out.append(f"[{l0}, {l1}] is not {align}-element aligned")
    return out


def cube_axes(block: dict[str, Any]) -> list[Problem]:
    """C-TILE-05: each of m, k, n of every cube tile is ``[L0, L1]`` with ``0 < L0 <= L1``, ``L1 % L0 == 0``
    and, for BF16/FP16 operands, multiples of ``cube_align_elems``."""
    aligns = load_catalog().constraint("C-TILE-05").param("cube_align_elems")
    tiles = block.get("cube_tiles")
    out = []
    for stage, tile in tiles.items() if isinstance(tiles, dict) else []:
        if not isinstance(tile, dict):
            continue
        operand = tile.get("operand_dtype")
        align = aligns.get(operand) if isinstance(operand, str) else None
        for axis in ("m", "k", "n"):
            axis_pair = pair(tile.get(axis))
            for problem in cube_axis_problems(*axis_pair, align) if axis_pair else []:
                out.append(Problem(("cube_tiles", stage, axis), f"{stage} {axis}: {problem}"))
    return out


def _stated_fit(block: dict[str, Any], key: str, buffer: str, attr: str) -> list[Problem]:
    value = block.get(key)
    if not isinstance(value, dict):
        return []
    total, cap = pos_int(value.get("total_bytes")), pos_int(value.get("capacity_bytes"))
    dev_cap = getattr(device(block), attr, None)
    limit = min([c for c in (cap, dev_cap) if c is not None], default=None)
    if total is not None and limit is not None and total > limit:
        return [Problem((key, "total_bytes"), f"{buffer} total {total} B exceeds the capacity {limit} B")]
    return []


def ub_fits(block: dict[str, Any]) -> list[Problem]:
    """C-TILE-03: the stated UB total is within the stated capacity and the device's ``ub_bytes``."""
    return _stated_fit(block, "ub_budget", "UB", "ub_bytes")


def l1_fits(block: dict[str, Any]) -> list[Problem]:
    """C-TILE-03: the stated L1 total is within the stated capacity and the device's ``l1_bytes``."""
    return _stated_fit(block, "l1_budget", "L1", "l1_bytes")


def l0_fits(block: dict[str, Any]) -> list[Problem]:
    """C-TILE-03: L0A / L0B / L0C of every cube stage (:func:`opdesign.plan.buffers.l0_budgets`) fit the device."""
    dev, cube = device(block), cube_tiles(block)
    if dev is None or cube is None:
        return []
    return [Problem(("cube_tiles", stage), f"{b.buffer} needs {b.total_bytes} B, above {b.capacity_bytes} B "
                                           f"({b.capacity_source})")
            for stage, tile in cube.items() for b in l0_budgets(dev, tile) if not b.fits]


def stated_expansion(block: dict[str, Any]) -> list[Problem]:
    """C-TILE-04: the stated whole-body ``expansion.body_total`` (or, in a design that states only
    ``max_per_op``, that op) is within the catalog's ``expansion_limit``."""
    limit = load_catalog().constraint("C-TILE-04").param("expansion_limit")
    stated = block.get("expansion")
    body = pos_int(stated.get("body_total")) if isinstance(stated, dict) else None
    worst = pos_int(stated.get("max_per_op")) if isinstance(stated, dict) else None
    if body is not None and body > limit:
        return [Problem(("expansion",), f"stated expansion {body} over the whole traced body exceeds the limit {limit} "
                                        f"({body / limit:.1f}x)")]
    if worst is not None and worst > limit:
        return [Problem(("expansion",), f"stated expansion {worst} per op exceeds the limit {limit}")]
    return []


def single_unroll(block: dict[str, Any]) -> list[Problem]:
    """C-LOOP-05: ``unroll_list`` holds at most one factor (none when no loop is unrolled)."""
    if "unroll_list" not in block:
        return []
    value = block["unroll_list"]
    if not isinstance(value, list) or len(value) > 1:
        return [Problem(("unroll_list",), f"unroll_list {value!r} should hold exactly one factor")]
    return []


def fp32_accumulators(block: dict[str, Any]) -> list[Problem]:
    """AT-01-R1 / C-API-05: every loop-carried accumulator of ``accumulators`` is FP32."""
    accs = block.get("accumulators")
    return [Problem(("accumulators", str(name)), f"accumulator {name} is {dtype!r}, not fp32")
            for name, dtype in (accs.items() if isinstance(accs, dict) else []) if not is_fp32(dtype)]


def no_kv_loop_state(block: dict[str, Any]) -> list[Problem]:
    """A single-pass design (AT-02-R3) has ``kv_loop: none``, no ``accumulators`` and an empty ``unroll_list``."""
    out = []
    if block.get("kv_loop") != "none":
        out.append(Problem(("kv_loop",), f"kv_loop is {block.get('kv_loop')!r}: a single pass has no KV loop ('none')"))
    if block.get("accumulators"):
        out.append(Problem(("accumulators",), f"accumulators {block['accumulators']!r}: a single pass carries no "
                                              "online state"))
    if block.get("unroll_list"):
        out.append(Problem(("unroll_list",), f"unroll_list {block['unroll_list']!r}: a single pass has no KV loop "
                                             "to unroll"))
    return out


def whole_row_fits(block: dict[str, Any]) -> list[Problem]:
    """A single pass covers the whole score row: ``kv_tile`` >= the columns of V1's view (the top-k row),
    and the stated UB total is within its capacity."""
    vec = block.get("vec_tiles")
    v1 = vec.get("V1") if isinstance(vec, dict) else None
    view = pair(v1.get("view")) if isinstance(v1, dict) else None
    kv_tile = pos_int(block.get("kv_tile"))
    out = []
    if view is not None and kv_tile is not None and kv_tile < view[1]:
        out.append(Problem(("kv_tile",), f"kv_tile {kv_tile} < the {view[1]} columns of the V1 score row: "
                                         "one pass does not cover the row"))
    return out + ub_fits(block)


#: The rows every skeleton prints (templates/DESIGN.md.j2).
COMMON_ROWS = (
    Row("C-TILE-02", "C-TILE-02", tail_alignment),
    Row("C-TILE-05", "C-TILE-05", cube_axes),
    Row("C-TILE-03 UB", "C-TILE-03", ub_fits),
    Row("C-TILE-03 L1", "C-TILE-03", l1_fits),
    Row("C-TILE-03 L0", "C-TILE-03", l0_fits),
    Row("C-TILE-04", "C-TILE-04", stated_expansion),
)


def strength(rule_id: str) -> str:
    """``must`` / ``must_not`` / ``should`` of a constraint or card rule id (``must`` when unknown)."""
    cat = load_catalog()
    if rule_id in cat.constraints:
        return cat.constraint(rule_id).level
    card = cat.cards.get(rule_id.rsplit("-", 1)[0])
    found = next((r for r in card.rules if r.id == rule_id), None) if card else None
    return found.level if found else "must"


def verdicts(block: dict[str, Any], rows: Iterable[Row]) -> dict[str, CheckRow]:
    """One :class:`CheckRow` per row: ``pass`` without problems, else ``warn`` for a should-level rule
    and ``fail`` otherwise."""
    from opdesign.plan.models import CheckRow  # the planner's: the validator reports problems, not rows

    out = {}
    for row in rows:
        problems = row.check(block)
        result = "pass" if not problems else ("warn" if strength(row.rule) == "should" else "fail")
        out[row.key] = CheckRow(rule=row.rule, result=result, problems=[p.message for p in problems])
    return out


def with_checks(plan: Plan, rows: Iterable[Row]) -> Plan:
    """``plan`` with ``design_checks`` computed from its own ``design_block()``."""
    return plan.model_copy(update={"design_checks": verdicts(plan.design_block(), rows)})
