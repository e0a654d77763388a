"""On-chip buffer budgets (bytes) shared by the estimator, the cost model and the validator.

All functions are pure: tiles in elements in, :class:`~opdesign.plan.Budget` out.
Sources: C-TILE-03 (estimate from the device capacity and the real resident
tensors), the per-operation formula ``tile_elements x dtype_bytes x tensor_count``
(C-TILE-03 parameter ``tensor_count``), SK-01's structural table (resident
``oi``), and the FlashAttention-Infer static resource items (domain.md §7).
"""

from __future__ import annotations

from math import ceil

from opdesign.catalog import DeviceProfile, load_catalog
from opdesign.plan import Budget, BudgetItem, CubeTile, VecTile
from opdesign.spec import DTYPE_BYTES

ACC_BYTES = 4  # FP32 accumulators and matmul results (SK-01 rule 6, C-API-05)
# FlashAttention-Infer example 49 (domain.md §7): pipeline depth of the static
# resource items; MM1/MM2 results are double-buffered in UB.
KERNEL_TASK_NUM = 3
RESULT_BUFFERS = 2


def align_up(value: int, multiple: int) -> int:
    return -(-value // multiple) * multiple


def _budget(buffer: str, items: list[BudgetItem], capacity: int, capacity_source: str) -> Budget:
    total = sum(i.bytes for i in items)
    return Budget(
        buffer=buffer,
        items=items,
        total_bytes=total,
        capacity_bytes=capacity,
        capacity_source=capacity_source,
        fits=total <= capacity,
    )


def vec_op_bytes(tile: VecTile, tensor_count: int) -> int:
    """Per-operation UB of one vector op: ``rows x cols x dtype_bytes x tensor_count`` (C-TILE-03)."""
    return tile.shape[0] * tile.shape[1] * DTYPE_BYTES[tile.dtype] * tensor_count


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
                       formula=f"ceil(q_tile/{cv}) x head_dim x 4 = {rows} x {head_dim} x 4",
                       source="SK-01 structural table (resident oi), SK-01-R6 FP32"),
            BudgetItem(name="li_resident", bytes=rows * align,
                       formula=f"ceil(q_tile/{cv}) x {align} B (a [M,1] row padded to 32 B)",
                       source="SK-01-R2 accumulators, C-TILE-02 32 B tail"),
            BudgetItem(name="mi_resident", bytes=rows * align,
                       formula=f"ceil(q_tile/{cv}) x {align} B (a [M,1] row padded to 32 B)",
                       source="SK-01-R2 accumulators, C-TILE-02 32 B tail"),
        ]
    v1 = vec_op_bytes(vec["V1"], counts["reduce"])
    v2 = vec_op_bytes(vec["V2"], counts["binary"])
    items.append(BudgetItem(
        name="vector_op_peak", bytes=max(v1, v2),
        formula=f"max(V1 reduce {vec['V1'].shape[0]}x{vec['V1'].shape[1]}x4x{counts['reduce']}, "
                f"V2 binary {vec['V2'].shape[0]}x{vec['V2'].shape[1]}x4x{counts['binary']})",
        source="C-TILE-03 per-op formula (tensor_count reduce/binary)"))
    c1, c2 = cube["C1"], cube["C2"]
    q_base, kv_base = c1.m[1], c1.n[1]
    half = ceil(q_base / cv)
    items += [
        BudgetItem(name="MM1_RESULT_SIZE", bytes=half * kv_base * ACC_BYTES * RESULT_BUFFERS,
                   formula=f"qSeqBase/CV_RATIO x kvSeqBase x 4 x {RESULT_BUFFERS} = {half} x {kv_base} x 4 x 2",
                   source="FAI static resources (domain.md §7)"),
        BudgetItem(name="MM2_RESULT_SIZE",
                   bytes=ceil(c2.m[1] / cv) * align_up(head_dim, 64) * ACC_BYTES * RESULT_BUFFERS,
                   formula=f"qSeqBase/CV_RATIO x Align64(embedBase) x 4 x {RESULT_BUFFERS}",
                   source="FAI static resources (domain.md §7)"),
        BudgetItem(name="SHARE_UB_SIZE", bytes=ceil(q_base / 2) * ACC_BYTES,
                   formula=f"CeilDiv(qSeqBase, 2) x 4 = {ceil(q_base / 2)} x 4",
                   source="FAI static resources (domain.md §7)"),
    ]
    return _budget("UB", items, device.ub_bytes, f"devices.yaml {device.name}.ub_bytes")


