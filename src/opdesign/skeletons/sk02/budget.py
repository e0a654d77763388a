"""UB budget and expansion estimate of one SK-02 single pass (bytes, elements in).

Shared by :mod:`opdesign.skeletons.sk02.plan` (head-tile fitting) and the validator, which
re-derives them from the ``opdesign:`` block. Sources: SK-02-R2 (full-KV residency), C-TILE-03,
C-TILE-04, the FAI static resource items (domain.md §7).
"""

from __future__ import annotations

from math import ceil

from opdesign.catalog import DeviceProfile, load_catalog
from opdesign.catalog.dtypes import DTYPE_BYTES
from opdesign.plan.buffers import ACC_BYTES, RESULT_BUFFERS, make_budget, make_expansion, vec_op_bytes
from opdesign.plan.core import Budget, BudgetItem, Expansion, ExpansionOp, VecTile
from opdesign.plan.tiles import align_up

# Vector ops of one pass and their input counts. V1: AT-02 chain on [q_tile, S2_TILE]
# (the divide only when normalising before PV); V2 on [q_tile, head_dim]; the two
# index_select gathers of K and V on [S2_TILE, head_dim] (inputs: rows, indices).
V1_OPS = (("muls_scale", 1), ("amax", 1), ("sub", 2), ("exp", 1), ("sum", 1))
GATHER_OPS = (("index_select_k", 2), ("index_select_v", 2))
INDEX_BYTES = 4  # int32 top-k indices (SK-02 index row)


