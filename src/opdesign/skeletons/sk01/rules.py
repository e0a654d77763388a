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

from opdesign.plan import checks
from opdesign.skeletons.sk01 import ID
from opdesign.validate.analysis import astnodes
from opdesign.validate.analysis import blockdata as bd
from opdesign.validate.api import Context, Hit, rule
from opdesign.validate.parse.pseudocode import allocation, call_name, int_value

VECTOR_OPS = frozenset({"mul", "muls", "amax", "amin", "rowmax", "rowsum", "sub", "exp", "sum", "softmax", "cast",
                        "div", "maximum", "minimum", "add", "where", "causal_fill", "reciprocal", "neg"})


def applies(ctx: Context) -> bool:
    """SK-01 rules apply: the skeleton is SK-01, or unknown (a hand-written design without a selection)."""
    return bd.skeleton(ctx) in (None, ID)


@rule("SK-01-R1", "error", "pseudocode", "SK-01-R1",
      "a stage runs without its own TileShape: set_cube_tile_shapes before each matmul, set_vec_tile_shapes "
      "before the vector chain (a TileShape carried over from another stage: a warning unless the block says "
      "the stages differ)",
      bad=('# opdesign: {skeleton: SK-01, cube_tiles: {C1: {m: [128, 128], k: [128, 128], n: [128, 128], '
           'operand_dtype: bf16}, C2: {m: [128, 128], k: [128, 256], n: [128, 128], operand_dtype: bf16}}}\n'
           'pypto.set_cube_tile_shapes([128, 128], [128, 128], [128, 128])\n'
           'sij = pypto.matmul(qi, kj, pypto.DT_FP32, b_trans=True)\npypto.set_vec_tile_shapes(16, 128)\n'
           'pij_c = pypto.cast(pypto.exp(sij), pypto.DT_BF16)\noij = pypto.matmul(pij_c, vj, pypto.DT_FP32)'),
      good=('# opdesign: {skeleton: SK-01, cube_tiles: {C1: {m: [128, 128], k: [128, 128], n: [128, 128], '
            'operand_dtype: bf16}, C2: {m: [128, 128], k: [128, 256], n: [128, 128], operand_dtype: bf16}}}\n'
            'pypto.set_cube_tile_shapes([128, 128], [128, 128], [128, 128])\n'
            'sij = pypto.matmul(qi, kj, pypto.DT_FP32, b_trans=True)\npypto.set_vec_tile_shapes(16, 128)\n'
            'pij_c = pypto.cast(pypto.exp(sij), pypto.DT_BF16)\n'
            'pypto.set_cube_tile_shapes([128, 128], [128, 256], [128, 128])\n'
            'oij = pypto.matmul(pij_c, vj, pypto.DT_FP32)'), attention_only=True)
def check_tile_switch(ctx: Context) -> Iterator[Hit]:
    """A cube TileShape and a vector TileShape are two separate settings in PyPTO 0.2.0
    (``set_cube_tile_shapes`` and ``set_vec_tile_shapes`` write different keys, ``pypto/_controller.py``):
    each stays in force until the next call of its own kind. In textual order, each function is
    checked on its own; a helper function without a TileShape call of a kind takes its caller's.

    - A matmul with no cube TileShape set before it, or the first vector op after a matmul with no
      vector TileShape set before it, is an error (the stage runs on the default tile).
    - The card (SK-01-R1) asks for ``set_cube_tile_shapes`` again before C2 and ``set_vec_tile_shapes``
      before each vector stage; real kernels set one cube TileShape for C1 and C2, or one vector
      TileShape for V1 and V2, when the shapes match (hicann/pypto ``flash_attention_mha_impl.py``).
      A stage that runs on a TileShape set for another stage is therefore an error only when the
      block's ``cube_tiles`` / ``vec_tiles`` say that stage needs a different tile than the one in
      force; without a block to say, it is a warning (reported once per function and kind); when the
      tile in force is the stage's tile there is nothing to report.

    Applies to SK-01 designs (SK-02 sets its TileShapes once outside the loops)."""
    if ctx.program is None or not applies(ctx):
        return
    cube_want, vec_want = bd.cube_tiles(ctx) or {}, bd.vec_tiles(ctx) or {}
    for unit, is_helper in _units(ctx.program):
        yield from _tile_switch(ctx, unit, is_helper, cube_want, vec_want)


def _units(program) -> Iterator[tuple[list, bool]]:
    """(statements, is a helper) per top-level function, then the top-level statements outside them."""
    loose = []
    for node in program.nodes:
        if node.kind == "def":
            yield node.body, node is not program.kernel
        else:
            loose.append(node)
    if loose:
        yield loose, False


