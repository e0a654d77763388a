"""SK-01 variant rules: a paged design gathers its pages (SK-01-R7, AT-17) and an FP8 design
quantises P before C2 and dequantises after it (SK-01-R8, AT-08 / AT-06).

Both apply to SK-01 designs whose ``opdesign:`` block says ``kv_cache: paged`` or ``quant: fp8``.
They check the block's ``atoms`` and the kernel pseudocode: for R7 a read of ``block_table`` and a
``view`` of a ``*cache`` tensor; for R8 a ``cast`` to an FP8 dtype between the two matmuls (C1, C2)
and a scale multiply or divide after the second one. Sources: the SK-01 card rules R7 and R8, AT-17,
AT-08, AT-06 (domain.md §2, §5).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from opdesign.skeletons.sk01 import ID
from opdesign.validate.analysis import astnodes
from opdesign.validate.analysis import blockdata as bd
from opdesign.validate.api import Context, Hit, rule
from opdesign.validate.parse.pseudocode import call_name


def _applies(ctx: Context, key: str, value: str) -> bool:
    return ctx.block is not None and bd.skeleton(ctx) == ID and ctx.block.get(key) == value


def _missing_atoms(ctx: Context, needed: tuple[str, ...]) -> list[str]:
    atoms = ctx.block.get("atoms")
    return [a for a in needed if not isinstance(atoms, list) or a not in atoms]


def _names(call: ast.Call) -> set[str]:
    return {n.id for n in astnodes.walk(call) if isinstance(n, ast.Name)} | {
        n.attr for n in astnodes.walk(call) if isinstance(n, ast.Attribute)}


def _cache_names(ctx: Context) -> set[str]:
    """``*cache`` tensor names, plus names bound to a reshape (or other call) of one: real kernels view
    the pages of ``k_2d = pypto.reshape(k_cache, [...], inplace=True)``."""
    names: set[str] = set()
    for node, _loops in ctx.program.walk():
        s = node.stmt
        if isinstance(s, ast.Assign) and isinstance(s.value, ast.Call):
            sources = _names(s.value)
            if any(n.endswith("cache") for n in sources) or sources & names:
                names |= {t.id for t in s.targets if isinstance(t, ast.Name)}
    for call, _node, _loops in ctx.program.calls():
        names |= {n for n in _names(call) if n.endswith("cache")}
    return names


def _first_kernel_line(ctx: Context) -> int:
    for call, node, _loops in ctx.program.calls():
        if call_name(call) == "matmul":
            return ctx.program.call_line(call, node)
    return ctx.block_line("kv_cache")


@rule("SK-01-R7", "error", "pseudocode", "SK-01-R7 (AT-17)",
      "a paged SK-01 design does not choose AT-17 or does not gather its pages through block_table",
      bad=('# opdesign: {kv_cache: paged, atoms: [AT-12, AT-01, AT-13]}\n'
           'kj = pypto.view(k_cache, [KV_TILE, HEAD_DIM], [b_idx, kv_off, kv_h, 0])\n'
           'sij = pypto.matmul(qi, kj, pypto.DT_FP32, b_trans=True)'),
      good=('# opdesign: {kv_cache: paged, atoms: [AT-12, AT-01, AT-13, AT-17]}\nfor page in range(PAGES_PER_TILE):\n'
            '    block_id = block_table[b_idx, kv_off // BLOCK_SIZE + page].max(0)\n'
            '    pypto.assemble(pypto.view(k_cache, [BLOCK_SIZE, HEAD_DIM], [block_id, 0, kv_h, 0]), '
            '[page * BLOCK_SIZE, 0], k_buf)\n'
            'sij = pypto.matmul(qi, k_buf, pypto.DT_FP32, b_trans=True)'), attention_only=True)
def check_paged_gather(ctx: Context) -> Iterator[Hit]:
    """With a paged KV cache the logical KV positions live in physical pages: each KV tile is
    assembled from its pages through ``block_table`` (negative ids clamped to 0) with the zero-copy
    ``view`` + ``assemble`` gather of AT-17. A design that does not pick AT-17, or whose kernel never
    reads ``block_table`` or never views a ``*cache`` tensor, reads the wrong rows."""
    if not _applies(ctx, "kv_cache", "paged"):
        return
    for atom in _missing_atoms(ctx, ("AT-17",)):
        yield Hit(ctx.block_line("atoms"), f"paged KV cache but {atom} (block-table gather) is not among the atoms")
    if ctx.program is None:
        return
    reads_table = views_cache = False
    caches = _cache_names(ctx)
    for call, _node, _loops in ctx.program.calls():
        names = _names(call)
        reads_table |= "block_table" in names
        views_cache |= call_name(call) == "view" and bool(names & caches)
    if not (reads_table and views_cache):
        what = "block_table is never read" if not reads_table else "no view of a *cache tensor"
        yield Hit(_first_kernel_line(ctx), f"paged KV cache but the kernel has no AT-17 page gather ({what})")


@rule("SK-01-R8", "error", "pseudocode", "SK-01-R8 (AT-08, AT-06)",
      "an FP8 SK-01 design does not quantise P to FP8 between V1 and C2 or does not dequantise after C2",
      bad=('# opdesign: {quant: fp8, atoms: [AT-12, AT-01, AT-13, AT-08, AT-06]}\n'
           'sij = pypto.matmul(qi, kj, pypto.DT_FP32, b_trans=True)\n'
           'pij_c = pypto.cast(pypto.exp(sij), pypto.DT_BF16)\noij = pypto.matmul(pij_c, vj, pypto.DT_FP32)'),
      good=('# opdesign: {quant: fp8, atoms: [AT-12, AT-01, AT-13, AT-08, AT-06]}\n'
            'sij = pypto.matmul(qi, kj, pypto.DT_FP32, b_trans=True)\n'
            'pij_c = pypto.cast(pypto.mul(pypto.exp(sij), p_scale), pypto.DT_FP8E4M3)   # AT-08\n'
            'oij = pypto.matmul(pij_c, vj, pypto.DT_FP32)\noij = pypto.mul(pypto.div(oij, p_scale), v_inv)   # AT-06'),
      attention_only=True)
def check_fp8_points(ctx: Context) -> Iterator[Hit]:
    """FP8 P·V (the PageAttn FP8 row): P is quantised per row to FP8 E4M3 (AT-08) after the softmax
    chain and before the C2 matmul, so both C2 operands are FP8 (C-API-02), and the FP32 product is
    dequantised right after C2 by the row and channel scales (AT-06). Missing either point runs PV on
    mismatched dtypes or leaves the result scaled by up to 448."""
    if not _applies(ctx, "quant", "fp8"):
        return
    for atom in _missing_atoms(ctx, ("AT-08", "AT-06")):
        yield Hit(ctx.block_line("atoms"), f"quant fp8 but {atom} is not among the atoms")
    if ctx.program is None:
        return
    matmuls, fp8_casts, scalings = [], [], []
    for call, node, _loops in ctx.program.calls():
        line = ctx.program.call_line(call, node)
        name = call_name(call)
        if name == "matmul":
            matmuls.append(line)
        elif name == "cast" and any("FP8" in n.upper() for n in _names(call)):
            fp8_casts.append(line)
        elif name in ("mul", "div") and any("scale" in n.lower() or "inv" in n.lower() for n in _names(call)):
            scalings.append(line)
    if len(matmuls) < 2:
        return
    c1, c2 = matmuls[0], matmuls[1]
    if not any(c1 < line < c2 for line in fp8_casts):
        yield Hit(c2, "no cast of P to FP8 (AT-08) between the C1 and C2 matmuls")
    if not any(line > c2 for line in scalings):
        yield Hit(c2, "no dequantisation by the P / V scales (AT-06) after the C2 matmul")
