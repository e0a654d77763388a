"""Candidate enumeration and the hard rules, evaluated for many candidates at once (numpy).

A candidate is ``(q_tile, kv_tile, qk_tile, pv_tile, vec_tile, unroll_factor,
head_group, streams)``:

* ``q_tile`` / ``kv_tile``: rows of Q / columns of K per loop step, powers of two
  from ``TILE_MIN`` up to the SPEC's typical ``seq_q`` / ``seq_kv`` (rounded up to a
  power of two), plus the plan's own tiles. The performance form fixes the plan's
  ``q_tile`` (SK-01-P1: ``Q_TILE = seq_q / 2``); the other q tiles are still
  enumerated, checked and ranked, and :func:`form_rules` flags them with ``SK-01-P1``.
  Paged KV keeps only KV tiles made of whole pages (AT-17);
* ``qk_tile = [m, n]``: the L0 = L1 tile of C1's m and n axes, the QK score block S;
  ``pv_tile = [m, n]``: C2's m and k L1 tiles, the P block C2 multiplies (m Q rows,
  n KV columns of P = rows of V per L1 load). Each axis is chosen on its own
  (``QK_FACTORS`` for both QK axes and PV's m, ``PV_FACTORS`` for PV's KV side) and clipped
  to the aligned loop step (an L1 tile never exceeds ``q_tile`` / ``kv_tile``: a larger
  one is the same candidate as the step-sized one and is counted once). Cube tiles come
  from :func:`opdesign.plan.tiles.choose_cube_tiles`;
* ``vec_tile``: the V1 TileShape, one shape per area in ``VEC_AREAS`` (widest
  columns first, see :func:`vec_shapes`); V2 follows with the same rows;
* ``unroll_factor`` from the plan's unroll candidates (the SK-01 card's
  ``unroll_candidates`` for the variant, ``Plan.unroll.candidates``),
  ``head_group`` G from 1 plus AT-23 ``group_sizes``, ``streams`` from ``STREAM_COUNTS``.

:func:`check_rules` is the vectorised twin of the SK-01 UB budget and
:mod:`opdesign.plan.buffers` (UB, L1, L0A/B/C: C-TILE-03), of the C-TILE-02 /
C-TILE-05 alignment rules (per axis ``0 < L0 <= L1``, ``L1 % L0 == 0``, multiples of the
cube alignment; and the loop-step relation: every m L1 divides the aligned ``q_tile``,
C1's n L1 and C2's k L1 divide the aligned ``kv_tile``, so a step is whole cube blocks)
and of the C-TILE-04 expansion estimate (the input counts of the plan's own expansion ops);
``tests/unit/tuning/test_costmodel.py`` checks that both give the same bytes on a sample.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import product
from math import ceil

import numpy as np

from opdesign.catalog import Card, DeviceProfile, load_catalog
from opdesign.plan.buffers import ACC_BYTES, KERNEL_TASK_NUM, RESULT_BUFFERS
from opdesign.plan.models import Plan
from opdesign.plan.tiles import align_up, choose_cube_tiles, cube_align, vec_cols_v2
from opdesign.spec import DTYPE_BYTES, Spec

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
#: QK / PV tile choices per axis relative to the SK-01 safe cube tile (128): one octave below
#: to one above for QK's m and n and PV's m, the safe tile to four times it for PV's KV side
#: (the performance form already doubles it). Above them L0 (QK 512 x 128: L0C 256 KiB) or
#: L1 (PV 1024 with head_dim 128: 768 KiB of operands) overflows on every profile; below them
#: a halving only multiplies blocks, S stores and loads (QK) or L1 loads (PV).
QK_FACTORS = (0.5, 1, 2)
PV_FACTORS = (1, 2, 4)
RULE_ORDER = ("C-TILE-05", "C-TILE-02", "C-TILE-03", "C-TILE-04")
#: the SK-01 performance invariant that fixes ``q_tile`` (``Q_TILE = seq_q / 2``)
def form_rule_ids(card: Card) -> tuple[str, str]:
    """The card's rule ids for the performance form's fixed ``q_tile`` and its static KV range (its
    ``tuning_form_rules`` parameter; empty names for a card without a performance form)."""
    named = card.parameters.get("tuning_form_rules") or {}
    return str(named.get("q_tile", "")), str(named.get("static_range", ""))


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
    static_range: int  # the card's static_kv_max_tiles when the form is performance, else 0
    form_rules: tuple[str, str]  # the card's rule ids for form bits 1 and 2 (form_rule_ids)
    p_dtype: str  # C2 operand dtype (P cast target)
    cube_cores: int  # AIC cores the units split over: the device profile's aic_cores, the figure the plan uses


def context(spec: Spec, plan: Plan) -> Context:
    """The model's view of a SPEC and its plan; the units split over the profile's ``aic_cores`` (one figure
    for the plan and the ranking: devices.yaml, from the platform file it cites)."""
    cat = load_catalog()
    card = cat.card(plan.skeleton.id)
    device = cat.device(spec.device)
    return Context(spec=spec, plan=plan, device=device, card=card, form=plan.form,
                   static_range=card.param("static_kv_max_tiles") if plan.form == "performance" else 0,
                   form_rules=form_rule_ids(card),
                   p_dtype=plan.cube_tiles["C2"].operand_dtype,
                   cube_cores=device.aic_cores)


def _axis_choices(seq: int, planned: int) -> list[int]:
    return sorted(set(_pow2_upto(seq)) | {planned})


def form_rules(ctx: Context, q: np.ndarray, kv: np.ndarray) -> np.ndarray:
    """Per candidate, the form rules it breaks as bits (performance form only; 0 = none): 1 =
    ``ctx.form_rules[0]`` (the form's fixed ``q_tile``), 2 = ``ctx.form_rules[1]`` (more KV tiles than the static
    range the performance kernel writes: such a row is ranked as a ``pypto.loop``, which that kernel has not)."""
    if ctx.form != "performance":
        return np.zeros(len(q), dtype=np.uint8)
    steps = -(-ctx.spec.shape.seq_kv // kv)  # plan.kv_tiles of the pinned plan, as opdesign new checks it
    return (q != ctx.plan.q_tile).astype(np.uint8) | ((steps > ctx.static_range).astype(np.uint8) << 1)


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


#: geometry columns of :func:`enumerate_geometry` (one row per tile geometry; knobs come apart)
GEOMETRY = ("q", "kv", "vr", "vc", "m0", "m1", "k10", "k11", "n0", "n1", "m20", "m21", "k20", "k21", "n20", "n21",
            "steps_max")


@dataclass(frozen=True)
class Space:
    """The candidate space before it is materialised: candidate ``(i, j)`` is geometry row ``i`` with
    knob row ``j`` when ``allowed[i, j]``; candidates are numbered geometry-major, knob-minor."""

    geometry: np.ndarray  # int64, one row per tile geometry, columns GEOMETRY
    knobs: np.ndarray  # int64, rows (u, g, s)
    allowed: np.ndarray  # bool (geometry, knob): the unroll ladder rule below

    def column(self, name: str) -> np.ndarray:
        return self.geometry[:, GEOMETRY.index(name)]

    def materialise(self, mask: np.ndarray) -> tuple[dict[str, np.ndarray], np.ndarray, np.ndarray]:
        """The candidates of ``mask`` (geometry, knob) as parallel arrays, their geometry and knob row indices."""
        gi, ki = np.divmod(np.flatnonzero(mask), len(self.knobs))
        out = {name: self.geometry[:, i][gi] for i, name in enumerate(GEOMETRY)}
        out.update(u=self.knobs[:, 0][ki], g=self.knobs[:, 1][ki], s=self.knobs[:, 2][ki])
        return out, gi, ki


def most_blocks(ctx: Context, q_tile: int, kv_tile: int) -> int:
    """``max(valid_blocks(ctx, q_tile, kv_tile))`` without the per-q-block array where the counts are
    known to be flat (no mask) or non-decreasing (causal: the last q block sees the most columns)."""
    s = ctx.spec.shape
    if ctx.spec.mask not in ("causal", "sliding_window"):
        return -(-s.seq_kv // kv_tile)
    if ctx.spec.mask == "causal":
        nq = -(-s.seq_q // q_tile)
        hi = max(min(nq * q_tile + s.seq_kv - s.seq_q, s.seq_kv), 0)
        return -(-hi // kv_tile)
    return int(valid_blocks(ctx, q_tile, kv_tile).max())


def enumerate_geometry(ctx: Context) -> Space:
    """The tile geometries, the knob rows and which knobs each geometry takes (:func:`enumerate_candidates`)."""
    spec, plan, card = ctx.spec, ctx.plan, ctx.card
    s = spec.shape
    safe = card.param("safe_cube_tile")
    align = cube_align(spec.dtype)
    qs = _axis_choices(s.seq_q, plan.q_tile)
    kvs = _axis_choices(s.seq_kv, plan.kv_tile)
    if spec.kv_cache == "paged":
        kvs = [kv for kv in kvs if kv % s.block_size == 0]
    c1p, c2p = plan.cube_tiles["C1"], plan.cube_tiles["C2"]
    octave = {int(safe * f) for f in QK_FACTORS}
    qk_ms, qk_ns, pv_ms = sorted(octave | {c1p.m[1]}), sorted(octave | {c1p.n[1]}), sorted(octave | {c2p.m[1]})
    pv_ks = sorted({int(safe * f) for f in PV_FACTORS} | {c2p.k[1]})
    rows_range = tuple(card.param("safe_vec_range"))
    unrolls = sorted(plan.unroll.candidates)  # the variant's tuning candidates
    groups = [1] + [g for g in load_catalog().card("AT-23").param("group_sizes") if s.num_heads % g == 0]

    blocks, cubes = [], {}
    for q in qs:
        qa = align_up(q, align)
        ms, pms = sorted({min(m, qa) for m in qk_ms}), sorted({min(m, qa) for m in pv_ms})
        for kv in kvs:
            kva = align_up(kv, align)
            steps_max = most_blocks(ctx, q, kv)
            shapes = vec_shapes(kv, rows_range)
            if (q, kv) == (plan.q_tile, plan.kv_tile) and plan.vec_tiles["V1"].shape not in shapes:
                shapes.append(plan.vec_tiles["V1"].shape)
            # each axis clipped to the aligned step first: choices that clip alike are one candidate
            pair_cubes = []
            for tiles in product(ms, sorted({min(n, kva) for n in qk_ns}), pms, sorted({min(k, kva) for k in pv_ks})):
                if tiles not in cubes:  # the cube tiles depend on the clipped L1 tiles only
                    t = choose_cube_tiles(spec, ctx.form, max(tiles[0], tiles[2]), max(tiles[1], tiles[3]), card,
                                          qk_tile=tiles[:2], pv_tile=tiles[2:])
                    cubes[tiles] = (*t["C1"].m, *t["C1"].k, *t["C1"].n, *t["C2"].m, *t["C2"].k, *t["C2"].n)
                pair_cubes.append(cubes[tiles])
            # rows (q, kv, vr, vc, cube..., steps_max): per cube tiles, one row per vector shape
            block = np.empty((len(pair_cubes) * len(shapes), len(GEOMETRY)), dtype=np.int64)
            block[:, 0], block[:, 1], block[:, -1] = q, kv, steps_max
            block[:, 2:4] = np.tile(np.array(shapes, dtype=np.int64), (len(pair_cubes), 1))
            block[:, 4:-1] = np.repeat(np.array(pair_cubes, dtype=np.int64), len(shapes), axis=0)
            blocks.append(block)
    g = np.concatenate(blocks)
    knobs = np.array([(u, hg, st) for u in unrolls for hg in groups for st in STREAM_COUNTS], dtype=np.int64)
    # unroll factors at or above the longest KV loop behave alike: keep the smallest of them;
    # a static range (performance form, <= static_kv_max_tiles steps) traces the whole loop: factor 1 only.
    # Decided per (geometry, knob) before the candidate columns are built, so only kept rows are materialised.
    steps = g[:, GEOMETRY.index("steps_max")]
    ladder = np.array(unrolls)
    u_cap = ladder[np.minimum(np.searchsorted(ladder, steps), len(ladder) - 1)]
    u = knobs[None, :, 0]
    allowed = np.where((steps <= ctx.static_range)[:, None], u == 1, u <= u_cap[:, None])
    return Space(geometry=g, knobs=knobs, allowed=allowed)


def enumerate_candidates(ctx: Context) -> dict[str, np.ndarray]:
    """All candidates as parallel int64 arrays (one entry per candidate), duplicates removed.

    Keys: ``q, kv, vr, vc, u, g, s`` (the knobs), ``m0 m1 k10 k11 n0 n1``
    (C1 [L0, L1] per axis: ``qk_tile = [m1, n1]``), ``m20 m21 k20 k21 n20 n21`` (C2:
    ``pv_tile = [m21, k21]``), ``steps_max`` (most KV blocks any q block visits). Tile
    choices that clip to the same tiles are one candidate.
    """
    space = enumerate_geometry(ctx)
    return space.materialise(space.allowed)[0]


@dataclass
class Legality:
    """Per-candidate bytes and rule verdicts (arrays aligned with the candidate arrays)."""

    bytes: dict[str, np.ndarray]  # "UB", "L1", "L0A C1", ... -> bytes
    capacity: dict[str, int]
    expansion_max: np.ndarray
    expansion_limit: int
    bad_align: np.ndarray  # C-TILE-05 ([L0, L1] per axis)
    bad_step: np.ndarray  # C-TILE-05 (L1 tiles that do not divide the aligned loop step)
    bad_tail: np.ndarray  # C-TILE-02
    over: dict[str, np.ndarray]  # buffer -> bool (C-TILE-03)
    bad_expansion: np.ndarray  # C-TILE-04

    @property
    def legal(self) -> np.ndarray:
        over = np.logical_or.reduce(list(self.over.values()))
        return ~(self.bad_align | self.bad_step | self.bad_tail | over | self.bad_expansion)

    def rules(self, i: int) -> list[str]:
        """Rule ids candidate ``i`` breaks, in ``RULE_ORDER``."""
        hits = {"C-TILE-05": self.bad_align[i] or self.bad_step[i], "C-TILE-02": self.bad_tail[i],
                "C-TILE-03": any(v[i] for v in self.over.values()), "C-TILE-04": self.bad_expansion[i]}
        return [r for r in RULE_ORDER if hits[r]]

    def reason(self, i: int, c: dict[str, np.ndarray], cube_align: int) -> str:
        """``RULE: what`` for each broken rule of candidate ``i``, joined by ``; ``."""
        parts = []
        if self.bad_align[i]:
            parts.append(f"C-TILE-05: cube tiles m{[int(c['m0'][i]), int(c['m1'][i])]} "
                         f"n{[int(c['n0'][i]), int(c['n1'][i])]} k{[int(c['k20'][i]), int(c['k21'][i])]} "
                         f"need 0 < L0 <= L1, L1 % L0 == 0, multiples of {cube_align}")
        if self.bad_step[i]:
            q, kv = int(c["q"][i]), int(c["kv"][i])
            parts.append(f"C-TILE-05: cube L1 tiles m {int(c['m1'][i])} / {int(c['m21'][i])} must divide q_tile {q} "
                         f"and n {int(c['n1'][i])} / k {int(c['k21'][i])} kv_tile {kv} "
                         f"(aligned to {cube_align}: whole cube blocks per step)")
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
    m0, m1, n0, n1, m20, m21 = c["m0"], c["m1"], c["n0"], c["n1"], c["m20"], c["m21"]
    k10, k11, k20, k21, n20, n21 = c["k10"], c["k11"], c["k20"], c["k21"], c["n20"], c["n21"]
    vr, vc, c2 = c["vr"], c["vc"], vec_cols_v2(d)
    rows = cdiv(c["q"], cv)
    resident = (rows * d * acc + 2 * rows * align32) if ctx.form == "baseline" else 0
    ub = (resident + np.maximum(vr * vc * acc * counts["reduce"], vr * c2 * acc * counts["binary"])
          + cdiv(m1, cv) * n1 * acc * RESULT_BUFFERS
          + cdiv(m21, cv) * align_up(d, 64) * acc * RESULT_BUFFERS + cdiv(m1, 2) * acc
          + 3 * cdiv(m1, cv) * align32 * KERNEL_TASK_NUM)  # FAI sumUb / maxUb / expUb x KERNEL_TASK_NUM
    l1 = (np.maximum((m1 * k11 + k11 * n1) * b, (m21 * k21 + k21 * n21) * pb) * nbuf
          + m1 * n1 * pb * KERNEL_TASK_NUM)
    nbytes = {"UB": ub, "L1": l1,
              "L0A C1": m0 * k10 * b, "L0B C1": k10 * n0 * b, "L0C C1": m0 * n0 * acc,
              "L0A C2": m20 * k20 * pb, "L0B C2": k20 * n20 * pb, "L0C C2": m20 * n20 * acc}
    capacity = {"UB": dev.ub_bytes, "L1": dev.l1_bytes}
    for stage in ("C1", "C2"):
        capacity |= {f"L0A {stage}": dev.l0a_bytes, f"L0B {stage}": dev.l0b_bytes, f"L0C {stage}": dev.l0c_bytes}
    axes = ((m0, m1), (k10, k11), (n0, n1), (m20, m21), (k20, k21), (n20, n21))
    bad_align = np.logical_or.reduce([(lo <= 0) | (lo > hi) | (hi % np.maximum(lo, 1) != 0) | (lo % cube_aligned != 0)
                                      | (hi % cube_aligned != 0) for lo, hi in axes])
    qa, kva = align_up(c["q"], cube_aligned), align_up(c["kv"], cube_aligned)
    bad_step = ((qa % np.maximum(m1, 1) != 0) | (qa % np.maximum(m21, 1) != 0) | (kva % np.maximum(n1, 1) != 0)
                | (kva % np.maximum(k21, 1) != 0))
    bad_tail = ((vc * acc) % align32 != 0) | ((vc * pb) % align32 != 0) | ((c2 * acc) % align32 != 0)
    in1 = max(o.inputs for o in ctx.plan.expansion.ops if o.stage == "V1")  # FP8 ops included when planned
    in2 = max(o.inputs for o in ctx.plan.expansion.ops if o.stage == "V2")
    exp_max = np.maximum(cdiv(c["q"], vr) * cdiv(c["kv"], vc) * (1 + in1), cdiv(c["q"], vr) * ceil(d / c2) * (1 + in2))
    limit = cat.constraint("C-TILE-04").param("expansion_limit")
    return Legality(bytes=nbytes, capacity=capacity, expansion_max=exp_max, expansion_limit=limit,
                    bad_align=bad_align, bad_step=bad_step, bad_tail=bad_tail,
                    over={k: v > capacity[k] for k, v in nbytes.items()}, bad_expansion=exp_max > limit)
