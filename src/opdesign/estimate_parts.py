"""Building blocks of :func:`opdesign.estimate.estimate` (pure functions, no text formatting beyond reasons)."""

from __future__ import annotations

from math import ceil
from typing import TYPE_CHECKING, Any

from opdesign import budget
from opdesign.catalog import Card, DeviceProfile, load_catalog
from opdesign.plan import (
    ConfigEntry,
    CubeTile,
    Expansion,
    ExpansionOp,
    FormCheck,
    LoopRow,
    Module,
    StateRow,
    TensorSpec,
    VecTile,
)

if TYPE_CHECKING:
    from opdesign.spec import Spec

# Vector ops of each stage and their input counts (AT-01 per-block chain; V2 is
# the accumulator rescale after C2, FAI "RescaleO").
V1_OPS = (("muls_scale", 1), ("amax", 1), ("sub", 2), ("exp", 1), ("sum", 1), ("cast_p", 1))
V2_OPS = (("mul_alpha", 2), ("mul_beta", 2), ("add", 2), ("div_l", 2))
# AT-08 before C2 (row amax, scale, cast to FP8) and AT-06 after it (two dequant multiplies).
FP8_V1_OPS = (("amax_p", 1), ("muls_p_scale", 2), ("cast_fp8", 1))
FP8_V2_OPS = (("mul_p_inv_scale", 2), ("mul_v_channel_scale", 2))
NP_DTYPE = {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32"}


def form_checks(spec: Spec, sk01: Card, q_tile_perf: int) -> list[FormCheck]:
    """The four SK-01 performance-form conditions, evaluated on the SPEC's typical shape."""
    s = spec.shape
    kv_axis = next((a for a in spec.dynamic_axes if a.name == "seq_kv"), None)
    if kv_axis is None:
        c1 = (True, f"seq_kv fixed at {s.seq_kv}")
    elif not kv_axis.uniform:
        c1 = (False, f"seq_kv is non-uniform varlen in [{kv_axis.range[0]}, {kv_axis.range[1]}]")
    else:
        c1 = (kv_axis.range[0] == kv_axis.range[1], f"seq_kv dynamic in [{kv_axis.range[0]}, {kv_axis.range[1]}]")
    dims = sk01.param("perf_head_dims")
    lo, hi = sk01.param("perf_root_range")
    roots = s.batch * s.num_heads * ceil(s.seq_q / q_tile_perf)
    ratio_min = sk01.param("perf_ratio_min")
    perf = spec.performance
    c4 = (perf is not None and perf.ratio > ratio_min,
          "no performance target in the SPEC" if perf is None
          else f"current {perf.current_us:.10g} us / baseline {perf.baseline_us:.10g} us = {perf.ratio:.1f}x")
    src = "SK-01 performance-oriented form, condition "
    return [
        FormCheck(id="SK-01-PERF-1", condition="K-side length is a uniform compile-time constant",
                  observed=c1[1], passed=c1[0], source=src + "1"),
        FormCheck(id="SK-01-PERF-2", condition=f"head_dim in {dims}", observed=f"head_dim = {s.head_dim}",
                  passed=s.head_dim in dims, source=src + "2"),
        FormCheck(id="SK-01-PERF-3", condition=f"root_count with Q_TILE = seq_q/2 in [{lo}, {hi}]",
                  observed=f"Q_TILE = align16(seq_q hi / 2) = {q_tile_perf}; batch {s.batch} x num_heads {s.num_heads} "
                           f"x ceil(seq_q {s.seq_q} / {q_tile_perf}) = {roots}",
                  passed=lo <= roots <= hi, source=src + "3"),
        FormCheck(id="SK-01-PERF-4", condition=f"performance target more than {ratio_min}x from the baseline",
                  observed=c4[1], passed=c4[0], source=src + "4"),
    ]


def _l0_for(l1: int, cap: int, align: int) -> int:
    """Largest L0 <= cap that divides ``l1`` and is a multiple of ``align`` (C-TILE-05)."""
    for l0 in range(min(cap, l1), 0, -1):
        if l1 % l0 == 0 and l0 % align == 0:
            return l0
    return l1


def choose_cube_tiles(spec: Spec, form: str, q_tile: int, kv_tile: int, sk01: Card,
                      qk_tile: int | None = None, pv_tile: int | None = None) -> dict[str, CubeTile]:
    """C1 (S = Q K^T: m=q rows, k=head_dim, n=kv cols) and C2 (O = P V: m=q rows, k=kv, n=head_dim).

    Safe baseline: ``[128, 128]`` per axis clipped to the tile (SK-01 safe form).
    Performance form: the K side of C2 doubles its L1 tile (fewer, larger PV
    loads: FAI tuning "larger kvSeqBase"). C1's k L1 equals head_dim
    (FAI ``L1TileShape::K = head_dim``). All axes satisfy C-TILE-05.
    A cost-model candidate (:mod:`opdesign.costmodel`) passes ``qk_tile`` (the
    L0 = L1 tile of C1's m and n and of C2's m, replacing the safe tile) and
    ``pv_tile`` (C2's k L1 tile); both default to the rule above.
    """
    safe = sk01.param("safe_cube_tile")
    align = load_catalog().constraint("C-TILE-05").param("cube_align_elems").get(spec.dtype, 8)
    d = spec.shape.head_dim
    qk = qk_tile or safe
    m1 = min(qk, budget.align_up(q_tile, align))
    n1 = min(qk, budget.align_up(kv_tile, align))
    k_c2 = min(pv_tile or (2 * safe if form == "performance" else safe), budget.align_up(kv_tile, align))
    d_l1 = budget.align_up(d, align)
    dt = spec.dtype
    ax = lambda l1, cap=safe: (_l0_for(l1, cap, align), l1)  # noqa: E731
    return {
        "C1": CubeTile(stage="C1", m=ax(m1, qk), k=ax(d_l1), n=ax(n1, qk), operand_dtype=dt,
                       reason="m: q rows, k: head_dim (L1 = head_dim, FAI), n: kv columns; [L0, L1] per C-TILE-05"),
        "C2": CubeTile(stage="C2", m=ax(m1, qk), k=ax(k_c2), n=ax(d_l1), operand_dtype="fp8" if spec.quant == "fp8" else dt,
                       reason="m: q rows, k: kv columns of P, n: head_dim; P and V share the operand dtype (C-API-02)"),
    }


def choose_vec_tiles(spec: Spec, form: str, q_tile: int, kv_tile: int, cube: dict[str, CubeTile],
                     device: DeviceProfile, sk01: Card) -> dict[str, VecTile]:
    """V1 (softmax chain on ``[q_tile, kv_tile]`` FP32) and V2 (rescale on ``[q_tile, head_dim]`` FP32).

    Columns are multiples of 16 elements so both FP32 (8) and the BF16/FP16 cast
    of P (16) meet C-TILE-02. Safe baseline: the smallest tile of the
    ``safe_vec_range``. Performance form: the largest power-of-two tile whose UB
    total fits (C-TILE-03) and whose per-op expansion stays within C-TILE-04.
    """
    lo, hi = sk01.param("safe_vec_range")
    d = spec.shape.head_dim
    limit = load_catalog().constraint("C-TILE-04").param("expansion_limit")
    tiles = lambda r, c: vec_tiles(spec, q_tile, kv_tile, r, c)  # noqa: E731

    if form == "baseline":
        return tiles(min(lo, q_tile) if q_tile >= 16 else 16, min(hi, budget.align_up(kv_tile, 16)))
    best = None
    for r in (16, 32, 64):
        c = 64
        while c <= kv_tile:
            cand = tiles(r, c)
            ub = budget.ub_budget(device, q_tile=q_tile, head_dim=d, resident_state=False, cube=cube, vec=cand)
            if ub.fits and expansion(q_tile, kv_tile, d, cand, 1).max_per_op <= limit:
                key = (r * c, c)
                if best is None or key > best[0]:
                    best = (key, cand)
            c *= 2
    return best[1] if best else tiles(lo, min(hi, kv_tile))


def vec_cols_v2(head_dim: int) -> int:
    """Columns of the V2 tile: ``min(align16(head_dim), 128)`` (C-TILE-02 for FP32 and the output cast)."""
    return min(budget.align_up(head_dim, 16), 128)


def vec_tiles(spec: Spec, q_tile: int, kv_tile: int, rows: int, cols: int) -> dict[str, VecTile]:
    """V1 ``[rows, cols]`` over the ``[q_tile, kv_tile]`` scores and V2 ``[rows, vec_cols_v2]`` over ``[q_tile, head_dim]``."""
    d = spec.shape.head_dim
    return {
        "V1": VecTile(stage="V1", shape=(rows, cols), dtype="fp32", view=(q_tile, kv_tile),
                      reason="softmax chain on S in FP32; columns 16-aligned for the FP32 ops and the P cast (C-TILE-02)"),
        "V2": VecTile(stage="V2", shape=(rows, vec_cols_v2(d)), dtype="fp32", view=(q_tile, d),
                      reason="accumulator rescale on [q_tile, head_dim] in FP32 (C-TILE-08: new shape, new TileShape)"),
    }


def expansion(q_tile: int, kv_tile: int, head_dim: int, vec: dict[str, VecTile], traced_copies: int,
              fp8: bool = False) -> Expansion:
    """Per-op ``ceil(view / tile) x (1 + inputs)`` for V1 and V2 (C-TILE-04 / quick-reference formula)."""
    limit = load_catalog().constraint("C-TILE-04").param("expansion_limit")
    ops = []
    tables = (("V1", V1_OPS + (FP8_V1_OPS if fp8 else ())), ("V2", V2_OPS + (FP8_V2_OPS if fp8 else ())))
    for stage, table in tables:
        t = vec[stage]
        n = ceil(t.view[0] / t.shape[0]) * ceil(t.view[1] / t.shape[1])
        ops += [ExpansionOp(stage=stage, op=name, inputs=k, tiles=n, expressions=n * (1 + k)) for name, k in table]
    worst = max(o.expressions for o in ops)
    return Expansion(ops=ops, max_per_op=worst, body_total=sum(o.expressions for o in ops) * traced_copies,
                     traced_copies=traced_copies, limit=limit, within_limit=worst <= limit)


def config_entries(spec: Spec, sk01: Card) -> tuple[dict[str, dict[str, Any]], list[ConfigEntry]]:
    """pass_options / runtime_options from the SK-01 card's configuration recommendations.

    The first recommendation of each key without a ``when`` condition is taken.
    Paged KV and per-batch lengths add ``ready_on_host_tensors`` (required when
    loop bounds read them); paged KV also takes the deeper ``vec_nbuffer_setting``
    of the card (``vec_nbuffer_paged_sparse_max``).
    """
    config: dict[str, dict[str, Any]] = {"pass_options": {}, "runtime_options": {}}
    entries: list[ConfigEntry] = []
    seen = set()
    for rec in sk01.config:
        group, _, name = rec.key.partition(".")
        if group not in config or rec.key in seen or rec.when or rec.status not in ("required", "recommended"):
            continue
        seen.add(rec.key)
        config[group][name] = rec.value
        entries.append(ConfigEntry(key=rec.key, value=rec.value, status=rec.status, purpose=rec.purpose,
                                   source=f"{sk01.id} configuration"))
    host_tensors = (["block_table"] if spec.kv_cache == "paged" else []) + list(batch_lengths(spec).values())
    if host_tensors:
        key = "runtime_options.ready_on_host_tensors"
        rec = next((r for r in sk01.config if r.key == key), None) or next(
            r for r in load_catalog().card("SK-01").config if r.key == key)
        config["runtime_options"]["ready_on_host_tensors"] = host_tensors
        entries.append(ConfigEntry(key=rec.key, value=host_tensors, status="required",
                                   purpose=rec.purpose + " Loop bounds read them.",
                                   source=f"{sk01.id} configuration ({rec.when})"))
    if spec.kv_cache == "paged":
        deep = sk01.param("vec_nbuffer_paged_sparse_max")
        config["pass_options"]["vec_nbuffer_setting"] = dict(deep)
        for i, e in enumerate(entries):
            if e.key == "pass_options.vec_nbuffer_setting":
                entries[i] = e.model_copy(update={"value": dict(deep),
                                                  "purpose": e.purpose + " Paged KV lengthens V1 with the page gather."})
    return config, entries


def _qkv_shape(spec: Spec, heads: str, seq: str) -> list[str]:
    return {"BNSD": ["batch", heads, seq, "head_dim"], "BSND": ["batch", seq, heads, "head_dim"],
            "TND": [f"batch * {seq}", heads, "head_dim"]}[spec.layout]


def check_supported(spec: Spec, supported: dict[str, tuple[str, ...]], what: str) -> None:
    """Raise SpecError naming the first SPEC field whose value ``what`` does not plan."""
    from opdesign.errors import SpecError

    for field, allowed in supported.items():
        value = getattr(spec, field)
        if value not in allowed:
            raise SpecError(f"{field}: {value!r} is not planned by {what} in this version of opdesign "
                            f"(supported: {', '.join(allowed)}); see the README's scope section")


def spec_echo(spec: Spec) -> dict[str, Any]:
    """The SPEC's typical configs (full shapes) and dynamic axes as Plan fields, for every skeleton."""
    return {
        "typical_configs": [
            {"name": c.name, "type": c.type, "priority": c.priority, "seed": c.seed, "note": c.note,
             "shape": spec.config_shape(c).model_dump(exclude_none=True)}
            for c in spec.typical_configs
        ],
        "dynamic_axes": [{"name": a.name, "range": list(a.range), "uniform": a.uniform} for a in spec.dynamic_axes],
    }


def batch_lengths(spec: Spec) -> dict[str, str]:
    """Axis -> name of the ``[batch]`` int32 tensor holding per-batch valid lengths.

    Paged KV always reads ``kv_act_seqs`` (AT-17); a non-uniform (varlen) axis
    reads ``actual_seq_q`` / ``actual_seq_kv``. Loop bounds depend on them, so they
    are ``ready_on_host_tensors`` (SK-01 configuration).
    """
    varlen = {a.name for a in spec.dynamic_axes if not a.uniform}
    out = {}
    if "seq_q" in varlen:
        out["seq_q"] = "actual_seq_q"
    if spec.kv_cache == "paged":
        out["seq_kv"] = "kv_act_seqs"
    elif "seq_kv" in varlen:
        out["seq_kv"] = "actual_seq_kv"
    return out


def interfaces(spec: Spec) -> tuple[list[TensorSpec], list[TensorSpec], list[Module]]:
    """Primary inputs (golden signature order), final outputs and the module list (CANNBot format)."""
    dt = NP_DTYPE[spec.dtype]
    q = TensorSpec(name="q", shape=_qkv_shape(spec, "num_heads", "seq_q"), dtype=dt)
    if spec.kv_cache == "paged":
        cache = ["num_blocks", "block_size", "num_kv_heads", "head_dim"]
        inputs = [q, TensorSpec(name="k_cache", shape=cache, dtype=dt),
                  TensorSpec(name="v_cache", shape=cache, dtype="int8" if spec.quant == "fp8" else dt),
                  TensorSpec(name="block_table", shape=["batch", "max_blocks_per_seq"], dtype="int32")]
    else:
        v_dt = "int8" if spec.quant == "fp8" else dt
        inputs = [q, TensorSpec(name="k", shape=_qkv_shape(spec, "num_kv_heads", "seq_kv"), dtype=dt),
                  TensorSpec(name="v", shape=_qkv_shape(spec, "num_kv_heads", "seq_kv"), dtype=v_dt)]
    inputs += [TensorSpec(name=name, shape=["batch"], dtype="int32") for name in batch_lengths(spec).values()]
    if spec.quant == "fp8":  # FP8 E4M3 bytes travel as int8; one FP32 scale per V channel
        inputs.append(TensorSpec(name="v_scale", shape=["batch", "num_kv_heads", "head_dim"], dtype="float32"))
    if spec.mask == "tensor":
        inputs.append(TensorSpec(name="attn_mask", shape=["batch", "seq_q", "seq_kv"], dtype="bool"))
    if spec.mask == "topk":  # the indexer's picks per query token, -1 = unused slot (shared by the token's heads)
        inputs.append(TensorSpec(name="topk_indices", shape=["batch", "seq_q", "topk"], dtype="int32"))
    out = TensorSpec(name="attn_out", shape=q.shape, dtype=dt)
    module = Module(
        id=1, name=f"{spec.op_name}_sk01",
        description="C1 QK^T -> V1 online softmax -> C2 PV over KV tiles, FP32 state, cast on the last block",
        inputs=[{"name": t.name, "source": "primary"} for t in inputs],
        outputs=[{"name": out.name, "shape": out.shape, "dtype": out.dtype}],
    )
    return inputs, [out], [module]


def loop_rows(spec: Spec, kv_loop: str) -> list[LoopRow]:
    kv_construct = {"range": "Python range (static, <= 8 tiles)", "loop_unroll": "pypto.loop_unroll"}.get(kv_loop, "pypto.loop")
    return [
        LoopRow(name="b_idx", loop_kind="pypto.loop", bound="batch", step="1", dependence="independent"),
        LoopRow(name="h_idx", loop_kind="pypto.loop", bound="num_heads", step="1",
                dependence=f"independent; kv head = h_idx // {spec.shape.num_heads // spec.shape.num_kv_heads}"),
        LoopRow(name="q_idx", loop_kind="pypto.loop", bound="ceildiv(seq_q, Q_TILE)", step="Q_TILE rows",
                dependence="independent (one root each)"),
        LoopRow(name="kv_idx", loop_kind=kv_construct, bound="ceildiv(seq_kv, KV_TILE)", step="KV_TILE columns",
                dependence="carries mi/li/oi (online softmax)"),
    ]


def state_rows(spec: Spec, q_tile: int, form: str) -> list[StateRow]:
    d = spec.shape.head_dim
    init = "first block: bound to the block's value (SSA)" if form == "performance" else "first block branch (is_loop_begin)"
    return [
        StateRow(name="mi", shape=f"[{q_tile}, 1]", dtype="fp32", init=init + ": mij",
                 update="mnew = max(mi, mij)", final_use="m output / rescale"),
        StateRow(name="li", shape=f"[{q_tile}, 1]", dtype="fp32", init=init + ": lij",
                 update="alpha*li + beta*lij", final_use="o = oi / li on the last block"),
        StateRow(name="oi", shape=f"[{q_tile}, {d}]", dtype="fp32", init=init + ": oij",
                 update="alpha*oi + beta*oij", final_use=f"cast to {spec.dtype}, assemble into attn_out"),
    ]
