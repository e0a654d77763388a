"""Budget and consistency rules: buffers re-derived from the block's tiles, the document's tables
and the pseudocode's tile constants held against the block.

Sources: C-TILE-03 (budgets from the device capacity and the real resident
tensors; formulas in :mod:`opdesign.budget`), C-TILE-04 (expansion estimate,
:func:`opdesign.estimate_parts.expansion`), and the design principle that the
``opdesign:`` block, the tables and the pseudocode state one design.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from opdesign.validate import blockdata as bd
from opdesign.validate.pseudocode import call_name, int_value
from opdesign.validate.registry import Context, Hit, rule

TOTAL_NAMES = frozenset({"total", "合计", "总计", "总量"})
VALUE_COLUMN = ("current", "value", "当前", "取值", "值")
BYTES_COLUMN = ("bytes", "字节", "size", "大小")


def _cube_nbuffer(ctx: Context) -> int:
    """``cube_nbuffer`` of the block if given, else SK-01's recommended ``cube_nbuffer_setting`` ({-1: n})."""
    stated = bd.pos_int((ctx.block or {}).get("cube_nbuffer"))
    if stated:
        return stated
    rec = next(r for r in bd.sk01().config if r.key == "pass_options.cube_nbuffer_setting")
    return int(rec.value[-1])


def recomputed_budgets(ctx: Context) -> dict[str, Any]:
    """Budgets re-derived from the block's tiles: ``{"l0": {stage: [Budget]}}`` for any skeleton with
    valid cube tiles and device, plus ``"ub"`` and ``"l1"`` for SK-01 (whose formulas
    :mod:`opdesign.budget` holds) when form, q_tile, head_dim and the C1/C2/V1/V2 tiles are valid."""
    from opdesign import budget

    block = ctx.block or {}
    dev, cube, vec = bd.device(ctx), bd.cube_tiles(ctx), bd.vec_tiles(ctx)
    if dev is None or cube is None:
        return {}
    out: dict[str, Any] = {"l0": {stage: budget.l0_budgets(dev, tile) for stage, tile in cube.items()}}
    q_tile, head_dim = bd.pos_int(block.get("q_tile")), bd.pos_int(block.get("head_dim"))
    form, sk = block.get("form"), bd.skeleton(ctx) or "SK-01"  # unknown skeleton: SK-01 checks
    if (sk == "SK-01" and vec is not None and q_tile is not None and head_dim is not None
            and form in ("baseline", "performance") and set(cube) == {"C1", "C2"} and set(vec) == {"V1", "V2"}):
        out["ub"] = budget.ub_budget(dev, q_tile=q_tile, head_dim=head_dim, resident_state=form == "baseline",
                                     cube=cube, vec=vec)
        out["l1"] = budget.l1_budget(dev, cube, _cube_nbuffer(ctx))
    elif (sk == "SK-02" and vec is not None and set(vec) == {"V1", "V2"} and q_tile is not None
          and head_dim is not None and bd.pos_int(block.get("kv_tile")) is not None
          and block.get("dtype") in budget.DTYPE_BYTES):
        # SK-02 single pass: the whole top-k row resident (budget.single_pass_ub_budget, SK-02-R2)
        out["ub"] = budget.single_pass_ub_budget(dev, q_tile=q_tile, s2_tile=block["kv_tile"], head_dim=head_dim,
                                                 dtype=block["dtype"], vec=vec)
        out["l1"] = budget.l1_budget(dev, cube, _cube_nbuffer(ctx))
    elif (sk == "SK-16" and vec is not None and set(vec) == {"V1", "V2"} and q_tile is not None
          and head_dim is not None and block.get("dtype") in budget.DTYPE_BYTES):
        # SK-16 backward (opdesign.budget_sk16): S/dP and dQ/dK results, P/dS casts, two-pass accumulators
        from opdesign.budget_sk16 import budgets

        passes = 2 if block.get("passes") == 2 else 1
        out["ub"], out["l1"], _l0 = budgets(dev, q_tile, head_dim, block["dtype"], cube, vec, passes)
    return out


