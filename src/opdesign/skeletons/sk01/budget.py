"""UB budget of one SK-01 forward task (bytes per vector sub-block) and its C-TILE-04 expansion estimate.

Sources: C-TILE-03 (estimate from the device capacity and the real resident
tensors; per-op formula with ``tensor_count``), SK-01's structural table
(resident ``oi``), and the FlashAttention-Infer static resource items
(domain.md §7). L1 and L0 budgets are shared: :mod:`opdesign.plan.buffers`.
"""

from __future__ import annotations

from math import ceil

from opdesign.catalog import DeviceProfile, load_catalog
from opdesign.plan.buffers import (
    ACC_BYTES,
    RESULT_BUFFERS,
    make_budget,
    make_expansion,
    softmax_state_items,
    vec_op_bytes,
)
from opdesign.plan.core import Budget, BudgetItem, CubeTile, Expansion, ExpansionOp, VecTile, text
from opdesign.plan.tiles import align_up

# Vector ops of each stage and their input counts (AT-01 per-block chain; V2 is
# the accumulator rescale after C2, FAI "RescaleO").
V1_OPS = (("muls_scale", 1), ("amax", 1), ("sub", 2), ("exp", 1), ("sum", 1), ("cast_p", 1))
V2_OPS = (("mul_alpha", 2), ("mul_beta", 2), ("add", 2), ("div_l", 2))
# AT-08 before C2 (V's per-token inv_scale folded into P's columns, row amax, scale, cast to FP8) and
# AT-06 after it (one dequant multiply by the P row inv_scale).
FP8_V1_OPS = (("mul_v_token_scale", 2), ("amax_p", 1), ("muls_p_scale", 2), ("cast_fp8", 1))
FP8_V2_OPS = (("mul_p_inv_scale", 2),)


def ub_budget(
    device: DeviceProfile,
    *,
    q_tile: int,
    head_dim: int,
    resident_state: bool,
    cube: dict[str, CubeTile],
    vec: dict[str, VecTile],
) -> Budget:
    """UB bytes per vector sub-block (AIV) for one SK-01 forward task.

    ``resident_state`` is True when oi/li/mi are explicit buffers (safe baseline)
    and False for SSA re-binding (performance form, SK-01 invariant 3: no
    resident buffer). Rows split over the ``aiv_per_aic`` sub-blocks as in the
    FAI kernel (``qSeqBase / CV_RATIO``).
    """
    tiling = load_catalog().constraint("C-TILE-03")
    counts = tiling.param("tensor_count")
    align = load_catalog().constraint("C-TILE-02").param("align_bytes")
    cv = device.aiv_per_aic
    rows = ceil(q_tile / cv)
    items: list[BudgetItem] = []
    if resident_state:
        items += [
            BudgetItem(name="oi_resident", bytes=rows * head_dim * ACC_BYTES,
                       formula=text("sk01.ub.oi", cv=cv, rows=rows, head_dim=head_dim),
                       source="SK-01 structural table (resident oi), SK-01-R6 FP32"),
            BudgetItem(name="li_resident", bytes=rows * align,
                       formula=text("sk01.ub.row_stat", cv=cv, align=align),
                       source="SK-01-R2 accumulators, C-TILE-02 32 B tail"),
            BudgetItem(name="mi_resident", bytes=rows * align,
                       formula=text("sk01.ub.row_stat", cv=cv, align=align),
                       source="SK-01-R2 accumulators, C-TILE-02 32 B tail"),
        ]
    v1 = vec_op_bytes(vec["V1"], counts["reduce"])
    v2 = vec_op_bytes(vec["V2"], counts["binary"])
    items.append(BudgetItem(
        name="vector_op_peak", bytes=max(v1, v2),
        formula=text("sk01.ub.vector_op_peak", v1_rows=vec["V1"].shape[0], v1_cols=vec["V1"].shape[1],
                     reduce=counts["reduce"], v2_rows=vec["V2"].shape[0], v2_cols=vec["V2"].shape[1],
                     binary=counts["binary"]),
        source="C-TILE-03 per-op formula (tensor_count reduce/binary)"))
    c1, c2 = cube["C1"], cube["C2"]
    q_base, kv_base = c1.m[1], c1.n[1]
    half = ceil(q_base / cv)
    items += [
        BudgetItem(name="MM1_RESULT_SIZE", bytes=half * kv_base * ACC_BYTES * RESULT_BUFFERS,
                   formula=text("ub.mm1_result", buffers=RESULT_BUFFERS, half=half, kv_base=kv_base),
                   source="FAI example 49 static resources (Ascend C examples/49_ascend950_flash_attention_infer)"),
        BudgetItem(name="MM2_RESULT_SIZE",
                   bytes=ceil(c2.m[1] / cv) * align_up(head_dim, 64) * ACC_BYTES * RESULT_BUFFERS,
                   formula=text("ub.mm2_result", buffers=RESULT_BUFFERS),
                   source="FAI example 49 static resources (Ascend C examples/49_ascend950_flash_attention_infer)"),
        BudgetItem(name="SHARE_UB_SIZE", bytes=ceil(q_base / 2) * ACC_BYTES,
                   formula=text("ub.share", half=ceil(q_base / 2)),
                   source="FAI example 49 static resources (Ascend C examples/49_ascend950_flash_attention_infer)"),
    ]
    items += softmax_state_items(half, align)
    return make_budget("UB", items, device.ub_bytes, capacity_source=f"devices.yaml {device.ref('ub_bytes')}")


def expansion(q_tile: int, kv_tile: int, head_dim: int, vec: dict[str, VecTile], traced_copies: int,
              fp8: bool = False) -> Expansion:
    """Per-op ``ceil(view / tile) x (1 + inputs)`` for V1 and V2 (C-TILE-04 / quick-reference formula)."""
    ops = []
    tables = (("V1", V1_OPS + (FP8_V1_OPS if fp8 else ())), ("V2", V2_OPS + (FP8_V2_OPS if fp8 else ())))
    for stage, table in tables:
        t = vec[stage]
        n = ceil(t.view[0] / t.shape[0]) * ceil(t.view[1] / t.shape[1])
        ops += [ExpansionOp(stage=stage, op=name, inputs=k, tiles=n, expressions=n * (1 + k)) for name, k in table]
    return make_expansion(ops, traced_copies)
