"""SK-01 rules on the pseudocode and the block: a TileShape per stage (R1), accumulators placed in
the Q-tile loop (R2), the three-way branch of a dynamic KV loop (R3), FP32 state (R6), and AT-17-R4
(no ``gather_in_*`` in an SK-01 page gather).

R1-R3 apply to SK-01 designs and to designs whose skeleton is unknown (:func:`applies`);
AT-17-R4 to SK-01 designs only. Sources: the SK-01 card
(``patterns/skeletons/SK-01-online-flash-attention.md``), AT-01, AT-17, C-LOOP-06, C-API-05.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from typing import Any

from opdesign.skeletons.sk01 import ID
from opdesign.plan import checks
from opdesign.validate import blockdata as bd
from opdesign.validate.pseudocode import allocation, call_name
from opdesign.validate.registry import Context, Hit, rule

VECTOR_OPS = frozenset({"mul", "muls", "amax", "amin", "rowmax", "rowsum", "sub", "exp", "sum", "softmax", "cast",
                        "div", "maximum", "minimum", "add", "where", "causal_fill", "reciprocal", "neg"})


def applies(ctx: Context) -> bool:
    """SK-01 rules apply: the skeleton is SK-01, or unknown (a hand-written design without a selection)."""
    return bd.skeleton(ctx) in (None, ID)


@rule("SK-01-R1", "error", "pseudocode", "SK-01-R1",
      "a stage runs without its own TileShape: set_cube_tile_shapes before each matmul, set_vec_tile_shapes "
      "before the vector chain",
      bad=('pypto.set_cube_tile_shapes([128, 128], [128, 128], [128, 128])\n'
           'sij = pypto.matmul(qi, kj, pypto.DT_FP32, b_trans=True)\npypto.set_vec_tile_shapes(16, 64)\n'
           'pij_c = pypto.cast(pypto.exp(sij), pypto.DT_BF16)\noij = pypto.matmul(pij_c, vj, pypto.DT_FP32)'),
      good=('pypto.set_cube_tile_shapes([128, 128], [128, 128], [128, 128])\n'
            'sij = pypto.matmul(qi, kj, pypto.DT_FP32, b_trans=True)\npypto.set_vec_tile_shapes(16, 64)\n'
            'pij_c = pypto.cast(pypto.exp(sij), pypto.DT_BF16)\n'
            'pypto.set_cube_tile_shapes([128, 128], [128, 128], [128, 128])\n'
            'oij = pypto.matmul(pij_c, vj, pypto.DT_FP32)'))
def check_tile_switch(ctx: Context) -> Iterator[Hit]:
    """In textual order, the TileShape in force at each matmul was set by ``set_cube_tile_shapes``, and
    at the first vector op after a matmul (the softmax chain of V1, the state update of V2) by
    ``set_vec_tile_shapes``. One global setting for all stages makes vector ops tile with cube shapes
    (or the reverse) and blows the expression limit (C-TILE-04). Applies to SK-01 designs (SK-02 sets
    its TileShapes once outside the loops)."""
    if ctx.program is None or not applies(ctx):
        return
    last, stage, need_vec = None, 0, False
    for call, node, _loops in ctx.program.calls():
        name = call_name(call)
        if name == "set_cube_tile_shapes":
            last = "cube"
        elif name == "set_vec_tile_shapes":
            last = "vec"
        elif name == "matmul":
            stage += 1
            if last != "cube":
                yield Hit(ctx.program.call_line(call, node), f"matmul C{stage} has no set_cube_tile_shapes before it "
                                                             f"(TileShape in force: {last or 'none'})")
            need_vec = True
        elif name in VECTOR_OPS and need_vec:
            need_vec = False
            if last != "vec":
                yield Hit(ctx.program.call_line(call, node), f"vector op {name} after matmul C{stage} has no "
                                                             f"set_vec_tile_shapes before it")


@rule("SK-01-R2", "error", "pseudocode", "SK-01-R2 (C-LOOP-06)",
      "accumulators oi/li/mi are not allocated inside the Q-tile loop and outside the KV-tile loop",
      bad=("for q_idx in pypto.loop(q_tiles, name='q_tile'):\n"
           "    for kv_idx in pypto.loop(kv_tiles, name='kv_tile'):\n"
           '        oi = pypto.tensor([Q_TILE, HEAD_DIM], pypto.DT_FP32)   # reset every KV tile\n'
           '        oij = pypto.matmul(pij_c, vj, pypto.DT_FP32)'),
      good=("for q_idx in pypto.loop(q_tiles, name='q_tile'):\n"
            '    oi = pypto.tensor([Q_TILE, HEAD_DIM], pypto.DT_FP32)\n'
            "    for kv_idx in pypto.loop(kv_tiles, name='kv_tile'):\n"
            '        oij = pypto.matmul(pij_c, vj, pypto.DT_FP32)'))
def check_accumulator_placement(ctx: Context) -> Iterator[Hit]:
    """An accumulator buffer (``pypto.tensor`` / ``full`` / ``zeros`` assigned to oi, li or mi) is
    allocated in the Q-tile loop, outside the KV-tile loop: inside the KV loop it is reset every tile,
    outside the Q loop it leaks state between Q tiles. SSA re-binding (performance form) allocates nothing.
    SK-01 designs only (a block naming another skeleton is skipped)."""
    if ctx.program is None or not applies(ctx):
        return
    kv, q = ctx.program.kv_and_q_loops()
    if kv is None:
        return
    names = set(bd.accumulator_names(ctx))
    for node, loops in ctx.program.walk():
        if allocation(node, names) is None:
            continue
        if kv in loops:
            yield Hit(node.line, f"accumulator allocated inside the KV-tile loop (line {kv.line}): reset every tile")
        elif q is None or q not in loops:
            yield Hit(node.line, "accumulator allocated outside the Q-tile loop: state leaks between Q tiles")


def _carries_state(ctx: Context, kv) -> bool:
    names = set(bd.accumulator_names(ctx))
    for node, loops in ctx.program.walk():
        if kv in loops:
            targets = getattr(node.stmt, "targets", []) or []
            for t in targets:
                base = t.value if isinstance(t, ast.Subscript) else t
                if isinstance(base, ast.Name) and base.id in names:
                    return True
    return False


@rule("SK-01-R3", "error", "pseudocode", "SK-01-R3 (AT-01-R2)",
      "the dynamic KV-tile loop has no is_loop_begin / is_loop_end three-way branch",
      bad=("for kv_idx in pypto.loop(kv_tiles, name='kv_tile'):\n    oij = pypto.matmul(pij_c, vj, pypto.DT_FP32)\n"
           '    oi[:] = pypto.add(pypto.mul(alpha, oi), pypto.mul(beta, oij))'),
      good=("for kv_idx in pypto.loop(kv_tiles, name='kv_tile'):\n    oij = pypto.matmul(pij_c, vj, pypto.DT_FP32)\n"
            '    if pypto.cond(pypto.is_loop_begin(kv_idx)):\n        oi[:] = oij\n'
            '    elif pypto.cond(pypto.is_loop_end(kv_idx)):\n'
            '        oi[:] = pypto.div(pypto.add(pypto.mul(alpha, oi), pypto.mul(beta, oij)), li)\n    else:\n'
            '        oi[:] = pypto.add(pypto.mul(alpha, oi), pypto.mul(beta, oij))'))
def check_three_way_branch(ctx: Context) -> Iterator[Hit]:
    """The baseline form (or, without the block, a ``pypto.loop`` / ``loop_unroll`` KV loop that
    carries oi/li/mi) branches three ways on ``is_loop_begin`` / ``is_loop_end``: only tile, first
    tile, later tiles. The performance form drops the branch instead (SK-01-P2)."""
    program = ctx.program
    if program is None:
        return
    kv, _q = program.kv_and_q_loops()
    if kv is None:
        return
    if ctx.block is not None:
        if not applies(ctx) or ctx.form != "baseline":
            return
    elif not applies(ctx) or kv.loop_kind not in ("pypto.loop", "loop_unroll") or not _carries_state(ctx, kv):
        return
    used = {call_name(c) for c, _n, loops in program.calls() if kv in loops}
    missing = [p for p in ("is_loop_begin", "is_loop_end") if p not in used]
    if missing and kv.loop_kind == "loop_unroll" and len(_index_tests(program, kv)) >= 2:
        missing = []  # an unrolled KV loop branches on the tile index (``kj == kv_begin``, ``kj == kv_end - 1``)
    if missing:
        yield Hit(kv.line, f"KV-tile loop has no three-way branch: {' and '.join(missing)} not used")


@rule("SK-01-R6", "error", "numbers", "SK-01-R6 (AT-01-R1, C-API-05)",
      "an online-softmax accumulator (oi / li / mi) is not FP32",
      bad='opdesign:\n  accumulators: {mi: fp32, li: fp32, oi: bf16}',
      good='opdesign:\n  accumulators: {mi: fp32, li: fp32, oi: fp32}')
def check_fp32_state(ctx: Context) -> Iterator[Hit]:
    """O, L and M stay FP32 across the whole KV loop; only the final normalised output is cast.
    Checked in the block's ``accumulators``, the dtype column of the state table, and the dtype of
    accumulator allocations in the pseudocode (``pypto.tensor([...], pypto.DT_BF16)``)."""
    yield from bd.hits(ctx, checks.fp32_accumulators(ctx.block or {}))
    names = set(bd.accumulator_names(ctx))
    for table in ctx.doc.tables:
        first = table.header[0].casefold() if table.header else ""
        col = table.column("dtype", "数据类型", "类型")
        if table.chapter != "decisions" or not first.startswith(("state", "状态")) or col is None:
            continue
        for row in table.rows:
            is_acc = row.cells and row.cells[0].strip("` ") in names and col < len(row.cells)
            if is_acc and not bd.is_fp32(row.cells[col].strip("` ")):
                yield Hit(row.line, f"state {row.cells[0]} has dtype {row.cells[col]!r}, not fp32")
    if ctx.program is None:
        return
    for node, _loops in ctx.program.walk():
        alloc = allocation(node, names)
        if alloc:
            dtypes = [d for d in _dt_names(alloc) if d != "DT_FP32"]
            if dtypes:
                yield Hit(node.line, f"accumulator allocated as {dtypes[0]}, not DT_FP32")


def _dt_names(call: Any) -> list[str]:
    return [n.attr for n in ast.walk(call) if isinstance(n, ast.Attribute) and n.attr.startswith("DT_")]


@rule("AT-17-R4", "error", "pseudocode", "AT-17-R4 (when: SK-01; SK-02's gather_in_ub of [1, topk] is allowed)",
      "an SK-01 design replaces the view + assemble page gather with gather_in_l1 / gather_in_ub",
      bad=('# opdesign: {skeleton: SK-01, kv_cache: paged}\n'
           'kj = pypto.gather_in_ub(k_cache, idx, block_table, BLOCK_SIZE, -2)'),
      good=('# opdesign: {skeleton: SK-01, kv_cache: paged}\nfor i in range(PAGES_PER_TILE):\n'
            '    page = block_table[b_idx, kv_idx * PAGES_PER_TILE + i].max(0)\n'
            '    pypto.assemble(pypto.view(k_cache, [BLOCK_SIZE, HEAD_DIM], [page, 0]), [i * BLOCK_SIZE, 0], kbuf)'))
def check_sk01_gather(ctx: Context) -> Iterator[Hit]:
    """SK-01's paged variants are built on the zero-copy ``view`` + ``assemble`` gather of AT-17; a
    ``gather_in_l1`` / ``gather_in_ub`` there leaves that path. The prohibition is SK-01's only: an
    SK-02 design loads its top-k rows with one ``gather_in_ub`` of ``[1, topk]`` (SK-02-R8), and a
    design whose skeleton is unknown is not judged."""
    if bd.skeleton(ctx) != ID or ctx.program is None:
        return
    forbidden = set(bd.catalog().card("AT-17").param("forbidden_in_sk01"))
    for call, node, _loops in ctx.program.calls():
        if call_name(call) in forbidden:
            yield Hit(ctx.program.call_line(call, node), f"{call_name(call)} in an SK-01 design: use the AT-17 "
                                                         "view + assemble page gather")


def _index_tests(program, kv) -> set[str]:
    """Distinct ``if <name> == <expr>`` tests inside the KV loop: the first / last tile tests of an
    unrolled loop, where ``is_loop_begin`` cannot name the tile index ``base + u``."""
    tests = set()
    for node, loops in program.walk():
        s = node.stmt
        if kv in loops and isinstance(s, ast.If) and isinstance(s.test, ast.Compare) \
                and len(s.test.ops) == 1 and isinstance(s.test.ops[0], ast.Eq) and isinstance(s.test.left, ast.Name):
            tests.add(ast.unparse(s.test))
    return tests