def _ints(expr: Any, constants: dict[str, int]) -> tuple | None:
    """``[128, 256]`` -> ``(128, 256)`` (nested lists too); None unless every item is a known int."""
    if isinstance(expr, (ast.List, ast.Tuple)):
        items = [_ints(e, constants) for e in expr.elts]
        return None if None in items else tuple(items)
    return int_value(expr, constants)


def _tile_switch(ctx: Context, unit: list, is_helper: bool, cube_want: dict, vec_want: dict) -> Iterator[Hit]:
    program = ctx.program
    calls = [(c, n) for n, _loops in program.walk(unit) for c in n.calls()]
    names = {call_name(c) for c, _n in calls}
    check_cube = not is_helper or "set_cube_tile_shapes" in names
    check_vec = not is_helper or "set_vec_tile_shapes" in names
    cube = vec = None  # (values or None, fresh since the last stage)
    stage, need_vec, warned = 0, False, set()
    for call, node in calls:
        name = call_name(call)
        line = program.call_line(call, node)
        if name == "set_cube_tile_shapes":
            cube = (_ints(ast.List(elts=call.args[:3], ctx=ast.Load()), program.constants), True)
        elif name == "set_vec_tile_shapes":
            vec = (_ints(ast.List(elts=list(call.args), ctx=ast.Load()), program.constants), True)
        elif name == "matmul":
            stage += 1
            need_vec = True
            if not check_cube:
                continue
            if cube is None:
                yield Hit(line, f"matmul C{stage} has no set_cube_tile_shapes before it")
            elif not cube[1]:
                want = cube_want.get(f"C{stage}")
                yield from _carried(line, f"matmul C{stage}", "set_cube_tile_shapes", cube[0],
                                    (want.m, want.k, want.n) if want else None, "cube", warned)
            cube = (cube[0], False) if cube else None
        elif name in VECTOR_OPS and need_vec:
            need_vec = False
            if not check_vec:
                continue
            if vec is None:
                yield Hit(line, f"vector op {name} after matmul C{stage} has no set_vec_tile_shapes before it")
            elif not vec[1]:
                want = vec_want.get(f"V{stage}")
                yield from _carried(line, f"vector op {name} after matmul C{stage}", "set_vec_tile_shapes", vec[0],
                                    want.shape if want else None, "vec", warned)
            vec = (vec[0], False) if vec else None


def _carried(line: int, what: str, setter: str, in_force: tuple | None, want: tuple | None, kind: str,
             warned: set) -> Iterator[Hit]:
    """A stage running on a TileShape set for an earlier stage (see :func:`check_tile_switch`)."""
    if in_force is not None and want is not None:
        if in_force != want:
            yield Hit(line, f"{what} runs with the TileShape {list(in_force)} set for an earlier stage, but the "
                            f"block's tile for it is {list(want)}: call {setter} before it")
        return
    if kind not in warned:
        warned.add(kind)
        yield Hit(line, f"{what} reuses the TileShape of an earlier stage: SK-01-R1 asks for {setter} per stage, "
                        "real kernels reuse one when the shapes match; check that they do", level="warning")


@rule("SK-01-R2", "error", "pseudocode", "SK-01-R2 (C-LOOP-06)",
      "accumulators oi/li/mi are not allocated inside the Q-tile loop and outside the KV-tile loop",
      bad=("for q_idx in pypto.loop(q_tiles, name='q_tile'):\n"
           "    for kv_idx in pypto.loop(kv_tiles, name='kv_tile'):\n"
           '        oi = pypto.tensor([Q_TILE, HEAD_DIM], pypto.DT_FP32)   # reset every KV tile\n'
           '        oij = pypto.matmul(pij_c, vj, pypto.DT_FP32)'),
      good=("for q_idx in pypto.loop(q_tiles, name='q_tile'):\n"
            '    oi = pypto.tensor([Q_TILE, HEAD_DIM], pypto.DT_FP32)\n'
            "    for kv_idx in pypto.loop(kv_tiles, name='kv_tile'):\n"
            '        oij = pypto.matmul(pij_c, vj, pypto.DT_FP32)'), attention_only=True)
