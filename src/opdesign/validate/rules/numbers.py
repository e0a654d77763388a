"""Number rules: the ``opdesign:`` block re-checked against the constraint tables and device profile.

Sources: C-TILE-02 (32 B tail alignment), C-TILE-03 (UB / L1 / L0 budgets,
recomputed by the skeleton packages), C-TILE-04 (expansion estimate), C-TILE-05
(cube ``[L0, L1]``), C-TILE-06 (compile-time integer tiles). Every
threshold is read from ``constraints/*.yaml``, ``patterns/`` or
``constraints/devices.yaml``.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from typing import Any

from opdesign.plan import checks
from opdesign.validate.analysis import blockdata as bd
from opdesign.validate.analysis.values import declared_axes, is_dynamic
from opdesign.validate.api import Context, Hit, rule, skeletons
from opdesign.validate.engine.collect import all_rules
from opdesign.validate.parse.pseudocode import call_name, int_value, unparse

# key -> type the number rules need (tile values themselves are C-TILE-06's business)
BLOCK_KEYS: dict[str, type | tuple[type, ...]] = {
    "skeleton": str, "form": str, "device": str, "dtype": str, "head_dim": int, "seq_q": int, "seq_kv": int,
    "q_tile": object, "kv_tile": object, "kv_loop": str, "cube_tiles": dict, "vec_tiles": dict, "unroll_list": object,
    "accumulators": dict, "root_count": int, "ub_budget": dict, "l1_budget": dict, "expansion": dict,
    "form_checks": dict, "module_count": int,
}
FORMS = ("baseline", "performance")
#: Integers of the block that must be positive and below 2**31 when present (bd.pos_int); the rules
#: read any other value as "missing", so an out-of-range one must not pass silently.
POSITIVE_INTS: tuple[tuple[str, ...], ...] = (
    ("head_dim",), ("seq_q",), ("seq_kv",), ("module_count",), ("cube_nbuffer",),
    ("ub_budget", "total_bytes"), ("ub_budget", "capacity_bytes"), ("l1_budget", "total_bytes"),
    ("l1_budget", "capacity_bytes"), ("expansion", "max_per_op"), ("expansion", "limit"),
)
#: Counts that may pass 2^31 on long-context plans: positive ints up to bd.MAX_COUNT.
POSITIVE_COUNTS: tuple[tuple[str, ...], ...] = (("root_count",), ("task_count",))


@rule("OD-NUM-01", "info", "numbers", "opdesign validate (number rules need the opdesign block)",
      "number rules skipped: no opdesign block in the front matter",
      bad=('---\nschema_version: 1\nop_name: my_op\ndynamic_axes: [{name: batch}]\n---\n'
           '# my_op design (hand-written, no opdesign block)'),
      good=('---\nschema_version: 1\nop_name: my_op\ndynamic_axes: [{name: batch}]\n'
            'opdesign: {skeleton: SK-01, form: baseline}\n---\n'
            '# my_op design (opdesign new writes the whole block: Plan.design_block())'), kind='document')
def check_block_present(ctx: Context) -> Iterator[Hit]:
    """Without the ``opdesign:`` block the numbers cannot be re-derived; the rules that need it are
    listed as skipped (never as passed). Document, interface and pseudocode rules still run. For a
    catalog skeleton without a package (``opdesign.skeletons``) the UB / L1 budgets and the expansion estimate are not
    re-derived (each skeleton package holds its formulas); that is said here too."""
    if ctx.block is None:
        skipped = [r.id for r in all_rules().values() if r.needs_block]
        where = ("the front matter has no opdesign mapping" if isinstance(ctx.doc.front.data, dict)
                 else "no usable front matter")
        yield Hit(ctx.doc.front.first_line if ctx.doc.front.closed else 1,
                  f"{where}: {len(skipped)} rules skipped, not passed ({', '.join(skipped)})")
    # no package re-derives it
    elif bd.block_skeleton(ctx) is not None and skeletons().find(bd.block_skeleton(ctx)) is None:
        yield Hit(ctx.block_line("skeleton"), f"skeleton {bd.skeleton(ctx)}: UB / L1 budgets and the expansion "
                  "estimate are not re-derived (SK-01 formulas); stated totals are checked against the device only")


@rule("OD-NUM-02", "error", "numbers", "Plan.design_block() (opdesign block format)",
      "the opdesign block is malformed: missing key, wrong type, out-of-range number, unknown skeleton, device, "
      "form or dtype",
      bad='opdesign:\n  device: a9\n  form: fast',
      good='opdesign:\n  device: a3\n  form: performance')
def check_block_format(ctx: Context) -> Iterator[Hit]:
    """The block holds what the number rules re-derive from: skeleton, form (baseline / performance),
    a known device profile, the input dtype, head_dim, seq_q, seq_kv, the tiles, kv_loop, unroll_list,
    accumulators, root_count, the budgets, the expansion estimate, form_checks and module_count.
    head_dim, seq_q, seq_kv, module_count, cube_nbuffer and the budget / expansion figures are
    positive ints below 2^31, root_count and task_count below 2^53 (0, negative or huge values would read as "missing" and switch
    the rules that need them off). The skeleton is a catalog id (SK-01, SK-02, SK-16, exact spelling); with
    an unknown one the rules run with the skeleton of the decisions chapter's selection table, else as SK-01."""  # noqa: E501 (the rule's explanation, printed as written)
    if "opdesign" not in ctx.front:
        return
    block = ctx.block
    if block is None:
        yield Hit(ctx.doc.front.line("opdesign"), "opdesign block is not a mapping")
        return
    for key, kind in BLOCK_KEYS.items():
        if key not in block:
            yield Hit(ctx.block_line(), f"opdesign block has no '{key}'")
        elif kind is not object and kind is not int and (not isinstance(block[key], kind)
                                                         or isinstance(block[key], bool)):
            yield Hit(ctx.block_line(key), f"opdesign.{key} must be a {kind.__name__}, got {block[key]!r}")
    for paths, limit, text in ((POSITIVE_INTS, bd.MAX_VALUE, "2^31"), (POSITIVE_COUNTS, bd.MAX_COUNT, "2^53")):
        for path in paths:
            parent = block
            for part in path[:-1]:
                parent = parent.get(part) if isinstance(parent, dict) else None
            if isinstance(parent, dict) and path[-1] in parent and bd.pos_int(parent[path[-1]], limit) is None:
                yield Hit(ctx.block_line(*path), f"opdesign.{'.'.join(path)} must be a positive int < {text}, "
                                                 f"got {parent[path[-1]]!r}")
    for group, stages in (("cube_tiles", checks.CUBE_STAGES), ("vec_tiles", checks.VEC_STAGES)):
        tiles = block.get(group)
        missing = [s for s in stages if s not in tiles] if isinstance(tiles, dict) else []
        if missing:
            yield Hit(ctx.block_line(group), f"opdesign.{group} has no {', '.join(missing)}: budgets and expansion "
                                             "are re-derived from both stages")
    raw = block.get("skeleton")
    if isinstance(raw, str) and bd.block_skeleton(ctx) is None:
        known = bd.known_skeletons()
        yield Hit(ctx.block_line("skeleton"), f"unknown skeleton {raw!r} (known: {', '.join(known)}); the rules "
                                              f"run as {bd.skeleton(ctx) or skeletons().fallback.id + ' (default)'}")
    if isinstance(block.get("form"), str) and block["form"] not in FORMS:
        yield Hit(ctx.block_line("form"), f"opdesign.form {block['form']!r} is not one of {', '.join(FORMS)}")
    if isinstance(block.get("device"), str) and bd.device(ctx) is None:
        known = ", ".join(bd.catalog().devices)
        yield Hit(ctx.block_line("device"), f"unknown device {block['device']!r} (devices.yaml: {known})")
    sizes = bd.constraint("C-TILE-02").param("dtype_bytes")
    if isinstance(block.get("dtype"), str) and block["dtype"] not in sizes:
        yield Hit(ctx.block_line("dtype"), f"unknown dtype {block['dtype']!r} (known: {', '.join(sizes)})")
    yield from _tile_types(ctx, block)


