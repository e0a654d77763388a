"""On-chip buffer helpers shared by the skeletons, the cost model and the validator (bytes).

All functions are pure: tiles in elements in, :class:`~opdesign.plan.models.Budget`
or :class:`~opdesign.plan.models.Expansion` out. Sources: C-TILE-03 (budgets from
the device capacity and the real resident tensors; per-op formula
``tile_elements x dtype_bytes x tensor_count``), C-TILE-04 (expansion
estimate), C-TILE-05 (L0 tiles), and the FlashAttention-Infer static resource
items (domain.md §7).
"""

from __future__ import annotations

from opdesign.catalog import DeviceProfile, load_catalog
from opdesign.catalog.dtypes import DTYPE_BYTES
from opdesign.plan.core import Budget, BudgetItem, CubeTile, Expansion, ExpansionOp, VecTile, text

ACC_BYTES = 4  # FP32 accumulators and matmul results (SK-01 rule 6, C-API-05)
# FlashAttention-Infer example 49 (domain.md §7): pipeline depth of the static
# resource items; MM1/MM2 results are double-buffered in UB.
KERNEL_TASK_NUM = 3
RESULT_BUFFERS = 2


def make_budget(buffer: str, items: list[BudgetItem], capacity: int, capacity_source: str) -> Budget:
    """A :class:`Budget` of ``items`` against ``capacity`` bytes (``fits`` = total <= capacity)."""
    total = sum(i.bytes for i in items)
    return Budget(buffer=buffer, items=items, total_bytes=total, capacity_bytes=capacity,
                  capacity_source=capacity_source, fits=total <= capacity)


def vec_op_bytes(tile: VecTile, tensor_count: int) -> int:
    """Per-operation UB of one vector op: ``rows x cols x dtype_bytes x tensor_count`` (C-TILE-03)."""
    return tile.shape[0] * tile.shape[1] * DTYPE_BYTES[tile.dtype] * tensor_count


def softmax_state_items(rows: int, align: int) -> list[BudgetItem]:
    """FAI example 49's UB softmax state, ``sumUb``, ``maxUb`` and ``expUb``, one per pipeline slot
    (``x KERNEL_TASK_NUM``): the sources list them among the UB residents (TileShape resource table)
    without a size; the strictest reading gives each a ``[rows, 1]`` FP32 column padded to ``align``
    bytes per row (C-TILE-02), as the resident row statistics are counted."""
    src = ("FAI example 49 UB residents sumUb / maxUb / expUb x KERNEL_TASK_NUM (Ascend C "
           "examples/49_ascend950_flash_attention_infer); strictest reading: one 32 B-padded FP32 row each (C-TILE-02)")
    return [BudgetItem(name=name, bytes=rows * align * KERNEL_TASK_NUM,
                       formula=text("ub.softmax_state", rows=rows, align=align, tasks=KERNEL_TASK_NUM), source=src)
            for name in ("sumUb", "maxUb", "expUb")]


def make_expansion(ops: list[ExpansionOp], traced_copies: int) -> Expansion:
    """The C-TILE-04 estimate of ``ops`` (one traced body) over ``traced_copies`` copies of the body.

    One definition for every skeleton: the limit applies to the whole traced jit body (every op's
    ``tiles x (1 + inputs)`` summed, times the copies a static range or unrolled loop traces), since
    the expressions of one graph add up; ``max_per_op`` names the op to shrink first."""
    limit = load_catalog().constraint("C-TILE-04").param("expansion_limit")
    worst = max(o.expressions for o in ops)
    body_total = sum(o.expressions for o in ops) * traced_copies
    return Expansion(ops=ops, max_per_op=worst, body_total=body_total,
                     traced_copies=traced_copies, limit=limit, within_limit=body_total <= limit,
                     body_ratio=round(body_total / limit, 1))


def l1_budget(device: DeviceProfile, cube: dict[str, CubeTile], cube_nbuffer: int) -> Budget:
    """L1 bytes of a forward C1/C2 pair: the larger stage's A+B operand tiles x ``cube_nbuffer``
    plus FAI ``MM2_LEFT_SIZE``."""
    items = []
    per_stage = []
    for stage, t in sorted(cube.items()):
        b = DTYPE_BYTES[t.operand_dtype]
        per_stage.append((stage, (t.m[1] * t.k[1] + t.k[1] * t.n[1]) * b * cube_nbuffer, t))
    stage, peak, t = max(per_stage, key=lambda s: s[1])
    items.append(BudgetItem(
        name=f"{stage}_operands", bytes=peak,
        formula=text("l1.operands", bytes=DTYPE_BYTES[t.operand_dtype], cube_nbuffer=cube_nbuffer, stage=stage),
        source="C-TILE-03, C-TILE-05 [L0, L1] tiles, SK-01 cube_nbuffer_setting"))
    c1 = cube["C1"]
    p_bytes = DTYPE_BYTES[cube["C2"].operand_dtype]
    items.append(BudgetItem(
        name="MM2_LEFT_SIZE", bytes=c1.m[1] * c1.n[1] * p_bytes * KERNEL_TASK_NUM,
        formula=text("l1.mm2_left", m=c1.m[1], n=c1.n[1], p_bytes=p_bytes, tasks=KERNEL_TASK_NUM),
        source="FAI example 49 static resources (Ascend C examples/49_ascend950_flash_attention_infer)"))
    return make_budget("L1", items, device.l1_bytes, capacity_source=f"devices.yaml {device.ref('l1_bytes')}")


def l0_budgets(device: DeviceProfile, tile: CubeTile) -> list[Budget]:
    """L0A (m x k), L0B (k x n) operand bytes and L0C (m x n FP32) result bytes of one cube stage."""
    b = DTYPE_BYTES[tile.operand_dtype]
    m, k, n = tile.m[0], tile.k[0], tile.n[0]
    src = "C-TILE-03, C-TILE-05 L0 tiles"
    return [
        make_budget(f"L0A {tile.stage}",
                    [BudgetItem(name="a_tile", bytes=m * k * b, formula=text("l0.a", b=b, m=m, k=k), source=src)],
                    device.l0a_bytes, capacity_source=f"devices.yaml {device.ref('l0a_bytes')}"),
        make_budget(f"L0B {tile.stage}",
                    [BudgetItem(name="b_tile", bytes=k * n * b, formula=text("l0.b", b=b, k=k, n=n), source=src)],
                    device.l0b_bytes, capacity_source=f"devices.yaml {device.ref('l0b_bytes')}"),
        make_budget(f"L0C {tile.stage}",
                    [BudgetItem(name="c_tile", bytes=m * n * ACC_BYTES, formula=text("l0.c", m=m, n=n),
                                source=src + ", FP32 result")],
                    device.l0c_bytes, capacity_source=f"devices.yaml {device.ref('l0c_bytes')}"),
    ]