def check_accumulator_placement(ctx: Context) -> Iterator[Hit]:
    """An accumulator buffer (``pypto.tensor`` / ``full`` / ``zeros`` assigned to oi, li or mi) is
    allocated in the Q-tile loop, outside the KV-tile loop: inside the KV loop it is reset every tile,
    outside the Q loop it leaks state between Q tiles. SSA re-binding (performance form) allocates nothing.
    The second half needs a Q-tile loop: a decode kernel whose KV loop sits directly in a batch or head
    loop (named so: ``LOOP_b``, ``h_idx``) has none, and only the first half applies (:func:`q_tile_loop`).
    SK-01 designs only (a block naming another skeleton is skipped)."""
    if ctx.program is None or not applies(ctx):
        return
    kv, q = ctx.program.kv_and_q_loops()
    if kv is None:
        return
    q = q_tile_loop(ctx.program, kv, q)
    names = set(bd.accumulator_names(ctx))
    for node, loops in ctx.program.walk():
        if allocation(node, names) is None:
            continue
        if kv in loops:
            yield Hit(node.line, f"accumulator allocated inside the KV-tile loop (line {kv.line}): reset every tile")
        elif q is not None and q not in loops:
            yield Hit(node.line, "accumulator allocated outside the Q-tile loop: state leaks between Q tiles")


def q_tile_loop(program, kv, parent):
    """The Q-tile loop around the KV-tile loop: the loop directly around it unless its name, index or bound
    says it is a batch / head / KV loop (a decode kernel has no Q-tile loop: its KV loop sits in the batch
    or head loop), else the nearest enclosing loop that says Q tile; None when there is none."""
    from opdesign.validate.analysis.loops import loop_role

    if parent is None:
        return None
    if loop_role(parent) in (None, "q"):
        return parent
    enclosing = next((loops for node, loops in program.walk() if node is kv), ())
    return next((loop for loop in reversed(enclosing) if loop_role(loop) == "q"), None)


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
            '        oi[:] = pypto.add(pypto.mul(alpha, oi), pypto.mul(beta, oij))'), attention_only=True)
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
      good='opdesign:\n  accumulators: {mi: fp32, li: fp32, oi: fp32}', attention_only=True)
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
    return [n.attr for n in astnodes.walk(call) if isinstance(n, ast.Attribute) and n.attr.startswith("DT_")]


@rule("AT-17-R4", "error", "pseudocode", "AT-17-R4 (when: SK-01; SK-02's gather_in_ub of [1, topk] is allowed)",
      "an SK-01 design replaces the view + assemble page gather with gather_in_l1 / gather_in_ub "
      "(a warning when the design selects top-k rows or does not say)",
      bad=('# opdesign: {skeleton: SK-01, kv_cache: paged}\n'
           'kj = pypto.gather_in_ub(k_cache, idx, block_table, BLOCK_SIZE, -2)'),
      good=('# opdesign: {skeleton: SK-01, kv_cache: paged}\nfor i in range(PAGES_PER_TILE):\n'
            '    page = block_table[b_idx, kv_idx * PAGES_PER_TILE + i].max(0)\n'
            '    pypto.assemble(pypto.view(k_cache, [BLOCK_SIZE, HEAD_DIM], [page, 0]), [i * BLOCK_SIZE, 0], kbuf)'),
      attention_only=True)
def check_sk01_gather(ctx: Context) -> Iterator[Hit]:
    """SK-01's paged variants are built on the zero-copy ``view`` + ``assemble`` page gather of AT-17;
    a ``gather_in_l1`` / ``gather_in_ub`` there leaves that path. The card and real kernels agree for
    a dense paged cache (hicann/pypto ``glm_attention.py`` assembles its pages with views), so a
    design whose ``opdesign:`` block has a mask other than ``topk`` gets an error.

    They disagree for top-k row selection: real SK-01-shaped sparse kernels with an online KV loop
    load their selected rows with ``gather_in_ub`` / ``gather_in_l1`` inside the loop (hicann/pypto
    ``sparse_flash_attention_quant_impl.py``, ``sparse_compress_flash_attention_impl.py``), because
    scattered rows have no page to view. With ``mask: topk``, or without a block to say, the finding
    is a warning citing both. The prohibition is SK-01's only: an SK-02 design loads its top-k rows
    with one ``gather_in_ub`` of ``[1, topk]`` (SK-02-R8), and a design whose skeleton is unknown is
    not judged."""
    if bd.skeleton(ctx) != ID or ctx.program is None:
        return
    forbidden = set(bd.catalog().card("AT-17").param("forbidden_in_sk01"))
    mask = (ctx.block or {}).get("mask")
    dense = ctx.block is not None and isinstance(mask, str) and mask != "topk"
    for call, node, _loops in ctx.program.calls():
        if call_name(call) not in forbidden:
            continue
        line = ctx.program.call_line(call, node)
        if dense:
            yield Hit(line, f"{call_name(call)} in an SK-01 design with mask {mask}: use the AT-17 view + assemble "
                            "page gather")
        else:
            yield Hit(line, f"{call_name(call)} in an SK-01 design: AT-17-R4 wants the view + assemble page gather; "
                            "real sparse top-k kernels gather selected rows this way, so check that rows, not pages, "
                            "are loaded", level="warning")


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
