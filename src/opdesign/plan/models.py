"""The Plan: every design number the estimator decides, each with its source.

Rendering reads a :class:`Plan` and never computes a number; the validator
re-derives what it can from :meth:`Plan.design_block` (the ``opdesign:`` block
of the DESIGN.md front matter).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, computed_field

from opdesign.spec import DTYPE_BYTES

Stage = Literal["C1", "V1", "C2", "V2"]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Choice(_Model):
    """A pattern card picked for the design, and why."""

    id: str
    title: str
    reason: str


class FormCheck(_Model):
    """One SK-01 performance-form condition, evaluated on the SPEC."""

    id: str = Field(description="e.g. SK-01-PERF-1")
    condition: str
    observed: str
    passed: bool
    source: str


class CubeTile(_Model):
    """``set_cube_tile_shapes`` of one matmul stage: each axis ``[L0, L1]`` in elements (C-TILE-05)."""

    stage: Stage
    m: tuple[int, int]
    k: tuple[int, int]
    n: tuple[int, int]
    operand_dtype: str
    reason: str


class VecTile(_Model):
    """``set_vec_tile_shapes`` of one vector stage, in elements; ``view`` is the data shape it tiles."""

    stage: Stage
    shape: tuple[int, int]
    dtype: str
    view: tuple[int, int]
    reason: str

    @computed_field  # type: ignore[prop-decorator]
    @property
    def tile_bytes(self) -> int:
        """Bytes of one tile: rows x cols x dtype bytes."""
        return self.shape[0] * self.shape[1] * DTYPE_BYTES[self.dtype]

    @computed_field  # type: ignore[prop-decorator]
    @property
    def tail_bytes(self) -> int:
        """Bytes of the tail axis (C-TILE-02 checks ``% 32``)."""
        return self.tail_bytes_as(self.dtype)

    def tail_bytes_as(self, dtype: str) -> int:
        """Tail-axis bytes when the tile is cast to ``dtype`` (e.g. P to bf16 before C2)."""
        return self.shape[1] * DTYPE_BYTES[dtype]


class BudgetItem(_Model):
    name: str
    bytes: int
    formula: str
    source: str


class Budget(_Model):
    """Bytes of one on-chip buffer (UB per vector sub-block, L1, L0A/B/C per stage)."""

    buffer: str
    items: list[BudgetItem]
    total_bytes: int
    capacity_bytes: int
    capacity_source: str
    fits: bool


class ExpansionOp(_Model):
    stage: Stage
    op: str
    inputs: int
    tiles: int
    expressions: int


class Expansion(_Model):
    """Expression-expansion estimate per op: ``ceil(view / tile) * (1 + inputs)`` (C-TILE-04)."""

    ops: list[ExpansionOp]
    max_per_op: int
    body_total: int
    traced_copies: int
    limit: int
    within_limit: bool


class Unroll(_Model):
    candidates: list[int]
    unroll_factor: int
    unroll_list: list[int]
    remainder_rule: str
    reason: str
    source: str


class LoopRow(_Model):
    name: str
    loop_kind: str
    bound: str
    step: str
    dependence: str


class StateRow(_Model):
    name: str
    shape: str
    dtype: str
    init: str
    update: str
    final_use: str


class ConfigEntry(_Model):
    key: str
    value: Any
    status: str
    purpose: str
    source: str


class Decision(_Model):
    """A number or choice with the rule it comes from (tables of DESIGN.md)."""

    name: str
    value: Any
    basis: str
    source: str


class Module(_Model):
    id: int
    name: str
    description: str
    inputs: list[dict[str, str]]
    outputs: list[dict[str, Any]]


class TensorSpec(_Model):
    """A tensor of the interface file: shape as dimension expressions (names, ints, + - * //)."""

    name: str
    shape: list[str]
    dtype: str


class CoreLoad(_Model):
    core: int
    q_blocks: int
    weight: int


class Balance(_Model):
    """Greedy split of q blocks over cores by valid KV blocks (FAI load balance, domain.md §7)."""

    cores: int
    total_valid_blocks: int
    target: float
    per_core: list[CoreLoad]
    imbalance: float
    fewer_cores: int | None = Field(None, description="a smaller core count with a better imbalance, if any")
    note: str

    def core_groups(self) -> list[tuple[int, int, int, int]]:
        """Consecutive cores with the same load as ``(first, last, q_blocks, weight)`` (for compact tables)."""
        groups: list[tuple[int, int, int, int]] = []
        for c in self.per_core:
            if groups and groups[-1][2:] == (c.q_blocks, c.weight) and groups[-1][1] == c.core - 1:
                groups[-1] = (groups[-1][0], c.core, c.q_blocks, c.weight)
            else:
                groups.append((c.core, c.core, c.q_blocks, c.weight))
        return groups


class CheckRow(_Model):
    """Verdict of one design-check row of DESIGN.md, computed by :mod:`opdesign.plan.checks`."""

    rule: str = Field(description="the validator rule that computes the same verdict, e.g. C-TILE-04")
    result: Literal["pass", "fail", "warn"] = Field(description="warn: a should-level rule is broken")
    problems: list[str] = Field(default_factory=list, description="what is broken (empty on pass)")

    @property
    def passed(self) -> bool:
        return self.result == "pass"


class Plan(_Model):
    """The complete design decided from a SPEC (see ``estimate.estimate``).

    SK-01 fills every field; SK-02 (single pass: ``kv_loop == "none"``, no
    state rows) and SK-16 (backward: ``passes``) reuse the same fields.
    """

    op_name: str
    device: str
    dtype: str
    layout: str
    mask: str
    kv_cache: str
    quant: str
    direction: str
    head_dim: int
    num_heads: int
    num_kv_heads: int
    group_size: int
    seq_q: int
    seq_kv: int
    batch: int
    skeleton: Choice
    atoms: list[Choice]
    form: Literal["baseline", "performance"]
    form_reason: str
    form_checks: list[FormCheck]
    q_tile: int
    kv_tile: int
    q_tiles: int
    kv_tiles: int
    kv_loop: Literal["pypto.loop", "range", "loop_unroll", "none"]
    variant: str = Field("FA MHA", description="row of the SK-01 variant matrix, or the skeleton's own variant")
    skeleton_checks: list[FormCheck] = Field(default_factory=list, description="applicability conditions of the chosen or rejected skeleton")
    fallback_from: str | None = Field(None, description="skeleton whose conditions failed, e.g. SK-02")
    passes: int = 1
    two_pass_reason: str | None = None
    balance: Balance | None = None
    block_size: int | None = None
    batch_lengths: dict[str, str] = Field(default_factory=dict,
                                          description="axis -> int32 [batch] tensor of per-batch valid lengths (varlen, paged)")
    cost_rank: int | None = Field(None, description="rank of the plan's tiles among the legal candidates (costmodel)")
    cost_legal: int | None = Field(None, description="number of legal candidates ranked")
    tuning: list[dict[str, Any]] = Field(default_factory=list, description="next best legal candidates with estimated gain")
    topk: int | None = None
    window: int | None = None
    tile_decisions: list[Decision]
    cube_tiles: dict[str, CubeTile]
    vec_tiles: dict[str, VecTile]
    unroll: Unroll
    unroll_factor: int
    root_count: int
    task_count: int
    work_per_root_macs: int
    counts: list[Decision]
    ub_budget: Budget
    l1_budget: Budget
    l0_budgets: list[Budget]
    expansion: Expansion
    loops: list[LoopRow]
    state: list[StateRow]
    config: dict[str, dict[str, Any]]
    config_entries: list[ConfigEntry]
    primary_inputs: list[TensorSpec]
    final_outputs: list[TensorSpec]
    modules: list[Module]
    module_count: int
    module_reason: str
    scale: float
    rtol: float
    atol: float
    typical_configs: list[dict[str, Any]]
    dynamic_axes: list[dict[str, Any]]
    risks: list[str]
    design_checks: dict[str, CheckRow] = Field(default_factory=dict,
                                               description="verification rows by key (plan.checks), e.g. C-TILE-04")

    @property
    def pages_per_tile(self) -> int | None:
        """Pages one KV tile gathers (AT-17): ``kv_tile // block_size`` for a paged plan."""
        return self.kv_tile // self.block_size if self.block_size else None

    def design_block(self) -> dict[str, Any]:
        """The numbers the validator re-checks, as plain data (front-matter ``opdesign:`` block).

        Backward (SK-16) plans add ``passes``: the UB budget of two passes holds UB accumulators.
        """
        block = {
            "version": 1,
            "skeleton": self.skeleton.id,
            "atoms": [a.id for a in self.atoms],
            "form": self.form,
            "device": self.device,
            "dtype": self.dtype,
            "mask": self.mask,
            "kv_cache": self.kv_cache,
            "quant": self.quant,
            "head_dim": self.head_dim,
            "seq_q": self.seq_q,
            "seq_kv": self.seq_kv,
            "q_tile": self.q_tile,
            "kv_tile": self.kv_tile,
            "kv_loop": self.kv_loop,
            "cube_tiles": {
                s: {"m": list(t.m), "k": list(t.k), "n": list(t.n), "operand_dtype": t.operand_dtype}
                for s, t in self.cube_tiles.items()
            },
            "vec_tiles": {
                s: {"shape": list(t.shape), "dtype": t.dtype, "view": list(t.view)}
                for s, t in self.vec_tiles.items()
            },
            "unroll_list": self.unroll.unroll_list,
            "accumulators": {row.name: row.dtype for row in self.state},
            "root_count": self.root_count,
            "task_count": self.task_count,
            "ub_budget": {
                "items": {i.name: i.bytes for i in self.ub_budget.items},
                "total_bytes": self.ub_budget.total_bytes,
                "capacity_bytes": self.ub_budget.capacity_bytes,
            },
            "l1_budget": {"total_bytes": self.l1_budget.total_bytes, "capacity_bytes": self.l1_budget.capacity_bytes},
            # the deepest cube buffering of any stage ({-1: n} default or a per-stage key such as SK-02's {1: 2})
            "cube_nbuffer": max(self.config["pass_options"].get("cube_nbuffer_setting", {}).values(), default=1),
            "expansion": {"max_per_op": self.expansion.max_per_op, "limit": self.expansion.limit},
            "form_checks": {c.id: c.passed for c in self.form_checks},
            "module_count": self.module_count,
        }
        if self.direction == "backward":
            block["passes"] = self.passes
        return block