def _stated(ctx: Context, key: str) -> tuple[int | None, int | None]:
    value = (ctx.block or {}).get(key)
    if not isinstance(value, dict):
        return None, None
    return bd.pos_int(value.get("total_bytes")), bd.pos_int(value.get("capacity_bytes"))


@rule("C-TILE-03", "error", "numbers", "C-TILE-03",
      "a UB / L1 / L0 budget exceeds the device capacity",
      bad="ub_budget: {total_bytes: 200000, capacity_bytes: 196608}",
      good="ub_budget: {total_bytes: 164096, capacity_bytes: 196608}", needs_block=True)
def check_budgets(ctx: Context) -> Iterator[Hit]:
    """The buffers are re-derived from the block's tiles with :mod:`opdesign.budget` (L0A/L0B/L0C per
    cube stage for any skeleton; for SK-01 also UB per vector sub-block incl. resident oi/li/mi in the
    baseline form, and L1 operands x cube_nbuffer plus MM2_LEFT_SIZE) and held against the named device profile
    (``constraints/devices.yaml``). A stated total above the stated or the device capacity is
    reported as well, even when the tiles cannot be re-derived."""
    dev = bd.device(ctx)
    again = recomputed_budgets(ctx)
    for key, buffer, attr in (("ub_budget", "UB", "ub_bytes"), ("l1_budget", "L1", "l1_bytes")):
        total, cap = _stated(ctx, key)
        limit = min([c for c in (cap, getattr(dev, attr, None)) if c is not None], default=None)
        line = ctx.block_line(key, "total_bytes")
        if total is not None and limit is not None and total > limit:
            yield Hit(line, f"{buffer} total {total} B exceeds the capacity {limit} B")
        elif key[:2] in again and not again[key[:2]].fits:
            b = again[key[:2]]
            yield Hit(line, f"{buffer} re-derived from the tiles is {b.total_bytes} B, above {b.capacity_bytes} B "
                            f"({b.capacity_source})")
    for stage, budgets in again.get("l0", {}).items():
        for b in budgets:
            if not b.fits:
                yield Hit(ctx.block_line("cube_tiles", stage),
                          f"{b.buffer} needs {b.total_bytes} B, above {b.capacity_bytes} B ({b.capacity_source})")


@rule("OD-NUM-05", "warning", "numbers", "C-TILE-03 (stated figures vs recomputation)",
      "a stated budget differs from the recomputation or the device profile",
      bad="ub_budget: {items: {...}, total_bytes: 150000, capacity_bytes: 196608}   # tiles give 164096",
      good="ub_budget: {items: {...}, total_bytes: 164096, capacity_bytes: 196608}", needs_block=True)
def check_budget_figures(ctx: Context) -> Iterator[Hit]:
    """The stated ``total_bytes`` of ub_budget / l1_budget equals the recomputation from the tiles,
    ``capacity_bytes`` equals the device profile, and the UB items add up to the UB total. A warning:
    a hand-made design may count differently, but then the numbers need a second look."""
    dev = bd.device(ctx)
    again = recomputed_budgets(ctx)
    for key, buffer, attr in (("ub_budget", "UB", "ub_bytes"), ("l1_budget", "L1", "l1_bytes")):
        total, cap = _stated(ctx, key)
        if total is not None and key[:2] in again and total != again[key[:2]].total_bytes:
            yield Hit(ctx.block_line(key, "total_bytes"),
                      f"{buffer} total {total} B, the tiles give {again[key[:2]].total_bytes} B")
        if cap is not None and dev is not None and cap != getattr(dev, attr):
            yield Hit(ctx.block_line(key, "capacity_bytes"),
                      f"{buffer} capacity {cap} B, devices.yaml {dev.name}.{attr} is {getattr(dev, attr)} B")
    ub = (ctx.block or {}).get("ub_budget")
    items = ub.get("items") if isinstance(ub, dict) else None
    total, _cap = _stated(ctx, "ub_budget")
    if isinstance(items, dict) and total is not None:
        values = [bd.pos_int(v) for v in items.values()]
        if None not in values and sum(values) != total:
            yield Hit(ctx.block_line("ub_budget", "items"), f"UB items add up to {sum(values)} B, total says {total} B")


