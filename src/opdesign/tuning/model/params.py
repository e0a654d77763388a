"""The named figures of the SK-01 cost model that no cited table gives (:class:`CostParams`).

Each field carries its unit and reason; ``constraints/costmodel/calibration.yaml`` (written by
``scripts/calibrate_costmodel.py``) replaces the defaults with PyPTO SIM fits and measurements.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from opdesign.plan.buffers import KERNEL_TASK_NUM


class CostParams(BaseModel):
    """Figures of the cost model that no cited table gives: named, with unit and reason."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    task_overhead_cycles: float = Field(
        1850.0, gt=0,
        description="cycles per dispatched task body (one KV-loop body: unroll_factor KV steps of head_group "
                    "x streams heads), counted over all cores (one scheduler). Assumption: about 1 us of device-side "
                    "scheduling per body, 1850 cycles at the 1.85 GHz clock of the pto-isa a2/a3 config (PyPTO "
                    "SIM: 0.83-1.25 us a body); calibration.yaml fits it to SIM times.")
    step_dispatch_cycles: float = Field(
        0.0, ge=0,
        description="cycles per dispatched KV step (the ops of one task, over all cores, through the same "
                    "scheduler as the bodies). No cited figure: 0 in the raw model; calibration.yaml fits it "
                    "(PyPTO SIM, dense s2048: kv_tile 1024 x unroll 2 and kv_tile 512 x unroll 4 dispatch the "
                    "same 64 bodies, 128 and 256 steps, and run 165.0 and 191.1 us).")
    stream_switch_cycles: float = Field(
        54.0, ge=0,
        description="cycles per task per stream beyond the first, charged to every stage. Assumption: one "
                    "extra hand-over per C1->V1->C2->V2 link when a core alternates streams: 3 links x "
                    "(set_flag + wait_flag at 1 cycle each + a 16-cycle vector pipe drain), pto-isa "
                    "cce_costmodel_sync.hpp; measure 1 vs 2 streams to replace it.")
    load_head_cycles: float | None = Field(
        None, gt=0,
        description="cycles of fixed cost per GM->L1 / GM->UB copy. None: the pto-isa per-path heads "
                    "(TRANSFER_HEAD_CYCLES). calibration.yaml sets the PyPTO SIM figure, measured from its pipe "
                    "trace by scripts/measure_sim_transfers.py (COPY_IN = head + bytes / bandwidth).")
    load_bytes_per_cycle: float | None = Field(
        None, gt=0,
        description="bytes per cycle of a GM->L1 / GM->UB copy. None: the device profile's bandwidth; "
                    "calibration.yaml: the PyPTO SIM figure, same measurement.")
    store_head_cycles: float | None = Field(
        None, gt=0,
        description="cycles of fixed cost per UB->GM / L0C->GM copy. None: the pto-isa per-path heads; "
                    "calibration.yaml: the PyPTO SIM figure (COPY_OUT), same measurement.")
    store_bytes_per_cycle: float | None = Field(
        None, gt=0,
        description="bytes per cycle of a UB->GM / L0C->GM copy. None: the device profile's bandwidth; "
                    "calibration.yaml: the PyPTO SIM figure, same measurement.")
    pair_merge_cycles_per_element: float | None = Field(
        None, gt=0,
        description="cycles per fp32 element of one merge of two partial row statistics (max, sum) of a V1 "
                    "vector tile, when a KV tile spans several vector tiles of a row (cdiv(kv_tile, vec cols) - 1 "
                    "merges of each a row tile). None: costed as one binary element-wise op (TSUB, pto-isa). "
                    "calibration.yaml: the PyPTO SIM figure from its pipe trace (PAIRMAX / PAIRSUM).")
    pipeline_depth: int = Field(
        KERNEL_TASK_NUM, ge=1,
        description="tasks in flight per core: KERNEL_TASK_NUM of the FlashAttention-Infer example "
                    "(opdesign.plan.buffers.KERNEL_TASK_NUM), the depth the L1/UB static buffers are sized for; "
                    "a chain's KV steps follow each other at no less than fill / depth.")
