"""Stage cycles, multi-core balance and the pipeline score of SK-01 candidates (numpy arrays).

One *task* is one KV step of one Q tile of one head: C1 (S = Q K^T on the AIC),
V1 (online softmax on the two AIVs, each on ``ceil(q_tile / aiv_per_aic)`` rows),
C2 (O_ij = P V on the AIC) and V2 (rescale of the running O, AT-01), the FAI
pipeline of domain.md §7. On a2/a3 the cube and vector cores exchange S, P and
O_ij through GM, so every hand-over is a TSTORE on one side and a TLOAD on the other.

Stage cycles: each stage runs its instructions on parallel pipes (GM->L1, L1->L0,
cube, L0C->GM on the AIC; GM->UB, vector, UB->GM on the AIV) and the model assumes the pipes overlap
(an assumption of this model, not what ``cube_nbuffer_setting`` / ``vec_nbuffer_setting`` mean: PyPTO's
docs define those as merge counts of structurally identical sub-graphs), so a stage costs its busiest pipe.
Instruction cycles come from :mod:`opdesign.tuning.model.isa`.
Mapping of the AT-01 steps to PTO instructions (our choice where PTO has no
one-to-one instruction): scale -> TMULS; row max -> TROWMAX; ``s - m`` ->
TROWEXPAND + TSUB; exp -> TEXP; row sum -> TROWSUM; P cast -> TCVT; ``alpha * O``
and ``beta * O_ij`` -> TROWEXPAND + TMUL; add and max -> TSUB (same binary
element-wise cost, the table has no TADD / TMAX); ``1 / l`` -> TDIVS. Column
statistics ``[M, 1]`` are costed as ``[M, 8]`` tiles (a row padded to 32 B, C-TILE-02).

Score of a candidate (``score_cycles``, a ranking figure in cycles, not a time). PyPTO SIM runs the
tasks of every unit on a pool of cores, not a unit on a fixed core: its trace (``_simulate.swim.json``)
shows one unit's tasks on different AICs and V1 tasks on any of the 48 AIVs. So the compute is the
longer of two bounds, plus ``roots x epilogue`` of the busiest core:

* the pools: all tasks' AIC work ``C1 + C2`` (``+ V1`` when :func:`v1_on_aic`: vector tile wider than the
  QK tile's n, V1 then runs the whole q tile's rows on the cube core) and AIV work ``V1 + V2`` over the
  ``cube_cores`` AIC (each with its ``aiv_per_aic`` AIVs; the profile's aic_cores: 24 on a2/a3, A2A3.ini, as SIM);
* one chain: the KV steps of one head's online softmax follow each other, ``fill + (steps - 1) x
  interval`` with ``fill = C1 + V1 + C2 + V2`` and ``interval = max(AIC work, AIV work, fill / D)``
  (``D = pipeline_depth``, FAI ``KERNEL_TASK_NUM``, tasks in flight), for the longest chain
  (the most valid KV blocks of a q block). Bottleneck ``fill``: that chain bounds it.

V1 includes the merges of partial row statistics when a KV tile spans several vector tiles of a row:
``2 x row tiles x (cdiv(kv_tile, vec cols) - 1)`` pairwise merges (SIM's PAIRMAX / PAIRSUM, 0.311
cycles an fp32 element, which dominate V1 for wide KV tiles). GM copies cost ``CostParams``' measured
SIM figures when calibrated. The dispatch of the loop bodies and KV steps of all cores
(``task_overhead_cycles`` a body, ``step_dispatch_cycles`` a step) adds to the compute (PyPTO SIM times
grow linearly with the bodies of all cores, :func:`score`); ``sched`` is its share per task of the
busiest core. A LOOP_h body of the streams kernel holds ``S`` heads' chains interleaved
(templates/sk01/kernel_chains.j2, AT-23), so ``S`` streams dispatch ``S`` times fewer bodies; each stream
beyond the first costs ``stream_switch_cycles`` per task in every stage. An AT-23 head group of ``G``
heads is one unit of ``G`` chains: fewer bodies, the same chain length. Measured (SIM, streams_h32_s256,
q_tile 128, kv_tile 256): two streams 69.86 us against 79.77 us for one.

Not modelled (each would move all candidates of a kind together, or needs a
measurement we do not have): L1 operand reuse (``cube_l1_reuse_setting``), GM
bandwidth contention between cores, mask arithmetic on diagonal causal blocks, a5's direct UB -> L1 path
for P (FAI on Ascend 950; every profile goes through GM here), compile time and
graph size beyond the C-TILE-04 per-op limit, PyPTO's splitting of one V1 task over the
AIVs (SIM ran a 64-row V1 of a 2048-wide KV tile as one AIV task), and the UB / L1 of extra
chains and streams (AT-23-R2 gives each chain its own accumulators; neither is charged to the budgets).
"""

