"""SK-01 performance-oriented form: its four conditions and its invariants.

Source: SK-01 card ``parameters`` (``perf_head_dims``, ``perf_root_range``,
``perf_q_tiles_per_head``, ``static_kv_max_tiles``, ``perf_scope``,
``perf_invariants`` SK-01-P1..P5) and domain.md §2 ("performance-oriented form
... breaking any one voids the form"). These rules apply when the block says
``skeleton: SK-01`` and ``form: performance``.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from opdesign.plan.tiles import align_up
from opdesign.skeletons.sk01 import card as sk01_card
from opdesign.skeletons.sk01.rules import applies
from opdesign.validate.analysis import blockdata as bd
from opdesign.validate.analysis.scopes import scopes
from opdesign.validate.api import Context, Hit, condition, rule
from opdesign.validate.parse.pseudocode import allocation, call_name


def _perf(ctx: Context) -> bool:
    return ctx.block is not None and applies(ctx) and ctx.block.get("form") == "performance"


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


for _n, _text in enumerate((
        "the K-side length is a uniform compile-time constant (no varying seq_kv dynamic axis)",
        "head_dim is one of the card's perf_head_dims",
        "the root count with Q_TILE = seq_q / 2 lies in the card's perf_root_range",
        "the SPEC's performance target (current_us / baseline_us) is more than perf_ratio_min",
), start=1):
    condition(f"SK-01-PERF-{_n}", f"performance form condition {_n}: {_text}; otherwise the safe baseline form",
              f"SK-01 card, choosing the form (condition {_n})", checked_by="OD-NUM-06")


@rule("OD-NUM-06", "error", "numbers", "SK-01 performance-oriented form, conditions 1-4",
      "performance form chosen although one of its four conditions fails",
      bad=('opdesign:\n  form: performance\n'
           '  form_checks: {SK-01-PERF-1: false, SK-01-PERF-2: true, SK-01-PERF-3: true, SK-01-PERF-4: true}'),
      good=('opdesign:\n  form: performance\n'
            '  form_checks: {SK-01-PERF-1: true, SK-01-PERF-2: true, SK-01-PERF-3: true, SK-01-PERF-4: true}'),
      needs_block=True, attention_only=True)
def check_form_conditions(ctx: Context) -> Iterator[Hit]:
    """The performance form needs all four: a uniform compile-time K length (no ``seq_kv`` dynamic
    axis that varies), head_dim in ``perf_head_dims``, root_count in ``perf_root_range``, and a target
    more than ``perf_ratio_min`` x from the baseline. Every ``form_checks`` entry must be true, and
    the first three are re-derived from the front matter; otherwise fall back to the safe baseline."""
    if not _perf(ctx):
        return
    block, card = ctx.block or {}, sk01_card()
    checks = block.get("form_checks")
    for cid, passed in checks.items() if isinstance(checks, dict) else []:
        if passed is not True:
            yield Hit(ctx.block_line("form_checks", str(cid)), f"performance form but {cid} is {passed!r}")
    head_dim, dims = bd.pos_int(block.get("head_dim")), card.param("perf_head_dims")
    if head_dim is not None and head_dim not in dims:
        yield Hit(ctx.block_line("head_dim"), f"performance form needs head_dim in {dims}, got {head_dim}")
    roots, (lo, hi) = bd.pos_int(block.get("root_count"), bd.MAX_COUNT), card.param("perf_root_range")
    if roots is not None and not lo <= roots <= hi:
        yield Hit(ctx.block_line("root_count"), f"performance form needs root_count in [{lo}, {hi}], got {roots}")
    axes = ctx.front.get("dynamic_axes")
    for i, axis in enumerate(axes if isinstance(axes, list) else []):
        if isinstance(axis, dict) and axis.get("name") == "seq_kv":
            rng = axis.get("range")
            varies = axis.get("uniform") is False or not (isinstance(rng, list) and len(rng) == 2 and rng[0] == rng[1])
            if varies:
                yield Hit(ctx.doc.front.line("dynamic_axes", i), "performance form needs a compile-time K length, "
                          "but seq_kv is a dynamic axis")


@rule("SK-01-P1", "error", "numbers", "SK-01-P1 (performance invariant 1)",
      "performance form: q_tile is not align16(ceil(seq_q / 2)), so a (batch, head) has more or fewer than 2 Q tiles",
      bad='opdesign:\n  form: performance\n  seq_q: 8192\n  q_tile: 2048   # four Q tiles per (batch, head)',
      good='opdesign:\n  form: performance\n  seq_q: 8192\n  q_tile: 4096   # align16(8192 / 2)',
      needs_block=True, attention_only=True)
def check_q_tile_half(ctx: Context) -> Iterator[Hit]:
    """``Q_TILE = seq_len_q / 2`` aligned up to the cube alignment of the dtype (C-TILE-05
    ``cube_align_elems``): at most ``perf_q_tiles_per_head`` Q tiles per (batch, head), no reuse of
    a small baseline tile. seq_q is the largest of the typical value and the dynamic range's hi."""
    if not _perf(ctx):
        return
    block = ctx.block or {}
    q_tile, seq_q = bd.pos_int(block.get("q_tile")), bd.axis_hi(ctx, "seq_q")
    dtype = block.get("dtype")
    align = bd.constraint("C-TILE-05").param("cube_align_elems").get(dtype) if isinstance(dtype, str) else None
    align = align or (bd.constraint("C-TILE-02").param("tail_align_elems").get(dtype, 1)
                      if isinstance(dtype, str) else 1)
    if q_tile is None or seq_q is None:
        return
    per_head = sk01_card().param("perf_q_tiles_per_head")
    want = align_up(_ceil_div(seq_q, per_head), align)
    if q_tile != want:
        yield Hit(ctx.block_line("q_tile"), f"performance form: q_tile {q_tile} != align{align}(ceil(seq_q {seq_q} / "
                                            f"{per_head})) = {want}")