def _tile_types(ctx: Context, block: dict[str, Any]) -> Iterator[Hit]:
    """Each tile a mapping of a known stage with a known dtype: else the tile rules (C-TILE-02..05) read the
    group as missing and would stay silent about it."""
    known = ", ".join(checks.DTYPE_BYTES)
    for group, stages, field in (("cube_tiles", checks.CUBE_STAGES, "operand_dtype"),
                                 ("vec_tiles", checks.VEC_STAGES, "dtype")):
        tiles = block.get(group)
        for stage, tile in tiles.items() if isinstance(tiles, dict) else []:
            where = f"opdesign.{group}.{stage}"
            if stage not in stages:
                yield Hit(ctx.block_line(group, str(stage)), f"{where}: unknown stage (known: {', '.join(stages)})")
            elif not isinstance(tile, dict):
                yield Hit(ctx.block_line(group, str(stage)), f"{where} must be a mapping, got {tile!r}")
            elif checks.dtype_name(tile.get(field)) is None:
                yield Hit(ctx.block_line(group, str(stage), field),
                          f"{where}.{field} must be a dtype name ({known}), got {tile.get(field)!r}")


@rule("C-TILE-02", "error", "numbers", "C-TILE-02",
      "vector tile tail axis is not 32-byte aligned",
      bad=('opdesign:\n  vec_tiles:\n    V1: {shape: [16, 24], dtype: bf16, view: [4096, 1024]}   # 24 x 2 B = 48 B\n'
           '    V2: {shape: [16, 128], dtype: fp32, view: [4096, 128]}'),
      good=('opdesign:\n  vec_tiles:\n'
            '    V1: {shape: [16, 64], dtype: fp32, view: [4096, 1024]}   # 64 x 4 B = 256 B\n'
            '    V2: {shape: [16, 128], dtype: fp32, view: [4096, 128]}'),
      needs_block=True)
