"""Candidate enumeration and the hard rules, evaluated for many candidates at once (numpy).

A candidate is ``(q_tile, kv_tile, qk_tile, pv_tile, vec_tile, unroll_factor,
head_group, streams)``:

* ``q_tile`` / ``kv_tile``: rows of Q / columns of K per loop step, powers of two
  from ``TILE_MIN`` up to the SPEC's typical ``seq_q`` / ``seq_kv`` (rounded up to a
  power of two), plus the plan's own tiles. The performance form keeps the plan's
  ``q_tile`` (SK-01 performance invariant 1: ``Q_TILE = seq_q / 2``); paged KV keeps
  only KV tiles made of whole pages (AT-17);
* ``qk_tile``: the L0 = L1 tile of C1's m and n axes (and C2's m): the "QK tile";
  ``pv_tile``: C2's k L1 tile (KV columns of P and rows of V per L1 load): the
  "PV tile". Cube tiles come from :func:`opdesign.plan.tiles.choose_cube_tiles`;
* ``vec_tile``: the V1 TileShape, one shape per area in ``VEC_AREAS`` (widest
  columns first, see :func:`vec_shapes`); V2 follows with the same rows;
* ``unroll_factor`` from the plan's unroll candidates (the SK-01 card's
  ``unroll_candidates`` for the variant, ``Plan.unroll.candidates``),
  ``head_group`` G from 1 plus AT-23 ``group_sizes``, ``streams`` from ``STREAM_COUNTS``.

:func:`check_rules` is the vectorised twin of the SK-01 UB budget and
:mod:`opdesign.plan.buffers` (UB, L1, L0A/B/C: C-TILE-03), of the C-TILE-02 /
C-TILE-05 alignment rules and of the C-TILE-04 expansion estimate (the input
counts of the plan's own expansion ops);
``tests/test_costmodel.py`` checks that both give the same bytes on a sample.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import ceil

import numpy as np

from opdesign.catalog import Card, DeviceProfile, load_catalog
from opdesign.plan.buffers import ACC_BYTES, KERNEL_TASK_NUM, RESULT_BUFFERS
from opdesign.plan.models import Plan
from opdesign.plan.tiles import align_up, choose_cube_tiles, cube_align, vec_cols_v2
from opdesign.spec import DTYPE_BYTES
from opdesign.spec import Spec

#: smallest q / kv tile enumerated: 8 elements, the shortest FP32 tail C-TILE-02 allows
#: (``tail_align_elems.fp32``); smaller tiles cannot be legal for the FP32 vector ops.
TILE_MIN = 8
#: V1 tile areas in elements: 2^10 .. 2^13. The lower end is the SK-01 safe vector tile
#: [16, 64]; at 2^14 the per-op UB alone (``area x 4 B x tensor_count.reduce 4``) is 256 KiB,
#: the whole UB of the largest profile, so no larger tile can be legal.
VEC_AREAS = (1024, 2048, 4096, 8192)
#: widest V1 tile enumerated: the a2/a3 formula table measures FP32 rows up to 336-464
#: columns, so wider tiles would only be costed by the nearest-cols extrapolation.
VEC_COLS_MAX = 512
#: concurrent task streams per core tried: the cost-model article (shared/seeds) re-tested
#: 2 and 4 grouped streams (4 helped) and 8 (regressed); 1 is no multi-stream overlap.
STREAM_COUNTS = (1, 2, 4, 8)
#: QK / PV tile choices relative to the SK-01 safe cube tile (128): one octave below to one
#: above for QK (m x n), the safe tile to four times it for PV's K side (the performance form
#: already doubles it). Above them L0 (QK 512: L0C 1 MiB) or L1 (PV 1024 with head_dim 128:
#: 768 KiB of operands) overflows on every profile; below them a halving only multiplies
#: blocks, S stores and loads (QK) or L1 loads (PV).
QK_FACTORS = (0.5, 1, 2)
PV_FACTORS = (1, 2, 4)
RULE_ORDER = ("C-TILE-05", "C-TILE-02", "C-TILE-03", "C-TILE-04")


def _pow2_upto(limit: int) -> list[int]:
    out, t = [], TILE_MIN
    while t < limit * 2:
        out.append(t)
        if t >= limit:
            break
        t *= 2
    return out


def vec_shapes(kv_tile: int, rows_range: tuple[int, int]) -> list[tuple[int, int]]:
    """V1 shapes for a KV tile: per area, columns = the widest power of two within
    ``kv_tile``, ``VEC_COLS_MAX`` and ``area / rows_lo``; rows = area / columns within
    the SK-01 ``safe_vec_range`` rows. A KV tile narrower than ``rows_lo`` columns gets
    ``[rows_lo, kv_tile]`` (then C-TILE-02 decides)."""
    lo, hi = rows_range
    widest = 1 << (max(kv_tile, 1).bit_length() - 1)
    out = []
    for area in VEC_AREAS:
        cols = min(widest, VEC_COLS_MAX, area // lo)
        rows = area // cols
        if lo <= rows <= hi and (rows, cols) not in out:
            out.append((rows, cols))
    return out or [(lo, kv_tile)]


@dataclass(frozen=True)
class Context:
    """Everything the vectorised model needs from the SPEC, the plan and the catalog."""

    spec: Spec
    plan: Plan
    device: DeviceProfile
    card: Card  # the plan's skeleton card: safe tiles, vector rows, cube buffering
    form: str
    static_range: int  # SK-01 static_kv_max_tiles when the form is performance, else 0
    p_dtype: str  # C2 operand dtype (P cast target)


def context(spec: Spec, plan: Plan) -> Context:
    cat = load_catalog()
    card = cat.card(plan.skeleton.id)
    return Context(spec=spec, plan=plan, device=cat.device(spec.device), card=card, form=plan.form,
                   static_range=card.param("static_kv_max_tiles") if plan.form == "performance" else 0,
                   p_dtype=plan.cube_tiles["C2"].operand_dtype)


def _axis_choices(ctx: Context, seq: int, planned: int, fixed: bool) -> list[int]:
    if fixed:
        return [planned]
    return sorted(set(_pow2_upto(seq)) | {planned})


def block_counts(mask: str, seq_q: int, seq_kv: int, q_tile: int, kv_tile: int,
                 window: int | None = None) -> np.ndarray:
    """Valid KV blocks per q block, int64: the vectorised twin of
    :func:`opdesign.plan.blocks.kv_block_ranges` (same bottom-right aligned bounds, same counts).

    Row ``last`` of q block ``i`` is ``min((i + 1) q_tile, seq_q) - 1``, so its exclusive column
    bound ``min(seq_kv, last + seq_kv - seq_q + 1)`` is ``min(seq_kv, (i + 1) q_tile + seq_kv - seq_q)``.
    """
    nq = -(-seq_q // q_tile)
    if mask not in ("causal", "sliding_window"):
        return np.full(nq, -(-seq_kv // kv_tile), dtype=np.int64)
    offset = seq_kv - seq_q
    hi = np.arange(1, nq + 1, dtype=np.int64)
    hi *= q_tile
    hi += offset
    np.minimum(hi, seq_kv, out=hi)  # exclusive column bound per q block
    if mask == "causal":  # lo = 0: no column when hi <= 0, else ceil(hi / kv_tile) blocks
        np.maximum(hi, 0, out=hi)
        hi += kv_tile - 1
        hi //= kv_tile
        return hi
    lo = np.arange(nq, dtype=np.int64) * q_tile + (offset - window + 1)
    np.maximum(lo, 0, out=lo)
    return np.where(hi <= lo, 0, -(-hi // kv_tile) - lo // kv_tile)


def valid_blocks(ctx: Context, q_tile: int, kv_tile: int) -> np.ndarray:
    """KV blocks each q block visits (mask-aware, :func:`block_counts`)."""
    s = ctx.spec.shape
    return block_counts(ctx.spec.mask, s.seq_q, s.seq_kv, q_tile, kv_tile, s.window)


def enumerate_candidates(ctx: Context) -> dict[str, np.ndarray]:
    """All candidates as parallel int64 arrays (one entry per candidate), duplicates removed.

    Keys: ``q, kv, qk, pv, vr, vc, u, g, s`` (the knobs), ``m0 m1 k10 k11 n0 n1``
    (C1 [L0, L1] per axis), ``k20 k21 n20 n21`` (C2 k and n; C2 m equals C1 m),
    ``steps_max`` (most KV blocks any q block visits). Two knob values that give the
    same tiles are one candidate (the smaller value is kept).
    """
    spec, plan, card = ctx.spec, ctx.plan, ctx.card
    s = spec.shape
    safe = card.param("safe_cube_tile")
    qs = _axis_choices(ctx, s.seq_q, plan.q_tile, ctx.form == "performance")
    kvs = _axis_choices(ctx, s.seq_kv, plan.kv_tile, False)
    if spec.kv_cache == "paged":
        kvs = [kv for kv in kvs if kv % s.block_size == 0]
    qk_c1, pv_c2 = plan.cube_tiles["C1"].n[1], plan.cube_tiles["C2"].k[1]
    qks = sorted({int(safe * f) for f in QK_FACTORS} | {qk_c1})
    pvs = sorted({int(safe * f) for f in PV_FACTORS} | {pv_c2})
    rows_range = tuple(card.param("safe_vec_range"))
    unrolls = sorted(plan.unroll.candidates)  # the variant's tuning candidates
    groups = [1] + [g for g in load_catalog().card("AT-23").param("group_sizes") if s.num_heads % g == 0]

    geo, seen, cubes = [], set(), {}
    for q in qs:
        for kv in kvs:
            steps_max = int(valid_blocks(ctx, q, kv).max())
            for qk in qks:
                for pv in pvs:
                    # the cube tiles see q only up to qk and kv only up to max(qk, pv) (choose_cube_tiles clips
                    # the tile to them): one call per clipped pair
                    clipped = (min(q, qk), min(kv, max(qk, pv)), qk, pv)
                    if clipped not in cubes:
                        cubes[clipped] = choose_cube_tiles(spec, ctx.form, clipped[0], clipped[1], card,
                                                           qk_tile=qk, pv_tile=pv)
                    c1, c2 = cubes[clipped]["C1"], cubes[clipped]["C2"]
                    key = (q, kv, c1.m, c1.n, c2.k)
                    if key in seen:
                        continue
                    seen.add(key)
                    shapes = vec_shapes(kv, rows_range)
                    if (q, kv) == (plan.q_tile, plan.kv_tile) and plan.vec_tiles["V1"].shape not in shapes:
                        shapes.append(plan.vec_tiles["V1"].shape)
                    for vr, vc in shapes:
                        geo.append((q, kv, qk, pv, vr, vc, *c1.m, *c1.k, *c1.n, *c2.k, *c2.n, steps_max))
    g = np.array(geo, dtype=np.int64)
    knobs = np.array([(u, hg, st) for u in unrolls for hg in groups for st in STREAM_COUNTS], dtype=np.int64)
    cols = ("q", "kv", "qk", "pv", "vr", "vc", "m0", "m1", "k10", "k11", "n0", "n1", "k20", "k21", "n20", "n21",
            "steps_max")
    # unroll factors at or above the longest KV loop behave alike: keep the smallest of them;
    # a static range (performance form, <= static_kv_max_tiles steps) traces the whole loop: factor 1 only.
    # Decided per (geometry, knob) before the candidate columns are built, so only kept rows are materialised.
    steps = g[:, cols.index("steps_max")]
    ladder = np.array(unrolls)
    u_cap = ladder[np.minimum(np.searchsorted(ladder, steps), len(ladder) - 1)]
    u = knobs[None, :, 0]
    keep = np.where((steps <= ctx.static_range)[:, None], u == 1, u <= u_cap[:, None])
    gi, ki = np.divmod(np.flatnonzero(keep), len(knobs))
    out = {name: g[:, i][gi] for i, name in enumerate(cols)}
    out.update(u=knobs[:, 0][ki], g=knobs[:, 1][ki], s=knobs[:, 2][ki])
    return out


@dataclass
class Legality:
    """Per-candidate bytes and rule verdicts (arrays aligned with the candidate arrays)."""

    bytes: dict[str, np.ndarray]  # "UB", "L1", "L0A C1", ... -> bytes
    capacity: dict[str, int]
    expansion_max: np.ndarray
    expansion_limit: int
    bad_align: np.ndarray  # C-TILE-05
    bad_tail: np.ndarray  # C-TILE-02
    over: dict[str, np.ndarray]  # buffer -> bool (C-TILE-03)
    bad_expansion: np.ndarray  # C-TILE-04

    @property
    def legal(self) -> np.ndarray:
        over = np.logical_or.reduce(list(self.over.values()))
        return ~(self.bad_align | self.bad_tail | over | self.bad_expansion)

    def rules(self, i: int) -> list[str]:
        """Rule ids candidate ``i`` breaks, in ``RULE_ORDER``."""
        hits = {"C-TILE-05": self.bad_align[i], "C-TILE-02": self.bad_tail[i],
                "C-TILE-03": any(v[i] for v in self.over.values()), "C-TILE-04": self.bad_expansion[i]}
        return [r for r in RULE_ORDER if hits[r]]

    def reason(self, i: int, c: dict[str, np.ndarray], cube_align: int) -> str:
        """``RULE: what`` for each broken rule of candidate ``i``, joined by ``; ``."""
        parts = []
        if self.bad_align[i]:
            parts.append(f"C-TILE-05: cube tiles m{[int(c['m0'][i]), int(c['m1'][i])]} "
                         f"n{[int(c['n0'][i]), int(c['n1'][i])]} k{[int(c['k20'][i]), int(c['k21'][i])]} "
                         f"need 0 < L0 <= L1, L1 % L0 == 0, multiples of {cube_align}")
        if self.bad_tail[i]:
            parts.append(f"C-TILE-02: vector tail of {int(c['vc'][i])} columns is not 32-byte aligned")
        parts += [f"C-TILE-03: {name} {int(self.bytes[name][i])} B > {self.capacity[name]} B"
                  for name, flag in self.over.items() if flag[i]]
        if self.bad_expansion[i]:
            parts.append(f"C-TILE-04: expansion {int(self.expansion_max[i])} per op > {self.expansion_limit}")
        return "; ".join(parts)


def cdiv(a, b):
    """Ceiling division for ints and integer numpy arrays."""
    return -(-a // b)


def check_rules(ctx: Context, c: dict[str, np.ndarray]) -> Legality:
    """Bytes of UB (per vector sub-block), L1 and L0A/B/C per stage, and the alignment and
    expansion rules, for every candidate; same formulas as :func:`opdesign.skeletons.sk01.budget.ub_budget`
    and :mod:`opdesign.plan.buffers`."""
    cat = load_catalog()
    dev, s = ctx.device, ctx.spec.shape
    d = s.head_dim
    b, pb = DTYPE_BYTES[ctx.spec.dtype], DTYPE_BYTES[ctx.p_dtype]
    acc, cv = ACC_BYTES, dev.aiv_per_aic
    counts = cat.constraint("C-TILE-03").param("tensor_count")
    align32 = cat.constraint("C-TILE-02").param("align_bytes")
    cube_aligned = cube_align(ctx.spec.dtype)
    nbuf = next((r.value for r in ctx.card.config if r.key == "pass_options.cube_nbuffer_setting" and not r.when),
                {-1: 1}).get(-1, 1)
    m0, m1, n0, n1 = c["m0"], c["m1"], c["n0"], c["n1"]
    k10, k11, k20, k21, n20, n21 = c["k10"], c["k11"], c["k20"], c["k21"], c["n20"], c["n21"]
    vr, vc, c2 = c["vr"], c["vc"], vec_cols_v2(d)
    rows = cdiv(c["q"], cv)
    resident = (rows * d * acc + 2 * rows * align32) if ctx.form == "baseline" else 0
    ub = (resident + np.maximum(vr * vc * acc * counts["reduce"], vr * c2 * acc * counts["binary"])
          + cdiv(m1, cv) * n1 * acc * RESULT_BUFFERS
          + cdiv(m1, cv) * align_up(d, 64) * acc * RESULT_BUFFERS + cdiv(m1, 2) * acc
          + 3 * cdiv(m1, cv) * align32 * KERNEL_TASK_NUM)  # FAI sumUb / maxUb / expUb x KERNEL_TASK_NUM
    l1 = (np.maximum((m1 * k11 + k11 * n1) * b, (m1 * k21 + k21 * n21) * pb) * nbuf
          + m1 * n1 * pb * KERNEL_TASK_NUM)
    nbytes = {"UB": ub, "L1": l1,
              "L0A C1": m0 * k10 * b, "L0B C1": k10 * n0 * b, "L0C C1": m0 * n0 * acc,
              "L0A C2": m0 * k20 * pb, "L0B C2": k20 * n20 * pb, "L0C C2": m0 * n20 * acc}
    capacity = {"UB": dev.ub_bytes, "L1": dev.l1_bytes}
    for stage in ("C1", "C2"):
        capacity |= {f"L0A {stage}": dev.l0a_bytes, f"L0B {stage}": dev.l0b_bytes, f"L0C {stage}": dev.l0c_bytes}
    axes = ((m0, m1), (k10, k11), (n0, n1), (k20, k21), (n20, n21))
    bad_align = np.logical_or.reduce([(lo <= 0) | (lo > hi) | (hi % np.maximum(lo, 1) != 0) | (lo % cube_aligned != 0)
                                      | (hi % cube_aligned != 0) for lo, hi in axes])
    bad_tail = ((vc * acc) % align32 != 0) | ((vc * pb) % align32 != 0) | ((c2 * acc) % align32 != 0)
    in1 = max(o.inputs for o in ctx.plan.expansion.ops if o.stage == "V1")  # FP8 ops included when planned
    in2 = max(o.inputs for o in ctx.plan.expansion.ops if o.stage == "V2")
    exp_max = np.maximum(cdiv(c["q"], vr) * cdiv(c["kv"], vc) * (1 + in1), cdiv(c["q"], vr) * ceil(d / c2) * (1 + in2))
    limit = cat.constraint("C-TILE-04").param("expansion_limit")
    return Legality(bytes=nbytes, capacity=capacity, expansion_max=exp_max, expansion_limit=limit,
                    bad_align=bad_align, bad_tail=bad_tail,
                    over={k: v > capacity[k] for k, v in nbytes.items()}, bad_expansion=exp_max > limit)