@rule("SK-01-P2", "error", "pseudocode", "SK-01-P2 (performance invariant 2)",
      "performance form with <= 8 KV tiles: the K loop must be a static Python range without is_loop_begin/end",
      bad=("for kv_idx in pypto.loop(KV_TILES, name='kv_tile'):\n    if pypto.cond(pypto.is_loop_begin(kv_idx)):\n"
           '        oi = oij'),
      good='for kv_idx in range(KV_TILES):\n    if kv_idx == 0:\n        oi = oij',
      needs_block=True, attention_only=True)
def check_static_kv_loop(ctx: Context) -> Iterator[Hit]:
    """With ``k_tile_count = ceil(seq_kv / kv_tile) <= static_kv_max_tiles`` the block's ``kv_loop`` is
    ``range``, the pseudocode's KV-tile loop is a Python ``range`` and no ``is_loop_begin`` /
    ``is_loop_end`` predicate is used (the first tile is the Python condition ``kv_idx == 0``)."""
    if not _perf(ctx):
        return
    block = ctx.block or {}
    kv_tile, seq_kv = bd.pos_int(block.get("kv_tile")), bd.axis_hi(ctx, "seq_kv")
    limit = sk01_card().param("static_kv_max_tiles")
    if kv_tile is None or seq_kv is None or _ceil_div(seq_kv, kv_tile) > limit:
        return
    if block.get("kv_loop") != "range":
        yield Hit(ctx.block_line("kv_loop"), f"{_ceil_div(seq_kv, kv_tile)} KV tiles <= {limit}: kv_loop must be "
                                             f"'range', got {block.get('kv_loop')!r}")
    if ctx.program is None:
        return
    kv_loop, _q = ctx.program.kv_and_q_loops()
    if kv_loop is not None and kv_loop.loop_kind != "range":
        yield Hit(kv_loop.line, "performance form: the KV-tile loop must be a static Python range")
    for call, node, _loops in ctx.program.calls():
        if call_name(call) in ("is_loop_begin", "is_loop_end"):
            yield Hit(ctx.program.call_line(call, node), f"performance form: {call_name(call)} is not used "
                                                          "(static range, SSA state)")


@rule("SK-01-P3", "error", "pseudocode", "SK-01-P3 (performance invariant 3)",
      "performance form: accumulator held in an explicit buffer instead of SSA re-binding",
      bad=('oi = pypto.full([Q_TILE, HEAD_DIM], 0.0, pypto.DT_FP32)\nfor kv_idx in range(KV_TILES):\n'
           '    oi[:] = pypto.add(oi, oij)'),
      good=('for kv_idx in range(KV_TILES):\n    if kv_idx == 0:\n        oi = oij\n    else:\n'
            '        oi = pypto.add(pypto.mul(alpha, oi), pypto.mul(beta, oij))'),
      needs_block=True, attention_only=True)
def check_ssa_state(ctx: Context) -> Iterator[Hit]:
    """State is carried by SSA re-binding (first block ``oi = oij``): no ``pypto.full`` /
    ``pypto.tensor`` buffer for oi/li/mi and no ``oi[:] = ...`` writes (a resident buffer overflows UB)."""
    if not _perf(ctx) or ctx.program is None:
        return
    names = set(bd.accumulator_names(ctx))
    for node, _loops in ctx.program.walk():
        if allocation(node, names) is not None:
            yield Hit(node.line, "performance form: accumulator allocated as a resident buffer")
        s = node.stmt
        targets = getattr(s, "targets", None) or ([s.target] if isinstance(s, (ast.AugAssign, ast.AnnAssign)) else [])
        for t in targets:
            if isinstance(t, ast.Subscript) and isinstance(t.value, ast.Name) and t.value.id in names:
                yield Hit(node.line, f"performance form: {t.value.id}[...] written in place instead of re-bound")


@rule("SK-01-P4", "error", "pseudocode", "SK-01-P4 (performance invariant 4), AT-21",
      "performance form: the softmax chain is not inside sg_set_scope(6)",
      bad=('for kv_idx in range(KV_TILES):\n    pypto.set_pass_options(sg_set_scope=2)\n'
           '    mij = pypto.amax(sij, dim=-1, keepdim=True)\n    pypto.set_pass_options(sg_set_scope=-1)'),
      good=('for kv_idx in range(KV_TILES):\n    pypto.set_pass_options(sg_set_scope=6)\n'
            '    mij = pypto.amax(sij, dim=-1, keepdim=True)\n    pypto.set_pass_options(sg_set_scope=-1)'),
      needs_block=True, attention_only=True)
def check_chain_scope(ctx: Context) -> Iterator[Hit]:
    """The chain ``mul -> amax -> sub -> exp -> sum -> cast`` runs inside
    ``sg_set_scope(perf_scope)`` (checked at its ``amax``) and is closed with ``sg_set_scope(-1)``
    (the closing is OD-PC-03)."""
    if not _perf(ctx) or ctx.program is None:
        return
    want = sk01_card().param("perf_scope")
    info = scopes(ctx.program)
    for call, node, loops in ctx.program.calls():
        if call_name(call) == "amax" and loops and info.of_call.get(id(call)) != want:
            yield Hit(ctx.program.call_line(call, node),
                      f"performance form: amax runs in scope {info.of_call.get(id(call))}, "
                      f"expected sg_set_scope({want})")
