"""Budget and consistency rules: buffers re-derived from the block's tiles, the document's tables
and the pseudocode's tile constants held against the block.

Sources: C-TILE-03 (budgets from the device capacity and the real resident
tensors; formulas in :mod:`opdesign.plan.buffers` and each skeleton package),
C-TILE-04 (expansion estimate, ``Skeleton.rederive_expansion``), and the design principle that the
``opdesign:`` block, the tables and the pseudocode state one design.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from opdesign.plan import checks
from opdesign.plan.buffers import l0_budgets
from opdesign.plan.core import BlockTiles
from opdesign.validate.analysis import blockdata as bd
from opdesign.validate.api import Context, Hit, rule, skeletons
from opdesign.validate.parse.pseudocode import call_name, int_value

TOTAL_NAMES = frozenset({"total", "合计", "总计", "总量"})
VALUE_COLUMN = ("current", "value", "当前", "取值", "值")
BYTES_COLUMN = ("bytes", "字节", "size", "大小")


def _cube_nbuffer(ctx: Context) -> int:
    """``cube_nbuffer`` of the block if given, else the fallback skeleton's (SK-01) recommended
    ``cube_nbuffer_setting`` ({-1: n})."""
    stated = bd.pos_int((ctx.block or {}).get("cube_nbuffer"))
    if stated:
        return stated
    rec = next(r for r in bd.catalog().card(skeletons().fallback.id).config
               if r.key == "pass_options.cube_nbuffer_setting")
    return int(rec.value[-1])


def block_tiles(ctx: Context) -> BlockTiles:
    """The block's figures the skeletons re-derive budgets and the expansion from (None = missing or bad)."""
    block = ctx.block or {}
    return BlockTiles(
        device=bd.device(ctx), cube=bd.cube_tiles(ctx), vec=bd.vec_tiles(ctx), form=block.get("form"),
        dtype=checks.dtype_name(block.get("dtype")), quant=block.get("quant"),
        q_tile=bd.pos_int(block.get("q_tile")), kv_tile=bd.pos_int(block.get("kv_tile")),
        head_dim=bd.pos_int(block.get("head_dim")), passes=2 if block.get("passes") == 2 else 1,
        cube_nbuffer=_cube_nbuffer(ctx),
    )


def recomputed_budgets(ctx: Context) -> dict[str, Any]:
    """Budgets re-derived from the block's tiles: ``{"l0": {stage: [Budget]}}`` for any skeleton with
    valid cube tiles and device, plus ``"ub"`` and ``"l1"`` from the design's skeleton package
    (``Skeleton.rederive_budgets``; SK-01 when the design names none) when its figures are valid."""
    tiles = block_tiles(ctx)
    if tiles.device is None or tiles.cube is None:
        return {}
    out: dict[str, Any] = {"l0": {stage: l0_budgets(tiles.device, tile) for stage, tile in tiles.cube.items()}}
    sk = bd.rules_skeleton(ctx)
    # UB and L1 need both stages (a missing one is OD-NUM-02's finding)
    again = sk.rederive_budgets(tiles) if sk is not None and set(tiles.cube) == set(checks.CUBE_STAGES) else None
    if again is not None:
        out["ub"], out["l1"] = again
    return out


def _stated(ctx: Context, key: str) -> tuple[int | None, int | None]:
    value = (ctx.block or {}).get(key)
    if not isinstance(value, dict):
        return None, None
    return bd.pos_int(value.get("total_bytes")), bd.pos_int(value.get("capacity_bytes"))


@rule("C-TILE-03", "error", "numbers", "C-TILE-03",
      "a UB / L1 / L0 budget exceeds the device capacity",
      bad='opdesign:\n  ub_budget: {total_bytes: 200000, capacity_bytes: 196608}',
      good='opdesign:\n  ub_budget: {total_bytes: 164096, capacity_bytes: 196608}', needs_block=True)
def check_budgets(ctx: Context) -> Iterator[Hit]:
    """The buffers are re-derived from the block's tiles (L0A/L0B/L0C per cube stage for any skeleton;
    with the skeleton package's formulas also UB and L1; for SK-01: UB per vector sub-block incl. resident oi/li/mi in the
    baseline form, and L1 operands x cube_nbuffer plus MM2_LEFT_SIZE) and held against the named device profile
    (``constraints/devices.yaml``). A stated total above the stated or the device capacity is
    reported as well, even when the tiles cannot be re-derived."""  # noqa: E501 (the rule's explanation, printed as written)
    block = ctx.block or {}
    again = recomputed_budgets(ctx)
    for key, buffer, stated in (("ub_budget", "UB", checks.ub_fits), ("l1_budget", "L1", checks.l1_fits)):
        problems = stated(block)
        yield from bd.hits(ctx, problems)
        if not problems and key[:2] in again and not again[key[:2]].fits:
            b = again[key[:2]]
            yield Hit(ctx.block_line(key, "total_bytes"), f"{buffer} re-derived from the tiles is {b.total_bytes} B, "
                                                          f"above {b.capacity_bytes} B ({b.capacity_source})")
    yield from bd.hits(ctx, checks.l0_fits(block))