def l1_budget(device: DeviceProfile, cube: dict[str, CubeTile], cube_nbuffer: int) -> Budget:
    """L1 bytes: the larger stage's A+B operand tiles x ``cube_nbuffer`` plus FAI ``MM2_LEFT_SIZE``."""
    items = []
    per_stage = []
    for stage, t in sorted(cube.items()):
        b = DTYPE_BYTES[t.operand_dtype]
        per_stage.append((stage, (t.m[1] * t.k[1] + t.k[1] * t.n[1]) * b * cube_nbuffer, t))
    stage, peak, t = max(per_stage, key=lambda s: s[1])
    items.append(BudgetItem(
        name=f"{stage}_operands", bytes=peak,
        formula=f"(mL1 x kL1 + kL1 x nL1) x {DTYPE_BYTES[t.operand_dtype]} B x cube_nbuffer {cube_nbuffer}; "
                f"{stage} is the larger of C1 (Q, K) and C2 (P, V), the stages do not hold L1 at once",
        source="C-TILE-03, C-TILE-05 [L0, L1] tiles, SK-01 cube_nbuffer_setting"))
    c1 = cube["C1"]
    p_bytes = DTYPE_BYTES[cube["C2"].operand_dtype]
    items.append(BudgetItem(
        name="MM2_LEFT_SIZE", bytes=c1.m[1] * c1.n[1] * p_bytes * KERNEL_TASK_NUM,
        formula=f"qSeqBase x kvSeqBase x sizeof(P) x KERNEL_TASK_NUM = {c1.m[1]} x {c1.n[1]} x {p_bytes} x {KERNEL_TASK_NUM}",
        source="FAI static resources (domain.md §7)"))
    return _budget("L1", items, device.l1_bytes, f"devices.yaml {device.name}.l1_bytes")


def l0_budgets(device: DeviceProfile, tile: CubeTile) -> list[Budget]:
    """L0A (m x k), L0B (k x n) operand bytes and L0C (m x n FP32) result bytes of one cube stage."""
    b = DTYPE_BYTES[tile.operand_dtype]
    m, k, n = tile.m[0], tile.k[0], tile.n[0]
    src = "C-TILE-03, C-TILE-05 L0 tiles"
    return [
        _budget(f"L0A {tile.stage}", [BudgetItem(name="a_tile", bytes=m * k * b, formula=f"mL0 x kL0 x {b} = {m} x {k} x {b}", source=src)],
                device.l0a_bytes, f"devices.yaml {device.name}.l0a_bytes"),
        _budget(f"L0B {tile.stage}", [BudgetItem(name="b_tile", bytes=k * n * b, formula=f"kL0 x nL0 x {b} = {k} x {n} x {b}", source=src)],
                device.l0b_bytes, f"devices.yaml {device.name}.l0b_bytes"),
        _budget(f"L0C {tile.stage}", [BudgetItem(name="c_tile", bytes=m * n * ACC_BYTES, formula=f"mL0 x nL0 x 4 = {m} x {n} x 4", source=src + ", FP32 result")],
                device.l0c_bytes, f"devices.yaml {device.name}.l0c_bytes"),
    ]


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
                           + (f", V2 binary {vec['V2'].shape[0]}x{vec['V2'].shape[1]}x4x{counts['binary']})" if v2 else ")"),
                   source="C-TILE-03 per-op formula (tensor_count reduce/binary)"),
        BudgetItem(name="MM2_RESULT_SIZE", bytes=rows * align_up(head_dim, 64) * ACC_BYTES * RESULT_BUFFERS,
                   formula=f"rows {rows} x Align64(head_dim {head_dim}) x 4 x {RESULT_BUFFERS}",
                   source="FAI static resources (domain.md §7)"),
    ]
    return _budget("UB", items, device.ub_bytes, f"devices.yaml {device.name}.ub_bytes")