@rule("C-TILE-04", "warning", "numbers", "C-TILE-04",
      "the expression-expansion estimate exceeds the limit",
      bad="vec_tiles:\n  V1: {shape: [16, 16], view: [4096, 1024], ...}   # 16384 tiles x 3 per op",
      good="vec_tiles:\n  V1: {shape: [16, 128], view: [4096, 1024], ...}", needs_block=True)
def check_expansion(ctx: Context) -> Iterator[Hit]:
    """Per vector op ``ceil(view / tile) x (1 + inputs)`` (re-derived for SK-01 with
    ``estimate_parts.expansion`` from the block's vector tiles, FP8 ops included when ``quant: fp8``)
    stays within C-TILE-04's ``expansion_limit``; the stated ``expansion.max_per_op`` too (any skeleton). A warning: the limit is an estimate,
    to be confirmed by the real compile (C-TILE-04 is a should)."""
    limit = bd.constraint("C-TILE-04").param("expansion_limit")
    block = ctx.block or {}
    stated = block.get("expansion") if isinstance(block.get("expansion"), dict) else {}
    line = ctx.block_line("expansion")
    worst = bd.pos_int(stated.get("max_per_op"))
    if worst is not None and worst > limit:
        yield Hit(line, f"stated expansion {worst} per op exceeds the limit {limit}")
        return
    vec = bd.vec_tiles(ctx)
    q_tile, kv_tile, head_dim = (bd.pos_int(block.get(k)) for k in ("q_tile", "kv_tile", "head_dim"))
    sk = bd.skeleton(ctx) or "SK-01"  # unknown skeleton: SK-01 checks
    if sk not in ("SK-01", "SK-02", "SK-16") or vec is None or set(vec) != {"V1", "V2"} or None in (q_tile, kv_tile, head_dim):
        return
    if sk == "SK-02":  # the single pass: K/V gathers, V1 and V2 once (estimate_sk02)
        from opdesign.estimate_sk02 import single_pass_expansion

        again = single_pass_expansion(q_tile, kv_tile, head_dim, vec, 1)
    elif sk == "SK-16":  # backward V1 / V2 op tables (budget_sk16)
        from opdesign.budget_sk16 import expansion as sk16_expansion

        again = sk16_expansion(vec, 2 if block.get("passes") == 2 else 1)
    else:
        from opdesign.estimate_parts import expansion

        again = expansion(q_tile, kv_tile, head_dim, vec, 1, fp8=block.get("quant") == "fp8")
    if again.max_per_op > limit:
        op = max(again.ops, key=lambda o: o.expressions)
        yield Hit(ctx.block_line("vec_tiles", op.stage),
                  f"{op.stage} {op.op}: {op.tiles} tiles x (1 + {op.inputs}) = {op.expressions} expressions > {limit}")


def _value_column(table: Any, aliases: tuple[str, ...]) -> int:
    col = table.column(*aliases)
    return col if col is not None else 1


@rule("OD-NUM-03", "error", "numbers", "opdesign: one design, one set of numbers",
      "a number in the document's tables differs from the opdesign block",
      bad="| q_tile | 2048 | ... |   # opdesign.q_tile: 4096", good="| q_tile | 4096 | ... |   # opdesign.q_tile: 4096",
      needs_block=True)