def check_tail_alignment(ctx: Context) -> Iterator[Hit]:
    """``cols x dtype_bytes % align_bytes == 0`` for the last axis of every vector tile, in the tile's
    dtype and in the input dtype the stage casts to (P before C2, the output after V2). FP32 needs
    multiples of 8 elements, BF16/FP16 of 16 (C-TILE-02 ``align_bytes``, ``dtype_bytes``)."""
    yield from bd.hits(ctx, checks.tail_alignment(ctx.block or {}))


@rule("C-TILE-05", "error", "numbers", "C-TILE-05",
      "cube tile axis breaks [L0, L1]: 0 < L0 <= L1, L1 % L0 == 0, 16-element alignment for BF16/FP16",
      bad=('opdesign:\n  cube_tiles:\n    C1: {m: [128, 128], k: [128, 128], n: [128, 128], operand_dtype: bf16}\n'
           '    C2: {m: [128, 128], k: [128, 320], n: [128, 128], operand_dtype: bf16}   # 320 % 128 != 0'),
      good=('opdesign:\n  cube_tiles:\n    C1: {m: [128, 128], k: [128, 128], n: [128, 128], operand_dtype: bf16}\n'
            '    C2: {m: [128, 128], k: [128, 256], n: [128, 128], operand_dtype: bf16}'))
