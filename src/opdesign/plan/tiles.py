"""Tile helpers shared by the skeletons and the cost model (elements in, elements out).

Sources: C-TILE-05 (cube ``[L0, L1]`` tiles: ``L1 % L0 == 0``, multiples of
``cube_align_elems``), C-TILE-02 (vector columns 16-aligned for FP32 and the
BF16/FP16 casts), the FlashAttention-Infer tiling (``L1TileShape::K = head_dim``,
"larger kvSeqBase" in the performance form).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from opdesign.catalog import Card, load_catalog
from opdesign.plan.core import CubeTile, text

if TYPE_CHECKING:
    from opdesign.spec import Spec


def align_up(value: int, multiple: int) -> int:
    """``value`` rounded up to a multiple of ``multiple``."""
    return -(-value // multiple) * multiple


def axis_hi(spec: Spec, name: str) -> int:
    """Upper bound of an axis: the dynamic range's ``hi`` or the typical shape value."""
    for axis in spec.dynamic_axes:
        if axis.name == name:
            return max(axis.range[1], getattr(spec.shape, name))
    return getattr(spec.shape, name)


def cube_align(dtype: str) -> int:
    """C-TILE-05 ``cube_align_elems`` of an operand dtype (8 when the table has none)."""
    return load_catalog().constraint("C-TILE-05").param("cube_align_elems").get(dtype, 8)


def l0_for(l1: int, cap: int, align: int) -> int:
    """Largest L0 <= cap that divides ``l1`` and is a multiple of ``align`` (C-TILE-05)."""
    for l0 in range(min(cap, l1), 0, -1):
        if l1 % l0 == 0 and l0 % align == 0:
            return l0
    return l1


def choose_cube_tiles(spec: Spec, form: str, q_tile: int, kv_tile: int, card: Card,
                      qk_tile: int | tuple[int, int] | None = None,
                      pv_tile: int | tuple[int, int] | None = None) -> dict[str, CubeTile]:
    """C1 (S = Q K^T: m=q rows, k=head_dim, n=kv cols) and C2 (O = P V: m=q rows, k=kv, n=head_dim).

    Safe baseline: the card's ``safe_cube_tile`` (``[128, 128]``) per axis clipped
    to the tile (SK-01 safe form). Performance form: the K side of C2 doubles its
    L1 tile (fewer, larger PV loads: FAI tuning "larger kvSeqBase"). C1's k L1
    equals head_dim (FAI ``L1TileShape::K = head_dim``). All axes satisfy
    C-TILE-05. A cost-model candidate (:mod:`opdesign.tuning`) passes
    ``qk_tile`` (the L0 = L1 tile of C1's m and n and of C2's m, replacing the
    safe tile) and ``pv_tile`` (C2's k L1 tile); both default to the rule above.
    Rectangular tiles: ``qk_tile = (m, n)`` sets C1's m and n apart, ``pv_tile = (m, k)``
    sets C2's m (then independent of C1's) and k. Each L1 is clipped to the aligned step
    (``q_tile`` for m, ``kv_tile`` for C1 n and C2 k).
    """
    safe = card.param("safe_cube_tile")
    align = cube_align(spec.dtype)
    d = spec.shape.head_dim
    qk_m, qk_n = qk_tile if isinstance(qk_tile, tuple) else (qk_tile or safe,) * 2
    pv_m, pv_k = pv_tile if isinstance(pv_tile, tuple) else (qk_m, pv_tile)
    m1 = min(qk_m, align_up(q_tile, align))
    n1 = min(qk_n, align_up(kv_tile, align))
    m2 = min(pv_m, align_up(q_tile, align))
    k_c2 = min(pv_k or (2 * safe if form == "performance" else safe), align_up(kv_tile, align))
    d_l1 = align_up(d, align)
    dt = spec.dtype
    ax = lambda l1, cap=safe: (l0_for(l1, cap, align), l1)  # noqa: E731
    return {
        "C1": CubeTile(stage="C1", m=ax(m1, qk_m), k=ax(d_l1), n=ax(n1, qk_n), operand_dtype=dt,
                       reason=text("cube.c1")),
        "C2": CubeTile(stage="C2", m=ax(m2, pv_m), k=ax(k_c2), n=ax(d_l1),
                       operand_dtype="fp8" if spec.quant == "fp8" else dt,
                       reason=text("cube.c2")),
    }


def vec_cols_v2(head_dim: int) -> int:
    """Columns of the V2 tile: ``min(align16(head_dim), 128)`` (C-TILE-02 for FP32 and the output cast)."""
    return min(align_up(head_dim, 16), 128)