from __future__ import annotations

import numpy as np

from opdesign.catalog import load_catalog
from opdesign.plan.buffers import ACC_BYTES
from opdesign.plan.tiles import vec_cols_v2
from opdesign.spec import DTYPE_BYTES
from opdesign.tuning.model.isa import (
    LOAD_PATHS,
    STORE_PATHS,
    TRANSFER_HEAD_CYCLES,
    bandwidth,
    cvt_cycles,
    matmul_cycles,
    vector_cycles,
)
from opdesign.tuning.model.params import CostParams
from opdesign.tuning.space import Context, cdiv, valid_blocks

STAGES = ("C1", "V1", "C2", "V2", "sched")
#: what bounds a candidate's score: a stage, or ``fill`` (the latency of one online-softmax chain)
BOTTLENECKS = (*STAGES, "fill")
#: PTO instructions per vector tile (AT-01 steps, mapping in the module docstring)
V1_INSTRS = ("TMULS", "TROWMAX", "TROWEXPAND", "TSUB", "TEXP", "TROWSUM")  # + TCVT of P
FP8_V1_INSTRS = ("TMUL", "TROWMAX", "TROWEXPAND", "TMUL")  # V's per-token inv_scale into P; AT-08: row max, scale P
V2_INSTRS = ("TROWEXPAND", "TMUL", "TROWEXPAND", "TMUL", "TSUB")  # alpha * O + beta * O_ij
FP8_V2_INSTRS = ("TROWEXPAND", "TMUL")  # AT-06: P row inv_scale (V's scale rode in P)
#: per row tile on [rows, 1] statistics: max, 2 subs, 2 exps, alpha * l, beta * l_ij, add
STATE_INSTRS = ("TSUB", "TSUB", "TSUB", "TEXP", "TEXP", "TMUL", "TMUL", "TSUB")


def _xfer(ctx: Context, path: str, count, nbytes, params: CostParams):
    """``count`` transfers moving ``nbytes`` in total over ``path`` (GM copies: ``params``' figures when set)."""
    side = "load" if path in LOAD_PATHS else "store" if path in STORE_PATHS else None
    head = getattr(params, f"{side}_head_cycles") if side else None
    rate = getattr(params, f"{side}_bytes_per_cycle") if side else None
    return (count * (TRANSFER_HEAD_CYCLES[path] if head is None else head)
            + nbytes / (bandwidth(ctx.device, path) if rate is None else rate))


def _per_shape(rows: np.ndarray, cols: np.ndarray, fn) -> np.ndarray:
    """Evaluate scalar ``fn(rows, cols)`` once per distinct shape and spread it over the arrays."""
    first, inv = group_rows(rows, cols)
    values = np.array([fn(int(rows[i]), int(cols[i])) for i in first.tolist()], dtype=float)
    return values[inv]


def _sum(ops: tuple[str, ...], rows: int, cols: int) -> int:
    return sum(vector_cycles(op, "fp32", rows, cols) for op in ops)