def single_pass_ub_budget(device: DeviceProfile, *, q_tile: int, s2_tile: int, head_dim: int, dtype: str,
                          vec: dict[str, VecTile]) -> Budget:
    """UB bytes per vector sub-block for one SK-02 single pass (SK-02-R2 "full-KV residency", C-TILE-03).

    What must be resident at once is the whole top-k row: without a KV loop the
    row max and row sum see all ``s2_tile`` columns, so S (FP32) and P (input
    dtype) of the sub-block's ``ceil(q_tile / aiv_per_aic)`` rows are counted in
    full. K and V ``[s2_tile, head_dim]`` stream through UB one gather tile at a
    time (``index_select`` tiles its output by the vector TileShape, footprint
    ``t1 x d1 x sizeof(out)``; the cube reads them in ``[128, 128]`` blocks from
    L1, counted by :func:`l1_budget`); counting them whole would rule out the
    card's own example (topk 2048: ``2 x 2048 x head_dim x 2 B`` exceeds 192 KiB
    from head_dim 32 up). Items:

    * ``topk_index_row``: the ``[1, s2_tile]`` int32 index row (SK-02-R8/R9);
    * ``kv_gather_tiles``: one K and one V gather tile (V1 TileShape, input
      dtype) x C-TILE-03 ``tensor_count.unary``;
    * ``scores_row``: ``rows x s2_tile x 4`` x 2 result buffers (FAI
      ``MM1_RESULT_SIZE`` with ``kvSeqBase = s2_tile``);
    * ``p_cast``: ``rows x s2_tile x dtype_bytes`` (P cast before C2, C-API-02);
    * ``row_stats``: row max and row sum, ``[rows, 1]`` padded to 32 B each (C-TILE-02);
    * ``vector_op_peak``: V1 reduce / V2 binary per-op footprint (C-TILE-03);
    * ``MM2_RESULT_SIZE``: ``rows x Align64(head_dim) x 4`` x 2 (FAI).
    """
    counts = load_catalog().constraint("C-TILE-03").param("tensor_count")
    align = load_catalog().constraint("C-TILE-02").param("align_bytes")
    cv = device.aiv_per_aic
    rows = ceil(q_tile / cv)
    b = DTYPE_BYTES[dtype]
    r, c = vec["V1"].shape
    v1 = vec_op_bytes(vec["V1"], counts["reduce"])
    v2 = vec_op_bytes(vec["V2"], counts["binary"]) if "V2" in vec else 0
    sub = f"rows = ceil(q_tile {q_tile} / {cv}) = {rows}"
    items = [
        BudgetItem(name="topk_index_row", bytes=s2_tile * INDEX_BYTES,
                   formula=f"S2_TILE {s2_tile} x {INDEX_BYTES} B (int32 [1, S2_TILE])",
                   source="SK-02-R8/R9 index row, AT-17-R2 clamp"),
        BudgetItem(name="kv_gather_tiles", bytes=2 * r * c * b * counts["unary"],
                   formula=f"2 (K, V) x {r} x {c} x {b} B x tensor_count.unary {counts['unary']}",
                   source="index_select TileShape footprint t1 x d1 x sizeof(out), C-TILE-03"),
        BudgetItem(name="scores_row", bytes=rows * s2_tile * ACC_BYTES * RESULT_BUFFERS,
                   formula=f"{sub}; rows x S2_TILE {s2_tile} x 4 x {RESULT_BUFFERS}",
                   source="SK-02-R2 full-KV residency, FAI MM1_RESULT_SIZE (kvSeqBase = S2_TILE)"),
        BudgetItem(name="p_cast", bytes=rows * s2_tile * b,
                   formula=f"rows {rows} x S2_TILE {s2_tile} x {b} B", source="SK-02-R2, C-API-02 (P cast before C2)"),
        BudgetItem(name="row_stats", bytes=2 * rows * align,
                   formula=f"2 (max, sum) x rows {rows} x {align} B (a [M,1] row padded to 32 B)",
                   source="AT-02-R1, C-TILE-02 32 B tail"),
        BudgetItem(name="vector_op_peak", bytes=max(v1, v2),
                   formula=f"max(V1 reduce {r}x{c}x4x{counts['reduce']}"
                           + (f", V2 binary {vec['V2'].shape[0]}x{vec['V2'].shape[1]}x4x{counts['binary']})"
                              if v2 else ")"),
                   source="C-TILE-03 per-op formula (tensor_count reduce/binary)"),
        BudgetItem(name="MM2_RESULT_SIZE", bytes=rows * align_up(head_dim, 64) * ACC_BYTES * RESULT_BUFFERS,
                   formula=f"rows {rows} x Align64(head_dim {head_dim}) x 4 x {RESULT_BUFFERS}",
                   source="FAI example 49 static resources (Ascend C examples/49_ascend950_flash_attention_infer)"),
    ]
    return make_budget("UB", items, device.ub_bytes, f"devices.yaml {device.ref('ub_bytes')}")


def single_pass_expansion(q_tile: int, s2_tile: int, head_dim: int, vec: dict[str, VecTile],
                          traced_copies: int) -> Expansion:
    """Per op ``ceil(view / tile) x (1 + inputs)`` for the gathers, V1 and V2 of one pass (C-TILE-04).

    The gathers and V1 use the V1 TileShape, V2 its own; the divide sits in V1
    when normalising before PV, in V2 after (:func:`opdesign.skeletons.sk02.plan.normalisation`).
    """
    after = head_dim < s2_tile  # normalisation() == "after_pv"
    table = ([("V1", name, k, (s2_tile, head_dim)) for name, k in GATHER_OPS]
             + [("V1", name, k, (q_tile, s2_tile))
                for name, k in V1_OPS + (() if after else (("div_l", 2),)) + (("cast_p", 1),)]
             + [("V2", name, k, (q_tile, head_dim))
                for name, k in ((("div_l", 2),) if after else ()) + (("cast_out", 1),)])
    ops = []
    for stage, name, k, (rows, cols) in table:
        r, c = vec[stage].shape
        n = ceil(rows / r) * ceil(cols / c)
        ops.append(ExpansionOp(stage=stage, op=name, inputs=k, tiles=n, expressions=n * (1 + k)))
    return make_expansion(ops, traced_copies)