def check_table_numbers(ctx: Context) -> Iterator[Hit]:
    """The parameter table rows ``q_tile``, ``kv_tile``, ``unroll_factor`` (the single value of
    ``unroll_list``) and ``root_count``, and the rows of the UB budget table (each item and the
    ``total`` row) state the same numbers as the block."""
    block = ctx.block or {}
    unroll = block.get("unroll_list")
    expected = {"q_tile": block.get("q_tile"), "kv_tile": block.get("kv_tile"), "root_count": block.get("root_count"),
                "unroll_factor": unroll[0] if isinstance(unroll, list) and len(unroll) == 1 else None}
    ub = block.get("ub_budget") if isinstance(block.get("ub_budget"), dict) else {}
    items = ub.get("items") if isinstance(ub.get("items"), dict) else {}
    for table in ctx.doc.tables:
        first = table.header[0].casefold() if table.header else ""
        names = {row.cells[0].strip("*` ") for row in table.rows if row.cells}
        if first.startswith(("parameter", "参数")):
            col, wanted = _value_column(table, VALUE_COLUMN), expected
        elif items and names & set(items):
            col, wanted = _value_column(table, BYTES_COLUMN), {**items, "total": ub.get("total_bytes")}
        else:
            continue
        for row in table.rows:
            name = row.cells[0].strip("*` ") if row.cells else ""
            key = "total" if name.casefold() in TOTAL_NAMES else name
            value = wanted.get(key)
            if bd.pos_int(value) is None or col >= len(row.cells):
                continue
            found = bd.cell_int(row.cells[col])
            if found != value:
                yield Hit(row.line, f"table says {name} = {row.cells[col]!r}, the opdesign block says {value}")


@rule("OD-NUM-04", "error", "numbers", "opdesign: one design, one set of numbers (SK-01-R1 tile calls)",
      "a tile in the pseudocode differs from the opdesign block",
      bad="Q_TILE = 128   # opdesign.q_tile: 4096", good="Q_TILE = 4096", needs_block=True)
def check_code_numbers(ctx: Context) -> Iterator[Hit]:
    """The pseudocode's ``Q_TILE`` / ``KV_TILE`` constants equal the block's q_tile / kv_tile, and the
    literal ``set_cube_tile_shapes`` calls (in order: C1, C2) and ``set_vec_tile_shapes`` calls (V1, V2)
    equal the block's tiles. Calls are matched to stages only when their numbers agree."""
    program, block = ctx.program, ctx.block or {}
    if program is None:
        return
    for const, key in (("Q_TILE", "q_tile"), ("KV_TILE", "kv_tile")):
        stated = bd.pos_int(block.get(key))
        if const in program.constants and stated is not None and program.constants[const] != stated:
            line = next((n.line for n, _l in program.walk() if n.stmt is not None and
                         const in [getattr(t, "id", None) for t in getattr(n.stmt, "targets", [])]), program.fence.first_line)
            yield Hit(line, f"{const} = {program.constants[const]}, the opdesign block says {key}: {stated}")
    for setter, group, fields in (("set_cube_tile_shapes", "cube_tiles", ("m", "k", "n")),
                                  ("set_vec_tile_shapes", "vec_tiles", ("shape",))):
        tiles = block.get(group)
        if not isinstance(tiles, dict):
            continue
        calls = [(c, n) for c, n, _l in program.calls() if call_name(c) == setter]
        if len(calls) != len(tiles):
            continue
        for (call, node), (stage, tile) in zip(calls, sorted(tiles.items())):
            if not isinstance(tile, dict):
                continue
            if setter == "set_vec_tile_shapes":
                code = [int_value(a, program.constants) for a in call.args]
            else:
                code = [[int_value(e, program.constants) for e in getattr(a, "elts", [])] for a in call.args]
            want = [tile.get("shape")] if setter == "set_vec_tile_shapes" else [tile.get(f) for f in fields]
            want = want[0] if setter == "set_vec_tile_shapes" else want
            if code != want and _all_ints(code):
                yield Hit(program.call_line(call, node), f"{setter}{tuple(code)} for {stage}, the opdesign block says {want}")


def _all_ints(value: Any) -> bool:
    if isinstance(value, list):
        return bool(value) and all(_all_ints(v) for v in value)
    return isinstance(value, int)
