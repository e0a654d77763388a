"""On-chip budgets and the expansion estimate of SK-16 backward (bytes, elements in).

Shared by :mod:`opdesign.skeletons.sk16.plan` (tile fitting) and the validator, which
re-derives them from the ``opdesign:`` block (``rules_budget``). Square tiles:
``Q_TILE = KV_TILE = tile``. Sources: C-TILE-03 (capacity and resident tensors,
per-op formula), the FAI static resource items (domain.md §7: result buffers,
``CV_RATIO``, ``KERNEL_TASK_NUM``), SK-16 stages and rules R2, R9.
"""

from __future__ import annotations

from math import ceil

from opdesign.catalog import DeviceProfile, load_catalog
from opdesign.catalog.dtypes import DTYPE_BYTES
from opdesign.plan.buffers import (
    ACC_BYTES,
    KERNEL_TASK_NUM,
    RESULT_BUFFERS,
    l0_budgets,
    make_budget,
    make_expansion,
    vec_op_bytes,
)
from opdesign.plan.core import Budget, BudgetItem, CubeTile, Expansion, ExpansionOp, VecTile
from opdesign.plan.tiles import align_up

# Vector ops per stage with their input counts, and the view each runs on
# ("s": [Q_TILE, KV_TILE] scores, "d": [tile, head_dim] rows). SK-16 stage table
# (domain.md §4); D = rowsum(O * dO) is loop-invariant over s2 and hoisted.
V1_OPS = (("muls_scale", 1, "s"), ("sub_m", 2, "s"), ("exp", 1, "s"), ("div_l", 2, "s"), ("sub_delta", 2, "s"),
          ("mul_p", 2, "s"), ("cast_p", 1, "s"), ("cast_ds", 1, "s"), ("mul_o_do", 2, "d"), ("sum_delta", 1, "d"))
V2_OPS = (("muls_dq", 1, "d"), ("muls_dk", 1, "d"))
TWO_PASS_V2_OPS = (("add_acc", 2, "d"),)


def _item(name: str, nbytes: int, formula: str, source: str) -> BudgetItem:
    return BudgetItem(name=name, bytes=nbytes, formula=formula, source=source)


def budgets(device: DeviceProfile, tile: int, head_dim: int, dtype: str, cube: dict[str, CubeTile],
            vec: dict[str, VecTile], passes: int) -> tuple[Budget, Budget, list[Budget]]:
    """(UB, L1, L0 list) of an SK-16 design with square ``tile``; the validator re-derives them from the block."""
    l0 = [b for t in cube.values() for b in l0_budgets(device, t)]
    return ub_budget(device, tile, head_dim, dtype, vec, passes), l1_budget(device, tile, cube), l0


def ub_budget(device: DeviceProfile, tile: int, head_dim: int, dtype: str, vec: dict[str, VecTile],
              passes: int) -> Budget:
    """UB bytes per vector sub-block for one SK-16 block pair; rows split over ``aiv_per_aic`` (FAI CV_RATIO)."""
    counts = load_catalog().constraint("C-TILE-03").param("tensor_count")
    align = load_catalog().constraint("C-TILE-02").param("align_bytes")
    cv, d, acc, nbuf = device.aiv_per_aic, head_dim, ACC_BYTES, RESULT_BUFFERS
    in_bytes = DTYPE_BYTES[dtype]
    rows = ceil(tile / cv)
    d64 = align_up(d, 64)
    v1 = vec_op_bytes(vec["V1"], counts["binary"])
    v2 = vec_op_bytes(vec["V2"], counts["reduce"])
    items = [
        _item("stats_rows", 3 * rows * align,
              f"3 rows (m, l, D) x ceil(tile/{cv}) {rows} x {align} B (a [M,1] row padded to 32 B)",
              "SK-16-R2 l/m read from inputs, C-TILE-02 32 B tail"),
        _item("MM1_RESULTS", 2 * rows * tile * acc * nbuf, f"2 results (S, dP) x {rows} x {tile} x 4 x {nbuf} buffers",
              "SK-16 C1, FAI example 49 static resources (Ascend C examples/49_ascend950_flash_attention_infer)"),
        _item("P_DS_CAST", 2 * rows * tile * in_bytes, f"2 casts (P, dS) x {rows} x {tile} x {in_bytes} B",
              "SK-16-R9 cast before C2"),
        _item("MM2_RESULTS", 2 * rows * d64 * acc * nbuf,
              f"2 results (dQ, dK) x {rows} x Align64(head_dim) {d64} x 4 x {nbuf} buffers",
              "SK-16 V2 (dV goes matmul -> atomic_add without UB), FAI static resources"),
        _item("vector_op_peak", max(v1, v2),
              f"max(V1 binary {vec['V1'].shape[0]}x{vec['V1'].shape[1]}x4x{counts['binary']}, "
              f"V2 reduce {vec['V2'].shape[0]}x{vec['V2'].shape[1]}x4x{counts['reduce']})",
              "C-TILE-03 per-op formula (tensor_count binary/reduce)"),
    ]
    if passes == 2:
        items.append(_item("acc_resident", 2 * rows * d * acc,
                           f"pass 2 dK and dV accumulators: 2 x {rows} x {d} x 4 (pass 1 holds only dQ)",
                           "backward decision table (two pass: UB accumulators), C-LOOP-06"))
    return make_budget("UB", items, device.ub_bytes, f"devices.yaml {device.ref('ub_bytes')}")


def l1_budget(device: DeviceProfile, tile: int, cube: dict[str, CubeTile]) -> Budget:
    """L1 bytes: Q, K, V, dO tiles (C1 and C2 operands) plus P and dS at the FAI pipeline depth."""
    b = DTYPE_BYTES[cube["C2"].operand_dtype]
    dk = cube["C1"].k[1]
    depth = KERNEL_TASK_NUM
    items = [
        _item("q_k_v_do_tiles", 4 * tile * dk * b, f"4 tiles (Q, K, V, dO) x {tile} x kL1 {dk} x {b} B",
              "SK-16 C1/C2 operands, C-TILE-05 [L0, L1] tiles"),
        _item("P_DS_LEFT", 2 * tile * tile * b * depth,
              f"2 (P, dS) x {tile} x {tile} x {b} B x KERNEL_TASK_NUM {depth}",
              "FAI example 49 MM2_LEFT_SIZE, SK-16 C2 operands"),
    ]
    return make_budget("L1", items, device.l1_bytes, f"devices.yaml {device.ref('l1_bytes')}")


def expansion(vec: dict[str, VecTile], passes: int) -> Expansion:
    """Per-op ``ceil(view / tile) x (1 + inputs)`` (C-TILE-04 estimate); "d" ops use the V2 TileShape."""
    ops = []
    for stage, table in (("V1", V1_OPS), ("V2", V2_OPS + (TWO_PASS_V2_OPS if passes == 2 else ()))):
        for name, inputs, view in table:
            t = vec["V1" if view == "s" else "V2"]
            n = ceil(t.view[0] / t.shape[0]) * ceil(t.view[1] / t.shape[1])
            ops.append(ExpansionOp(stage=stage, op=name, inputs=inputs, tiles=n, expressions=n * (1 + inputs)))
    return make_expansion(ops, 1)