def v1_on_aic(c: dict[str, np.ndarray]) -> np.ndarray:
    """Mask of the candidates whose V1 PyPTO 0.2.0 places on the AIC: a vector tile wider than the
    QK tile's n (``vec_tile`` cols > ``qk_tile`` n). Measured in SIM (``benchmarks/bench_sim_scan.py
    --grid`` on benchmarks/specs/calib_dense_s512.yaml, data in benchmarks/data/calib_dense_s512_scan.jsonl):
    of the 43 tilings that compiled, every such row ran the softmax ops in the cube core's subgraph
    (C1 + V1 one AIC task: 86906 cycles for qk 128x64 against 2 x 9876 for C1 alone with qk 64x128)
    and no other row did; the C1 -> V1 overlap across cores is lost."""
    return c["vc"] > c["n1"]


def stage_cycles(ctx: Context, c: dict[str, np.ndarray], params: CostParams | None = None) -> dict[str, np.ndarray]:
    """Per-task cycles of C1, V1, C2, V2 and per-root ``epilogue`` (AIV, final ``O / l``, cast, store)."""
    spec, dev, params = ctx.spec, ctx.device, params or CostParams()
    s = spec.shape
    d, dt, pdt = s.head_dim, spec.dtype, ctx.p_dtype
    b, pb, acc = DTYPE_BYTES[dt], DTYPE_BYTES[pdt], ACC_BYTES
    col_w = load_catalog().constraint("C-TILE-02").param("align_bytes") // acc
    page = s.block_size if spec.kv_cache == "paged" else None
    q, kv, m0, m1, n0, n1, m20, m21 = c["q"], c["kv"], c["m0"], c["m1"], c["n0"], c["n1"], c["m20"], c["m21"]
    k10, d1, k20, k21, n20, n21 = c["k10"], c["k11"], c["k20"], c["k21"], c["n20"], c["n21"]
    vr, vc, c2 = c["vr"], c["vc"], vec_cols_v2(d)
    fp8 = spec.quant == "fp8"

    blocks = cdiv(q, m1) * cdiv(kv, n1)
    pages_k = cdiv(n1, page) if page else 1
    c1 = np.maximum.reduce([
        _xfer(ctx, "gm_to_l1", blocks * (1 + pages_k), blocks * (m1 * d1 + d1 * n1) * b, params),
        _xfer(ctx, "l1_to_l0a", blocks, blocks * m1 * d1 * b, params)
        + _xfer(ctx, "l1_to_l0b", blocks, blocks * d1 * n1 * b, params),
        blocks * cdiv(m1, m0) * cdiv(n1, n0) * cdiv(d1, k10) * matmul_cycles(m0, k10, n0, dt, dev),
        _xfer(ctx, "l0c_to_gm", blocks * cdiv(m1, m0) * cdiv(n1, n0), blocks * m1 * n1 * acc, params),
    ])
    chunks = cdiv(q, m21) * cdiv(d1, n21) * cdiv(kv, k21)
    pages_v = cdiv(k21, page) if page else 1
    c2_cycles = np.maximum.reduce([
        _xfer(ctx, "gm_to_l1", chunks * (1 + pages_v), chunks * (m21 * k21 + k21 * n21) * pb, params),
        _xfer(ctx, "l1_to_l0a", chunks, chunks * m21 * k21 * pb, params)
        + _xfer(ctx, "l1_to_l0b", chunks, chunks * k21 * n21 * pb, params),
        chunks * cdiv(m21, m20) * cdiv(k21, k20) * cdiv(n21, n20) * matmul_cycles(m20, k20, n20, pdt, dev),
        _xfer(ctx, "l0c_to_gm", cdiv(q, m21) * cdiv(d1, n21) * cdiv(m21, m20) * cdiv(n21, n20), q * n21 * acc, params),
    ])

    # V1 on the AIC (`v1_on_aic`): its rows are the whole q tile on one core, not split over the AIVs
    rows = np.where(v1_on_aic(c), q, cdiv(q, dev.aiv_per_aic))
    row_tiles = cdiv(rows, vr)
    t1 = row_tiles * cdiv(kv, vc)
    softmax = V1_INSTRS + (FP8_V1_INSTRS if fp8 else ())
    per_t1 = _per_shape(vr, vc, lambda r, w: _sum(softmax, r, w) + cvt_cycles("fp32", r, w))
    # a row's max and sum over a KV tile wider than the vector tile: one pairwise merge of the partial
    # statistics per extra column tile, for each of the two (PyPTO's PAIRMAX / PAIRSUM in SIM)
    merges = 2 * row_tiles * (cdiv(kv, vc) - 1)
    rate = params.pair_merge_cycles_per_element
    per_merge = (vr * vc * rate if rate is not None
                 else _per_shape(vr, vc, lambda r, w: vector_cycles("TSUB", "fp32", r, w)))
    v1 = np.maximum.reduce([_xfer(ctx, "gm_to_ub", t1, t1 * vr * vc * acc, params), t1 * per_t1 + merges * per_merge,
                            _xfer(ctx, "ub_to_gm", t1, t1 * vr * vc * pb, params)])
    row_tiles = cdiv(cdiv(q, dev.aiv_per_aic), vr)  # V2 and the epilogue stay on the AIVs
    t2 = row_tiles * cdiv(d, c2)
    rescale = V2_INSTRS + (FP8_V2_INSTRS if fp8 else ())
    per_t2 = _per_shape(vr, np.full_like(vr, c2), lambda r, w: _sum(rescale, r, w))
    per_row = _per_shape(vr, np.full_like(vr, col_w), lambda r, w: _sum(STATE_INSTRS, r, w))
    v2 = np.maximum(_xfer(ctx, "gm_to_ub", t2, t2 * vr * c2 * acc, params), t2 * per_t2 + row_tiles * per_row)
    per_out = _per_shape(vr, np.full_like(vr, c2), lambda r, w: vector_cycles("TROWEXPAND", "fp32", r, w)
                         + vector_cycles("TMUL", "fp32", r, w) + cvt_cycles("fp32", r, w))
    recip = _per_shape(vr, np.full_like(vr, col_w), lambda r, w: vector_cycles("TDIVS", "fp32", r, w))
    epilogue = np.maximum(t2 * per_out + row_tiles * recip, _xfer(ctx, "ub_to_gm", t2, t2 * vr * c2 * b, params))
    return {"C1": c1, "V1": v1, "C2": c2_cycles, "V2": v2, "epilogue": epilogue}