def check_cube_tiles(ctx: Context) -> Iterator[Hit]:
    """Each of m, k, n of ``set_cube_tile_shapes`` is ``[L0, L1]`` with ``0 < L0 <= L1`` and
    ``L1 % L0 == 0``; for BF16/FP16 operands both are multiples of 16 (``cube_align_elems``).
    Checked on the block's ``cube_tiles`` and on literal ``set_cube_tile_shapes`` calls of the pseudocode."""
    yield from bd.hits(ctx, checks.cube_axes(ctx.block or {}))
    if ctx.program is None:
        return
    aligns = bd.constraint("C-TILE-05").param("cube_align_elems")
    dtype = (ctx.block or {}).get("dtype")
    align = aligns.get(dtype) if isinstance(dtype, str) else None
    for call, node, _loops in ctx.program.calls():
        if call_name(call) != "set_cube_tile_shapes":
            continue
        for axis, arg in zip("mkn", call.args, strict=False):
            values = [int_value(e, ctx.program.constants) for e in getattr(arg, "elts", [])]
            if len(values) == 2 and None not in values and all(v > 0 for v in values):
                for problem in checks.cube_axis_problems(values[0], values[1], align):
                    yield Hit(ctx.program.call_line(call, node), f"set_cube_tile_shapes {axis}: {problem}")


def _tile_values(block: dict[str, Any]) -> Iterator[tuple[tuple[Any, ...], Any]]:
    for key in ("q_tile", "kv_tile"):
        if key in block:
            yield (key,), block[key]
    for group, fields in (("cube_tiles", ("m", "k", "n")), ("vec_tiles", ("shape", "view"))):
        tiles = block.get(group)
        for stage, tile in tiles.items() if isinstance(tiles, dict) else []:
            for name in fields:
                value = tile.get(name) if isinstance(tile, dict) else None
                items = value if isinstance(value, list) and len(value) == 2 else [value]
                for item in items:
                    yield (group, stage, name), item
    if "unroll_list" in block:
        unroll = block["unroll_list"]
        for item in unroll if isinstance(unroll, list) else [unroll]:
            yield ("unroll_list",), item


@rule("C-TILE-06", "error", "numbers", "C-TILE-06",
      "a tile value is not a compile-time positive integer",
      bad=('# opdesign: {q_tile: 64.5}\ndef my_kernel(q, k, v, attn_out, kv_lens):\n'
           "    for b_idx in pypto.loop(batch, name='batch'):\n"
           '        pypto.set_vec_tile_shapes(16, kv_lens[b_idx])   # a runtime length'),
      good=('# opdesign: {q_tile: 64}\ndef my_kernel(q, k, v, attn_out, kv_lens):\n'
            "    for b_idx in pypto.loop(batch, name='batch'):\n"
            '        pypto.set_vec_tile_shapes(16, 64)'), kind='pseudocode')
def check_integer_tiles(ctx: Context) -> Iterator[Hit]:
    """Tiles are compile-time integers: in the block every q_tile, kv_tile, cube ``[L0, L1]``, vector
    shape/view and unroll value is a positive integer (below 2**31); in the pseudocode the arguments of
    ``set_cube_tile_shapes`` / ``set_vec_tile_shapes`` are compile-time ints (literals, constants of
    any case such as ``v1_tile = [64, 512]`` then ``v1_tile[0]``, a Python int parameter), never
    runtime lengths read out of a tensor, dynamic axes, loop indices or symbolic scalars
    (``set_vec_tile_shapes`` silently takes the trace-time value of a symbolic scalar, PyPTO 0.2.0
    ``_controller.py``) (:mod:`opdesign.validate.analysis.values`; a value it cannot decide
    is not reported). ``enable_split_k`` (a bool) is no tile."""
    block = ctx.block or {}
    seen = set()
    for path, value in _tile_values(block):
        if bd.pos_int(value) is None and path not in seen:
            seen.add(path)
            yield Hit(ctx.block_line(*path), f"{'.'.join(map(str, path))} has {value!r}: tiles are positive integers")
    if ctx.program is None:
        return
    for call, node, _loops in ctx.program.calls():
        if call_name(call) not in ("set_cube_tile_shapes", "set_vec_tile_shapes"):
            continue
        args = [e for a in call.args for e in (getattr(a, "elts", None) or [a])]
        bad = [a for a in args if not (isinstance(a, ast.Constant) and isinstance(a.value, bool))
               and is_dynamic(ctx.program, a, declared_axes(ctx.front), node)]
        if bad:
            names = ", ".join(unparse(a) for a in bad)
            yield Hit(ctx.program.call_line(call, node), f"{call_name(call)} uses non-constant {names}")