@rule("OD-NUM-05", "warning", "numbers", "C-TILE-03 (stated figures vs recomputation)",
      "a stated budget differs from the recomputation or the device profile",
      bad=('opdesign:\n  ub_budget:   # the tiles give 182528\n'
           '    items: {vector_op_peak: 18192, MM1_RESULT_SIZE: 65536, MM2_RESULT_SIZE: 65536, SHARE_UB_SIZE: 256}\n'
           '    total_bytes: 149520\n    capacity_bytes: 196608'),
      good=('opdesign:\n  ub_budget:\n'
            '    items: {vector_op_peak: 32768, MM1_RESULT_SIZE: 65536, MM2_RESULT_SIZE: 65536, SHARE_UB_SIZE: 256,\n'
            '            sumUb: 6144, maxUb: 6144, expUb: 6144}\n'
            '    total_bytes: 182528\n    capacity_bytes: 196608'), needs_block=True)
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
      bad=('opdesign:\n  vec_tiles:   # V1: 256 x 64 = 16384 tiles, x 3 per op\n'
           '    V1: {shape: [16, 16], dtype: fp32, view: [4096, 1024]}\n'
           '    V2: {shape: [16, 128], dtype: fp32, view: [4096, 128]}\n'
           '  expansion: {max_per_op: 49152, limit: 18000}'),
      good=('opdesign:\n  vec_tiles:\n    V1: {shape: [16, 128], dtype: fp32, view: [4096, 1024]}\n'
            '    V2: {shape: [16, 128], dtype: fp32, view: [4096, 128]}\n'
            '  expansion: {max_per_op: 6144, limit: 18000}'), needs_block=True)
def check_expansion(ctx: Context) -> Iterator[Hit]:
    """Per vector op ``ceil(view / tile) x (1 + inputs)`` (re-derived with the skeleton package's op
    tables from the block's vector tiles; for SK-01 FP8 ops included when ``quant: fp8``)
    stays within C-TILE-04's ``expansion_limit``; the stated ``expansion.max_per_op`` too (any skeleton). A warning: the limit is an estimate,
    to be confirmed by the real compile (C-TILE-04 is a should)."""  # noqa: E501 (the rule's explanation, printed as written)
    limit = bd.constraint("C-TILE-04").param("expansion_limit")
    block = ctx.block or {}
    stated = checks.stated_expansion(block)
    if stated:
        yield from bd.hits(ctx, stated)
        return
    tiles, sk = block_tiles(ctx), bd.rules_skeleton(ctx)
    if (sk is None or tiles.vec is None or set(tiles.vec) != {"V1", "V2"}
            or None in (tiles.q_tile, tiles.kv_tile, tiles.head_dim)):
        return
    again = sk.rederive_expansion(tiles)
    if again.max_per_op > limit:
        op = max(again.ops, key=lambda o: o.expressions)
        yield Hit(ctx.block_line("vec_tiles", op.stage),
                  f"{op.stage} {op.op}: {op.tiles} tiles x (1 + {op.inputs}) = {op.expressions} expressions > {limit}")


def _value_column(table: Any, aliases: tuple[str, ...]) -> int:
    col = table.column(*aliases)
    return col if col is not None else 1


@rule("OD-NUM-03", "error", "numbers", "opdesign: one design, one set of numbers",
      "a number in the document's tables differs from the opdesign block",
      bad=('## Patterns and Design Decisions\n\n| parameter | current value | basis |\n|---|---|---|\n'
           '| q_tile | 2048 | SK-01-P1 |   (opdesign.q_tile: 4096)'),
      good=('## Patterns and Design Decisions\n\n| parameter | current value | basis |\n|---|---|---|\n'
            '| q_tile | 4096 | SK-01-P1 |'), kind='markdown',
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
      bad='Q_TILE = 128   # opdesign.q_tile: 4096\nKV_TILE = 1024',
      good='Q_TILE = 4096\nKV_TILE = 1024', kind='pseudocode', needs_block=True)
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
                         const in [getattr(t, "id", None) for t in getattr(n.stmt, "targets", [])]),
                        program.fence.first_line)
            yield Hit(line, f"{const} = {program.constants[const]}, the opdesign block says {key}: {stated}")
    for setter, group, fields in (("set_cube_tile_shapes", "cube_tiles", ("m", "k", "n")),
                                  ("set_vec_tile_shapes", "vec_tiles", ("shape",))):
        tiles = block.get(group)
        if not isinstance(tiles, dict):
            continue
        calls = [(c, n) for c, n, _l in program.calls() if call_name(c) == setter]
        if len(calls) != len(tiles):
            continue
        for (call, node), (stage, tile) in zip(calls, sorted(tiles.items()), strict=True):
            if not isinstance(tile, dict):
                continue
            if setter == "set_vec_tile_shapes":
                code = [int_value(a, program.constants) for a in call.args]
            else:
                code = [[int_value(e, program.constants) for e in getattr(a, "elts", [])] for a in call.args]
            want = [tile.get("shape")] if setter == "set_vec_tile_shapes" else [tile.get(f) for f in fields]
            want = want[0] if setter == "set_vec_tile_shapes" else want
            if code != want and _all_ints(code):
                yield Hit(program.call_line(call, node),
                          f"{setter}{tuple(code)} for {stage}, the opdesign block says {want}")


def _all_ints(value: Any) -> bool:
    if isinstance(value, list):
        return bool(value) and all(_all_ints(v) for v in value)
    return isinstance(value, int)