def allocation_matrix(pattern: np.ndarray, cores: int, repeats: int) -> np.ndarray:
    """Copies of each pattern position per core, ``[len(pattern), cores]``: the vectorised twin of
    :func:`opdesign.plan.blocks.greedy_allocation` (same integer closed form)."""
    period = int(pattern.sum())
    out = np.zeros((len(pattern), cores), dtype=np.int64)
    if period == 0 or repeats == 0:
        return out
    a = 2 * (np.cumsum(pattern) - pattern) + pattern  # doubled position of each block in the first copy
    core = np.arange(cores - 1, dtype=np.int64)
    bound = (core[None, :] + 1) * (2 * repeats * period) - a[:, None] * cores
    ends = np.clip(-(-bound // (2 * period * cores)), 0, repeats)
    ends = np.concatenate([ends, np.full((len(pattern), 1), repeats, dtype=np.int64)], axis=1)
    out[:] = np.diff(np.concatenate([np.zeros((len(pattern), 1), dtype=np.int64), ends], axis=1), axis=1)
    return out


def group_rows(*cols: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(index of the first row of each distinct row, group of every row) for parallel integer columns,
    groups in lexicographic row order: ``np.unique(np.stack(cols, axis=1), axis=0, return_index=True,
    return_inverse=True)`` on one packed int64 key instead of sorted rows (the columns are packed by
    value when their ranges fit, else by their distinct-value codes)."""
    lows = [int(col.min()) if len(col) else 0 for col in cols]
    spans = [int(col.max()) - lo + 1 if len(col) else 1 for col, lo in zip(cols, lows, strict=True)]
    key = np.zeros(len(cols[0]), dtype=np.int64)
    total = 1
    for span in spans:
        total *= span
    for col, lo, span in zip(cols, lows, spans, strict=True):
        if total < 2 ** 62:
            key = key * span + (col - lo)
        else:
            values, code = np.unique(col, return_inverse=True)
            key = key * len(values) + code.reshape(-1)
    _, first, inv = np.unique(key, return_index=True, return_inverse=True)
    return first, inv.reshape(-1)


def _split_ends(mid: np.ndarray | tuple[int, int], period: int, cores: int, repeats: np.ndarray) -> np.ndarray:
    """Blocks on cores ``0..c`` for each core ``c`` of the contiguous greedy split of a pattern with
    doubled midpoints ``mid`` and total ``period``, repeated ``repeats[j]`` times (one row per count):
    the closed form of :func:`opdesign.plan.blocks.greedy_balance` (one division and one bisection per
    core), for all the head groups of a tile pair at once.

    ``mid`` is ``(k, n)`` for ``n`` blocks of ``k`` KV steps each (midpoints ``k (2 i + 1)``: the
    bisection is a division, no array of the pattern)."""
    n, last = (mid[1], mid[0] * (2 * mid[1] - 1)) if isinstance(mid, tuple) else (len(mid), int(mid[-1]))
    reps = repeats.astype(np.int64).reshape(-1, 1)
    bound = np.arange(1, cores, dtype=np.int64) * (2 * reps * period)
    # np.minimum(np.maximum(...)) is np.clip on ints without its per-call overhead
    full = np.minimum(np.maximum(-(-(bound - last * cores) // (2 * period * cores)), 0), reps)
    under = -(-(bound - 2 * full * period * cores) // cores)  # midpoints below this in the partial copy
    if isinstance(mid, tuple):  # k (2 i + 1) < under  <=>  i < (under - k) / 2k
        part = np.minimum(np.maximum(-((mid[0] - under) // (2 * mid[0])), 0), n)
    else:
        part = np.searchsorted(mid, under, side="left")
    ends = full * n + np.where(full == reps, 0, part)
    return np.concatenate((ends, reps * n), axis=1)


def _prefix_before(k: int, prefix: np.ndarray) -> int:
    """Sum of the first ``k`` values of a pattern repeated without end (``prefix``: its inclusive running sums)."""
    copies, rest = divmod(k, len(prefix))
    return copies * int(prefix[-1]) + (int(prefix[rest - 1]) if rest else 0)


def core_loads(ctx: Context, c: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Busiest-core figures after the FAI greedy split of units (batch, head group, q block).

    A unit holds ``head_group`` heads of one q block and weighs ``head_group x``
    its valid KV blocks (mask-aware). Returns per candidate: ``tasks`` (KV steps on
    the busiest core), ``units`` and ``roots`` (q blocks x heads) there, ``bodies``
    (dispatched loop bodies there: ``k // unroll_factor + k % unroll_factor`` per unit of ``k``
    KV steps, one per unit for a static range), ``cores_busy``, ``task_count`` and
    ``body_count`` (all cores), and ``chain_steps`` (KV steps of the longest online-softmax chain: the
    most valid KV blocks of a q block).

    Bodies per unit: ``pypto.loop_unroll`` (PyPTO 0.2.0, ``_controller.py``) sorts the unroll
    list, appends factor 1 and runs one ``pypto.loop`` per factor over what the larger ones left,
    so ``unroll_list=[u]`` runs ``k // u`` bodies of ``u`` KV steps and then ``k % u`` bodies of
    one step each (not one partial body). Measured (SIM, fidelity BSND SPEC, 5 KV tiles a unit):
    unroll 8 runs 103.1 us, exactly unroll 1 (five one-step bodies either way), unroll 4 73.3 us
    (two bodies), unroll 2 82.4 us (three).

    The busiest core holds a contiguous run of units, so each ``(q, kv)`` tile pair costs one
    pass over its q blocks (counts, running sums) and each head group a closed-form split
    (:func:`_split_ends`, ``O(cores log q blocks)``, all head groups of the pair at once), never one step per unit.
    """
    s = ctx.spec.shape
    cores = ctx.cube_cores
    first, inv = group_rows(c["q"], c["kv"], c["g"], c["u"])
    by_pair: dict[tuple[int, int], list[tuple[int, int, int]]] = {}
    for i, (q, kv, g, u) in enumerate(zip(*(c[k][first].tolist() for k in ("q", "kv", "g", "u")), strict=True)):
        by_pair.setdefault((q, kv), []).append((i, g, u))
    table = np.zeros((len(first), 8))
    for (q, kv), rows in by_pair.items():
        ks = valid_blocks(ctx, q, kv)
        k0, n = int(ks[0]), len(ks)
        uniform = bool((ks == k0).all())  # every q block visits k0 KV blocks (no mask): closed forms, no running sums
        if uniform:
            prefix, period, mid = None, k0 * n, (k0, n)
        else:
            prefix = np.cumsum(ks)  # inclusive running sums
            period = int(prefix[-1])
            mid = 2 * prefix - ks  # doubled midpoint of each q block in the first copy (weights scale with g alike)
        static = max(int(ks.max()), 1) <= ctx.static_range
        splits: dict[int, tuple | None] = {g: None for g in sorted({g for _, g, _ in rows})}
        live = [g for g in splits if period and s.batch * (s.num_heads // g)]  # head groups with a valid block
        if live:  # the split of every head group of the pair in one pass
            groups = np.array(live, dtype=np.int64).reshape(-1, 1)
            reps = s.batch * (s.num_heads // groups)
            ends = _split_ends(mid, period, cores, reps)
            if uniform:
                at = ends * (k0 * groups)
            else:
                copies, rest = np.divmod(ends, n)
                at = (copies * period + np.where(rest > 0, prefix[rest - 1], 0)) * groups
            loads = np.diff(at, axis=1, prepend=0).astype(np.float64)
            busy = np.argmax(loads, axis=1)
            for j, g in enumerate(live):
                b = int(busy[j])
                splits[g] = (float(loads[j].max()), int(np.count_nonzero(loads[j])), float(loads[j].sum()),
                             int(ends[j, b - 1]) if b else 0, int(ends[j, b]), int(reps[j, 0]))
        body_prefix: dict[int, np.ndarray] = {}  # dispatched bodies per unit, running sums, per unroll factor
        for i, g, u in rows:
            if splits[g] is None:
                continue  # no valid block: every figure 0
            tasks, busy_cores, total, start, end, repeats = splits[g]
            units = end - start
            if uniform:  # the same bodies per unit: 1 if a block (static), else k0 // u + k0 % u per unit
                per_unit = min(k0, 1) if static else k0 // u + k0 % u
                table[i] = (tasks, units, units * g, units * per_unit, busy_cores, total, repeats * n * per_unit, k0)
                continue
            per_body = 0 if static else u  # static: one body per unit that has a block
            if per_body not in body_prefix:
                body_prefix[per_body] = (np.cumsum(ks > 0) if static else prefix if u == 1
                                         else np.cumsum(ks // u + ks % u))
            bodies = _prefix_before(end, body_prefix[per_body]) - _prefix_before(start, body_prefix[per_body])
            table[i] = (tasks, units, units * g, bodies, busy_cores, total, repeats * int(body_prefix[per_body][-1]),
                        int(ks.max()))
    out = table[inv]
    names = ("tasks", "units", "roots", "bodies", "cores_busy", "task_count", "body_count", "chain_steps")
    return {name: out[:, j] for j, name in enumerate(names)}


def useful_streams(streams: np.ndarray, units: np.ndarray, choices: tuple[int, ...]) -> np.ndarray:
    """Mask of stream counts that can matter: streams overlap whole units, so counts above the
    smallest choice that covers the busiest core's units behave alike (the smallest is kept)."""
    ladder = np.array(sorted(choices))
    cap = ladder[np.minimum(np.searchsorted(ladder, units), len(ladder) - 1)]
    return streams <= cap


def score(ctx: Context, c: dict[str, np.ndarray], params: CostParams,
          load: dict[str, np.ndarray] | None = None) -> dict[str, np.ndarray]:
    """Stage cycles per task, ``score_cycles`` and the bottleneck index per candidate (module docstring).

    ``compute = max(aic_pool, aiv_pool, chain) + roots x epilogue``: the tasks of all cores over the
    ``ctx.cube_cores`` AIC (and their AIVs), or the latency of the longest online-softmax chain,
    whichever is longer. ``dispatch = task_overhead_cycles x body_count / chains + step_dispatch_cycles x
    task_count`` adds to it (one scheduler for all cores; a LOOP_h body holds ``min(streams, heads /
    head_group)`` chains' units). Each configured stream beyond the first that has a unit adds
    ``stream_switch_cycles`` to every compute stage. Bottleneck (index into :data:`BOTTLENECKS`): ``sched``
    when the dispatch exceeds the compute, ``fill`` when one chain's latency bounds it (more cores would not
    help), else the slowest stage of the busier pool (AIC: C1, C2, and V1 when it runs on the cube
    core, :func:`v1_on_aic`; AIV: V2, and V1 otherwise).
    """
    st = stage_cycles(ctx, c, params)
    load = core_loads(ctx, c) if load is None else load
    units = np.minimum(np.maximum(load["units"], 1), np.maximum(load["tasks"], 1))  # units with work
    running = np.minimum(c["s"], units)  # streams that hold a unit
    switch = params.stream_switch_cycles * (running - 1)
    stages = {k: st[k] + switch for k in ("C1", "V1", "C2", "V2")}
    tasks, epilogues = load["tasks"], load["roots"] * st["epilogue"]
    # one scheduler dispatches the loop bodies of every core, and its time adds to the compute:
    # measured (PyPTO 0.2.0 SIM) on the fidelity BSND SPEC, 103.1 / 82.4 / 73.3 us for 60 / 36 / 24
    # bodies in all (unroll 1 / 2 / 4) is 53 us + 0.83 us a body, and on the dense s2048 SPEC
    # 245.1 / 165.0 us for 128 / 64 bodies (unroll 1 / 2) 1.25 us a body: linear in the bodies of
    # all cores (per busiest core it would be 10 and 20 us a body), so not a per-core share. A LOOP_h
    # body of the streams kernel holds S chains (templates/sk01/kernel_chains.j2): S times fewer bodies
    chains = np.minimum(c["s"], np.maximum(ctx.spec.shape.num_heads // c["g"], 1))
    dispatch = (params.task_overhead_cycles * load["body_count"] / chains
                + params.step_dispatch_cycles * load["task_count"])
    stages["sched"] = dispatch / np.maximum(tasks, 1)  # its share per task on the busiest core (reported)
    fill = stages["C1"] + stages["V1"] + stages["C2"] + stages["V2"]
    on_aic = v1_on_aic(c)  # V1 runs on the cube core: it adds to the AIC's turn, not the AIVs'
    v1_aic = np.where(on_aic, stages["V1"], 0.0)
    aic, aiv = stages["C1"] + stages["C2"] + v1_aic, stages["V1"] - v1_aic + stages["V2"]
    interval = np.maximum.reduce([aic, aiv, fill / params.pipeline_depth])
    chain = fill + np.maximum(load["chain_steps"] - 1, 0) * interval
    pools = np.stack([load["task_count"] * aic, load["task_count"] * aiv], axis=1) / ctx.cube_cores
    compute = np.maximum(pools.max(axis=1), chain) + epilogues
    total = compute + dispatch
    per_stage = np.stack([stages[k] for k in STAGES], axis=1)
    # the largest stage of the busier pool; V1 counts in the pool it runs in (the AIC when on_aic)
    none = np.full(len(chain), -np.inf)
    on_cube = np.stack([stages["C1"], np.where(on_aic, stages["V1"], none), stages["C2"]], axis=1)
    on_vec = np.stack([np.where(on_aic, none, stages["V1"]), stages["V2"]], axis=1)
    aic_stage = np.array([0, 1, 2])[np.argmax(on_cube, axis=1)]
    aiv_stage = np.array([1, 3])[np.argmax(on_vec, axis=1)]
    bottleneck = np.select(
        [dispatch > compute, chain >= pools.max(axis=1), pools[:, 0] >= pools[:, 1]],
        [np.full(len(chain), BOTTLENECKS.index("sched")), np.full(len(chain), BOTTLENECKS.index("fill")),
         aic_stage],
        aiv_stage)
    return {"stages": per_stage, "score": np.rint(total), "bottleneck": bottleneck, "epilogue": st["epilogue"], **load}
