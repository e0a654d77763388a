"""Building blocks of the SK-01 plan (:func:`opdesign.skeletons.sk01.plan.estimate_sk01`): form checks,
vector tiles, loop and state rows, the module (pure functions); the expansion estimate is in :mod:`.budget`.
"""

from __future__ import annotations

from math import ceil
from typing import TYPE_CHECKING

from opdesign.catalog import Card, DeviceProfile, load_catalog
from opdesign.plan.models import (
    CubeTile,
    FormCheck,
    LoopRow,
    Module,
    StateRow,
    TensorSpec,
    VecTile,
    text,
)
from opdesign.plan.tiles import align_up, axis_hi, vec_cols_v2
from opdesign.skeletons.sk01.budget import expansion, ub_budget  # expansion lives with the UB budget (as in sk02, sk16)

if TYPE_CHECKING:
    from opdesign.spec import Spec


def form_checks(spec: Spec, sk01: Card, q_tile_perf: int) -> list[FormCheck]:
    """The four SK-01 performance-form conditions, evaluated on the SPEC's typical shape."""
    s = spec.shape
    kv_axis = next((a for a in spec.dynamic_axes if a.name == "seq_kv"), None)
    if spec.layout == "TND":  # packed rows: each batch's K length is read at run time (actual_seq_kv / kv_act_seqs)
        c1 = (False, text("sk01.perf1.packed_paged" if spec.kv_cache == "paged" else "sk01.perf1.packed"))
    elif kv_axis is None:
        c1 = (True, text("sk01.perf1.fixed", seq_kv=s.seq_kv))
    elif not kv_axis.uniform:
        c1 = (False, text("sk01.perf1.varlen", lo=kv_axis.range[0], hi=kv_axis.range[1]))
    else:
        c1 = (kv_axis.range[0] == kv_axis.range[1],
              text("sk01.perf1.dynamic", lo=kv_axis.range[0], hi=kv_axis.range[1]))
    dims = sk01.param("perf_head_dims")
    lo, hi = sk01.param("perf_root_range")
    # one seq_q for the tile and the count: the upper bound the compile-time Q_TILE is sized for
    sq_hi = axis_hi(spec, "seq_q")
    roots = s.batch * s.num_heads * ceil(sq_hi / q_tile_perf)
    ratio_min = sk01.param("perf_ratio_min")
    perf = spec.performance
    c4 = (perf is not None and perf.ratio > ratio_min,
          text("sk01.perf4.none") if perf is None
          else text("sk01.perf4.ratio", current_us=perf.current_us, baseline_us=perf.baseline_us, ratio=perf.ratio))
    src = "SK-01 performance-oriented form, condition "
    return [
        FormCheck(id="SK-01-PERF-1", condition=text("sk01.perf1"),
                  observed=c1[1], passed=c1[0], source=src + "1"),
        FormCheck(id="SK-01-PERF-2", condition=text("sk01.perf2", dims=", ".join(str(d) for d in dims)),
                  observed=text("sk01.perf2.observed", head_dim=s.head_dim),
                  passed=s.head_dim in dims, source=src + "2"),
        FormCheck(id="SK-01-PERF-3", condition=text("sk01.perf3", lo=lo, hi=hi),
                  observed=text("sk01.perf3.observed", q_tile=q_tile_perf, batch=s.batch, num_heads=s.num_heads,
                                seq_q=sq_hi, roots=roots),
                  passed=lo <= roots <= hi, source=src + "3"),
        FormCheck(id="SK-01-PERF-4", condition=text("sk01.perf4", ratio_min=ratio_min),
                  observed=c4[1], passed=c4[0], source=src + "4"),
    ]


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
        return tiles(min(lo, q_tile) if q_tile >= 16 else 16, min(hi, align_up(kv_tile, 16)))
    best = None
    for r in (16, 32, 64):
        c = 64
        while c <= kv_tile:
            cand = tiles(r, c)
            ub = ub_budget(device, q_tile=q_tile, head_dim=d, resident_state=False, cube=cube, vec=cand)
            if ub.fits and expansion(q_tile, kv_tile, d, cand, 1).max_per_op <= limit:
                key = (r * c, c)
                if best is None or key > best[0]:
                    best = (key, cand)
            c *= 2
    return best[1] if best else tiles(lo, min(hi, kv_tile))


def vec_tiles(spec: Spec, q_tile: int, kv_tile: int, rows: int, cols: int) -> dict[str, VecTile]:
    """V1 ``[rows, cols]`` over the ``[q_tile, kv_tile]`` scores and V2 ``[rows, vec_cols_v2]`` over
    ``[q_tile, head_dim]``."""
    d = spec.shape.head_dim
    return {
        "V1": VecTile(stage="V1", shape=(rows, cols), dtype="fp32", view=(q_tile, kv_tile),
                      reason=text("sk01.vec.v1")),
        "V2": VecTile(stage="V2", shape=(rows, vec_cols_v2(d)), dtype="fp32", view=(q_tile, d),
                      reason=text("sk01.vec.v2")),
    }


def loop_rows(spec: Spec, kv_loop: str) -> list[LoopRow]:
    kv_construct = {"range": text("sk01.loop.static_range"),
                    "loop_unroll": "pypto.loop_unroll"}.get(kv_loop, "pypto.loop")
    return [
        LoopRow(name="b_idx", loop_kind="pypto.loop", bound="batch", step="1", dependence="independent"),
        LoopRow(name="h_idx", loop_kind="pypto.loop", bound="num_heads", step="1",
                dependence=text("sk01.loop.h_idx", group_size=spec.shape.num_heads // spec.shape.num_kv_heads)),
        LoopRow(name="q_idx", loop_kind="pypto.loop", bound="ceildiv(seq_q, Q_TILE)", step=text("sk01.loop.q_step"),
                dependence=text("sk01.loop.q_idx")),
        LoopRow(name="kv_idx", loop_kind=kv_construct, bound="ceildiv(seq_kv, KV_TILE)", step=text("sk01.loop.kv_step"),
                dependence=text("sk01.loop.kv_idx")),
    ]


def state_rows(spec: Spec, q_tile: int, form: str) -> list[StateRow]:
    d = spec.shape.head_dim
    init = "sk01.state.init_ssa" if form == "performance" else "sk01.state.init_branch"
    return [
        StateRow(name="mi", shape=f"[{q_tile}, 1]", dtype="fp32", init=text(init, value="mij"),
                 update="mnew = max(mi, mij)", final_use=text("sk01.state.mi_use")),
        StateRow(name="li", shape=f"[{q_tile}, 1]", dtype="fp32", init=text(init, value="lij"),
                 update="alpha*li + beta*lij",
                 final_use=text("sk01.state.li_use" if spec.mask == "none" else "sk01.state.li_use_masked")),
        StateRow(name="oi", shape=f"[{q_tile}, {d}]", dtype="fp32", init=text(init, value="oij"),
                 update="alpha*oi + beta*oij", final_use=text("sk01.state.oi_use", dtype=spec.dtype)),
    ]


def module(spec: Spec, inputs: list[TensorSpec], out: TensorSpec) -> Module:
    """The one SK-01 module: the whole C1 -> V1 -> C2 loop nest (CANNBot interface format)."""
    return Module(
        id=1, name=f"{spec.op_name}_sk01",
        description=text("sk01.module"),
        inputs=[{"name": t.name, "source": "primary"} for t in inputs],
        outputs=[{"name": out.name, "shape": out.shape, "dtype": out.dtype}],
    )
