"""SK-02 rules: the single pass has no KV loop, no online state and no unroll; TileShapes are fixed
outside the loops; a token with ``cur_seq == 0`` is skipped with ``pypto.cond``.

The SK-02 rules apply when the design is an SK-02 one (:func:`blockdata.skeleton`: the ``opdesign:``
block says ``skeleton: SK-02``, or without a block the selection table lists SK-02). Sources: the
SK-02 card (``patterns/skeletons/SK-02-single-pass-attention.md``, rules R3, R5, R6), AT-02-R3 and domain.md §3 / §5.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from opdesign.plan import checks
from opdesign.skeletons.sk02 import ID
from opdesign.validate.analysis import astnodes
from opdesign.validate.analysis import blockdata as bd
from opdesign.validate.analysis.values import declared_axes, is_dynamic
from opdesign.validate.api import Context, Hit, condition, rule
from opdesign.validate.parse.pseudocode import Node, allocation, call_name, keyword

# Names that mark a KV-tile loop: a bound counting KV tiles, a loop name, or an index scaled by the KV tile.
KV_COUNT_NAMES = ("kv_tiles", "s2_tiles", "bn_per_batch")
KV_LOOP_NAMES = ("kv_tile", "s2")
KV_TILE_NAMES = ("KV_TILE", "S2_TILE")


def _sk02(ctx: Context) -> bool:
    return bd.skeleton(ctx) == ID


def _names(expr: ast.AST) -> list[str]:
    return [n.id for n in astnodes.walk(expr) if isinstance(n, ast.Name)]


def _is_kv_loop(ctx: Context, node: Node) -> bool:
    """A loop over KV tiles: its bound counts KV tiles, its ``name=`` says so, or its index is scaled by
    KV_TILE / S2_TILE."""
    it = node.stmt.iter if isinstance(node.stmt, (ast.For, ast.AsyncFor)) else None
    if not isinstance(it, ast.Call):
        return False
    bound = [n.lower() for a in it.args for n in _names(a)]
    if any(k in n for n in bound for k in KV_COUNT_NAMES):
        return True
    name = keyword(it, "name")
    if (isinstance(name, ast.Constant) and isinstance(name.value, str)
            and any(k in name.value.lower() for k in KV_LOOP_NAMES)):
        return True
    targets = {n.id for n in astnodes.walk(node.stmt.target) if isinstance(n, ast.Name)}
    for inner, _loops in ctx.program.walk(node.body):
        for expr in inner.exprs():
            for op in astnodes.walk(expr):
                if isinstance(op, ast.BinOp) and isinstance(op.op, ast.Mult):
                    sides = {n for side in (op.left, op.right) for n in _names(side)}
                    if sides & targets and any(k in s for s in sides for k in KV_TILE_NAMES):
                        return True
    return False


for _n, _text, _by in (
        (1, "topk is a compile-time constant and S2_TILE = align16(topk) >= topk (SK-02-R1)", "SK-02-R1"),
        (2, "keeping the whole top-k row resident, intermediates included, fits UB at some q_tile "
            "(SK-02-R2, C-TILE-03)",
         "SK-02-R1"),
        (3, "the row reductions amax / sum over dim=-1 span the column tiles within the C-TILE-04 expansion limit",
         "C-TILE-04"),
):
    condition(f"SK-02-COND-{_n}", f"SK-02 condition {_n}: {_text}; when one fails the SPEC is planned with SK-01",
              f"SK-02 card, parameters.conditions[{_n - 1}]", checked_by=_by)


@rule("SK-02-R3", "error", "pseudocode", "SK-02-R3 (AT-02-R3)",
      "an SK-02 single-pass design has a KV loop, online-softmax accumulators or an unroll",
      bad=("# opdesign: {skeleton: SK-02}\nfor kv_idx in pypto.loop(kv_tiles, name='kv_tile'):\n"
           '    oi = pypto.tensor([Q_TILE, HEAD_DIM], pypto.DT_FP32)\n'
           '    sij = pypto.matmul(qi, kj, pypto.DT_FP32, b_trans=True)'),
      good=('# opdesign: {skeleton: SK-02}\n'
            'sij = pypto.matmul(qi, kj, pypto.DT_FP32, b_trans=True)   # once per root: S2_TILE >= topk'),
      attention_only=True)
def check_single_pass(ctx: Context) -> Iterator[Hit]:
    """C1, V1 and C2 run once per root with a standard softmax (AT-02): no KV loop (the block's
    ``kv_loop`` is ``none``; no pseudocode loop whose bound counts KV tiles, whose ``name=`` is a KV
    tile, or whose index is scaled by ``KV_TILE`` / ``S2_TILE``), no online state (the block's
    ``accumulators`` is empty; no oi / li / mi allocation or assignment, no ``is_loop_begin`` /
    ``is_loop_end``) and no unroll (the block's ``unroll_list`` is empty; no ``loop_unroll``, no
    ``unroll_list=``). Leftover online state costs UB and branches and rounds differently."""
    if not _sk02(ctx):
        return
    if ctx.block is not None:
        yield from bd.hits(ctx, checks.no_kv_loop_state(ctx.block))
    if ctx.program is None:
        return
    names = set(bd.catalog().card("SK-01").param("accumulators"))
    for node, _loops in ctx.program.walk():
        if node.loop_kind is not None:
            it = node.stmt.iter
            if node.loop_kind == "loop_unroll" or keyword(it, "unroll_list") is not None:
                yield Hit(node.line, f"{ast.unparse(it)}: SK-02 uses no loop_unroll / unroll_list")
            elif _is_kv_loop(ctx, node):
                yield Hit(node.line, f"KV-tile loop over {ast.unparse(it)}: SK-02 covers the top-k row in one pass")
        calls = {call_name(c) for c in node.calls()}
        if calls & {"is_loop_begin", "is_loop_end"}:
            yield Hit(node.line, "is_loop_begin / is_loop_end: SK-02 has no online-softmax branch")
        targets = [t.value if isinstance(t, ast.Subscript) else t for t in getattr(node.stmt, "targets", None) or []]
        hit = [t.id for t in targets if isinstance(t, ast.Name) and t.id in names]
        if hit or allocation(node, names) is not None:
            yield Hit(node.line, f"accumulator {(hit or ['oi/li/mi'])[0]}: SK-02 carries no online state")


@rule("SK-02-R1", "error", "numbers", "SK-02-R1, SK-02-R2 (C-TILE-03)",
      "an SK-02 design's KV tile does not cover the whole top-k row, or its UB total exceeds the capacity",
      bad=('opdesign:\n  skeleton: SK-02\n  kv_tile: 1024\n  vec_tiles:\n'
           '    V1: {shape: [8, 128], dtype: fp32, view: [8, 2048]}\n'
           '    V2: {shape: [8, 128], dtype: fp32, view: [8, 128]}'),
      good=('opdesign:\n  skeleton: SK-02\n  kv_tile: 2048\n  vec_tiles:\n'
            '    V1: {shape: [8, 128], dtype: fp32, view: [8, 2048]}\n'
            '    V2: {shape: [8, 128], dtype: fp32, view: [8, 128]}'),
      needs_block=True, attention_only=True)
def check_whole_row(ctx: Context) -> Iterator[Hit]:
    """One pass covers the whole top-k row: ``S2_TILE`` (the block's ``kv_tile``) is at least the
    columns of V1's view (the ``[q_tile, topk]`` score row), and everything resident fits UB (the
    stated ``ub_budget.total_bytes`` within its capacity). Otherwise the design belongs to SK-01."""
    if _sk02(ctx):
        yield from bd.hits(ctx, checks.whole_row_fits(ctx.block or {}))


@rule("SK-02-R5", "error", "pseudocode", "SK-02-R5 (C-TILE-06); PyPTO 0.2.0 per-stage TileShapes",
      "an SK-02 design sets a TileShape from a runtime value inside a loop",
      bad=("# opdesign: {skeleton: SK-02}\nfor b_idx in pypto.loop(batch, name='batch'):\n"
           '    pypto.set_vec_tile_shapes(cur_seq, 128)'),
      good=("# opdesign: {skeleton: SK-02}\nfor b_idx in pypto.loop(batch, name='batch'):\n"
            '    pypto.set_vec_tile_shapes(8, 128)'), attention_only=True)
def check_tiles_outside_loops(ctx: Context) -> Iterator[Hit]:
    """The card (SK-02-R5) asks for the TileShapes to be set once, outside the loop, with compile-time
    values, so that they cannot drift between iterations or depend on runtime values (its consequence:
    C-TILE-06). A TileShape inside a loop that takes a value which can change per iteration (a loop
    index, a runtime length: :mod:`opdesign.validate.analysis.values`) is reported.

    Compile-time TileShapes set inside the loop are where the card's wording and real code disagree,
    and they are not reported: PyPTO 0.2.0 applies a TileShape to the ops that follow it, and real
    single-pass kernels switch constant TileShapes per stage inside the loop body (hicann/pypto
    ``sparse_compress_flash_attention_impl.py``, ``win_attention_impl.py``); opdesign's generated
    SK-02 kernel does too, because a gather tiled with the V1 tile failed the 0.2.0 SIM with F7A001.
    Constant values cannot drift, so the card's consequence does not arise; lower-case int constants
    (``v1_tile = [8, 2048]``) count as constant."""
    if not _sk02(ctx) or ctx.program is None:
        return
    for call, node, loops in ctx.program.calls():
        if call_name(call) in ("set_cube_tile_shapes", "set_vec_tile_shapes") and loops:
            values = [e for a in call.args for e in (a.elts if isinstance(a, (ast.List, ast.Tuple)) else [a])]
            runtime = [ast.unparse(v) for v in values if is_dynamic(ctx.program, v, declared_axes(ctx.front), node)]
            if runtime:
                yield Hit(ctx.program.call_line(call, node),
                          f"{call_name(call)} inside the loop at line {loops[-1].line} takes {', '.join(runtime)}: "
                          "SK-02 TileShapes are compile-time values that do not change between iterations")


@rule("SK-02-R6", "error", "pseudocode", "SK-02-R6; PyPTO 0.2.0 control flow",
      "an SK-02 design runs the pass without a skip for cur_seq == 0",
      bad=('# opdesign: {skeleton: SK-02}\ncur_seq = (kv_len - seq_q + 1 + s_idx).max(0).min(TOPK)\n'
           'sij = pypto.matmul(qi, kj, pypto.DT_FP32, b_trans=True)'),
      good=('# opdesign: {skeleton: SK-02}\ncur_seq = (kv_len - seq_q + 1 + s_idx).max(0).min(TOPK)\nif cur_seq > 0:\n'
            '    sij = pypto.matmul(qi, kj, pypto.DT_FP32, b_trans=True)'), attention_only=True)
def check_empty_skip(ctx: Context) -> Iterator[Hit]:
    """The first matmul of the pass sits under an ``if`` on the token's effective top-k: a token whose
    ``cur_seq`` is 0 skips the pass, and its rows keep the zeros the output was allocated with.
    Without the skip the softmax of an empty row divides 0 by 0 and writes NaN. The card writes the
    test as ``pypto.cond(...)``; in PyPTO 0.2.0 ``if pypto.cond(x):`` fails to parse in a jit body
    ("Test condition must be a symbolic scalar or boolean") and a plain ``if cur_seq > 0:`` on the
    symbolic scalar is the working form, so both are accepted."""
    if not _sk02(ctx) or ctx.program is None:
        return
    for node, _loops in ctx.program.walk():
        if any(call_name(c) == "matmul" for c in node.calls()):
            if not _under_cond(ctx, node):
                yield Hit(node.line, "the first matmul runs without a cur_seq == 0 skip (`if cur_seq > 0:`) around it")
            return


def _under_cond(ctx: Context, target: Node) -> bool:
    """True when ``target`` is nested in an ``if`` whose test calls ``pypto.cond`` or compares a value."""
    def visit(nodes: list[Node], inside: bool) -> bool | None:
        for node in nodes:
            if node is target:
                return inside
            here = inside or (isinstance(node.stmt, ast.If) and (
                isinstance(node.stmt.test, ast.Compare) or any(call_name(c) == "cond" for c in node.calls())))
            found = visit(node.body, here)
            if found is not None:
                return found
        return None

    return bool(visit(ctx.program.nodes, False))
