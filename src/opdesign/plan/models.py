"""The Plan: every design number the estimator decides, each with its source. Rendering reads a
:class:`Plan` and never computes a number; the validator re-derives what it can from
:meth:`Plan.design_block` (the ``opdesign:`` block of the DESIGN.md front matter)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from opdesign.plan.core import (  # noqa: F401  (re-exported: every model of a plan is importable from here)
    Budget,
    BudgetItem,
    CubeTile,
    Expansion,
    ExpansionOp,
    Phrase,
    Stage,
    Text,
    VecTile,
    _Model,
    text,
)
from opdesign.plan.hardware import Hardware
from opdesign.plan.pins import TilePins
from opdesign.plan.schedule import Schedule


class Choice(_Model):
    """A pattern card picked for the design, and why."""

    id: str = Field(description="card id, e.g. SK-01 or AT-17")
    title: str = Field(description="the card's title")
    reason: Text = Field(description="why the design uses it")


class FormCheck(_Model):
    """One SK-01 performance-form condition, evaluated on the SPEC."""

    id: str = Field(description="e.g. SK-01-PERF-1")
    condition: Text = Field(description="what must hold")
    observed: Text = Field(description="what the SPEC gives, with the figures")
    passed: bool = Field(description="the condition holds")
    source: str = Field(description="card and condition the check comes from")


class Unroll(_Model):
    """The KV-loop unroll choice (C-LOOP-05)."""

    candidates: list[int] = Field(description="tuning candidates of the factor")
    unroll_factor: int = Field(description="the chosen factor (KV tiles per unrolled group)")
    unroll_list: list[int] = Field(description="unroll_list of pypto.loop_unroll")
    remainder_rule: Text = Field(description="how the last, shorter group runs")
    reason: Text = Field(description="why this factor")
    source: str = Field(description="card and rule of the choice")


class LoopRow(_Model):
    """One loop of the loop nest."""

    name: str = Field(description="loop variable")
    loop_kind: Text = Field(description="loop construct, e.g. pypto.loop")
    bound: str = Field(description="trip count as an expression")
    step: Text = Field(description="what one iteration advances")
    dependence: Text = Field(description="what the iterations share")


class StateRow(_Model):
    """One state tensor carried across loop iterations."""

    name: str = Field(description="state tensor, e.g. mi")
    shape: str = Field(description="shape in elements, e.g. [128, 1]")
    dtype: str = Field(description="dtype of the state")
    init: Text = Field(description="how the first iteration sets it")
    update: Text = Field(description="how later iterations update it")
    final_use: Text = Field(description="what reads it after the loop")


class ConfigEntry(_Model):
    """One pass_options / runtime_options setting."""

    key: str = Field(description="option, e.g. pass_options.cube_nbuffer_setting")
    value: Any = Field(description="its value")
    status: str = Field(description="required or recommended (the card's), '(framework default)' added when the "
                                    "value is the documented default")
    purpose: Text = Field(description="why the design sets it")
    source: str = Field(description="card configuration it comes from")
    meaning: str | None = Field(None, description="what the option does, as PyPTO's docs define it "
                                                  "(constraints/pypto_options.yaml); None: not documented there")
    doc: str | None = Field(None, description="the PyPTO doc page the meaning follows")
    default: bool = Field(False, description="the value is the framework's documented default")


class Decision(_Model):
    """A number or choice with the rule it comes from (tables of DESIGN.md)."""

    name: str = Field(description="the number's name, e.g. q_tile or root_count")
    value: Any = Field(description="the number or choice")
    basis: Text = Field(description="how it follows, with the figures")
    source: str = Field(description="card, rule or kernel it comes from")


class Module(_Model):
    """A module of eval/module_interfaces.yaml (CANNBot format)."""

    id: int = Field(description="1-based module number")
    name: str = Field(description="function name")
    description: Text = Field(description="what the module computes")
    inputs: list[dict[str, str]] = Field(description="name and source of each input")
    outputs: list[dict[str, Any]] = Field(description="name, shape and dtype of each output")


class TensorSpec(_Model):
    """A tensor of the interface file: shape as dimension expressions (names, ints, + - * //)."""

    name: str = Field(description="tensor name in the golden's signature")
    shape: list[str] = Field(description="dimension expressions")
    dtype: str = Field(description="numpy dtype name")
    storage_of: str | None = Field(None, exclude=True,
                                   description="the real element type when dtype only stores its bytes "
                                               "(FP8 E4M3 V travels as int8); not part of the interface file")


class PageTable(_Model):
    """The paged KV contract of ``block_table`` (AT-17), one field for the kernel, its self-check, the
    numpy scaffold and DESIGN.md: how wide the caller's table must be, what unused entries hold and how
    a KV tile's page column past the table is read."""

    min_width: str = Field(description="the least max_blocks_per_seq a caller passes (expression)")
    pad_id: int = Field(description="block id of an unused entry (clamped to 0 before the page is read)")
    column_bound: str = Field(description="the largest column the kernel reads (expression)")


class CoreLoad(_Model):
    """The work of one core in the greedy split."""

    core: int = Field(description="core index")
    q_blocks: int = Field(description="q blocks it runs")
    weight: int = Field(description="valid KV blocks it runs")


class Balance(_Model):
    """Greedy split of q blocks over cores by valid KV blocks (FAI load balance, domain.md §7)."""

    cores: int = Field(description="cube cores of the device")
    total_valid_blocks: int = Field(description="valid KV blocks over all (batch, head, q block)")
    target: float = Field(description="valid KV blocks per core if the split were even")
    per_core: list[CoreLoad] = Field(description="the split, per core")
    imbalance: float = Field(description="busiest core / mean (1.0 = even)")
    fewer_cores: int | None = Field(None, description="the smallest core count reaching the same busiest-core weight, "
                                    "when fewer cores would do as well")
    note: Text = Field(description="the split in one sentence")
    method: Literal["greedy", "lpt"] = Field("greedy", description="greedy: FAI contiguous split of q blocks; "
                                             "lpt: varlen tasks longest first onto the least-loaded core")
    assumption: Text | None = Field(None, description="what the split assumes that the SPEC does not fix (e.g. every "
                                                      "batch at the full length of a varlen or packed axis)")

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
    """The complete design decided from a SPEC (:func:`opdesign.skeletons.registry.estimate`).

    SK-01 fills every field; SK-02 (single pass: ``kv_loop == "none"``, no
    state rows) and SK-16 (backward: ``passes``) reuse the same fields.
    """

    op_name: str = Field(description="the SPEC's op_name")
    device: str = Field(description="device profile, e.g. a3")
    dtype: str = Field(description="dtype of Q, K, V and the output")
    layout: str = Field(description="BNSD or BSND")
    mask: str = Field(description="the SPEC's mask")
    kv_cache: str = Field(description="contiguous or paged")
    quant: str = Field(description="none or fp8")
    direction: str = Field(description="forward or backward")
    head_dim: int = Field(description="elements per head")
    num_heads: int = Field(description="query heads")
    num_kv_heads: int = Field(description="key/value heads")
    group_size: int = Field(description="query heads per KV head (num_heads / num_kv_heads)")
    seq_q: int = Field(description="typical query length (tokens)")
    seq_kv: int = Field(description="typical key/value length (tokens)")
    batch: int = Field(description="typical batch size")
    skeleton: Choice = Field(description="the skeleton card")
    atoms: list[Choice] = Field(description="the atom cards")
    form: Literal["baseline", "performance"] = Field(description="safe baseline or performance-oriented form")
    form_reason: Text = Field(description="why this form: the failed condition, the overflowing budget, or all hold")
    form_checks: list[FormCheck] = Field(description="the performance-form conditions")
    q_tile: int = Field(description="query rows per tile (elements)")
    kv_tile: int = Field(description="key/value columns per tile (elements)")
    q_tiles: int = Field(description="ceildiv(seq_q, q_tile)")
    kv_tiles: int = Field(description="ceildiv(seq_kv, kv_tile)")
    kv_loop: Literal["pypto.loop", "range", "loop_unroll", "none"] = Field(
        description="construct of the KV loop (none: single pass)")
    variant: str = Field("FA MHA", description="row of the SK-01 variant matrix, or the skeleton's own variant")
    skeleton_checks: list[FormCheck] = Field(
        default_factory=list, description="applicability conditions of the chosen or rejected skeleton")
    fallback_from: str | None = Field(None, description="skeleton whose conditions failed, e.g. SK-02")
    passes: int = Field(1, description="passes over KV (backward: 1 or 2)")
    two_pass_reason: str | None = Field(None, description="the SPEC's reason for two passes (backward)")
    balance: Balance | None = Field(None, description="FAI-style static split of q blocks over cores (causal / sliding "
                                    "window / varlen), kept as data for the risks; PyPTO places tasks dynamically, so "
                                    "the design prints the schedule instead")
    schedule: Schedule | None = Field(None, description="waves, occupancy and the longest chain under PyPTO's dynamic "
                                      "placement (opdesign.plan.schedule)")
    block_size: int | None = Field(None, description="paged KV page size (tokens)")
    page_table: PageTable | None = Field(None, description="paged KV: the block_table contract (width, padding, bound)")
    quick_factor: int = Field(1, description="--quick runs the performance form with SEQ_Q, SEQ_KV, Q_TILE and "
                                             "KV_TILE divided by this (the same Q x KV tile loop; kernel and "
                                             "scaffold); 1: none")
    batch_lengths: dict[str, str] = Field(default_factory=dict,
                                          description="axis -> int32 [batch] tensor of per-batch valid lengths "
                                                      "(varlen, paged)")
    cost_rank: int | None = Field(None, description="rank of the plan's tiles among the legal candidates (costmodel)")
    cost_legal: int | None = Field(None, description="number of legal candidates ranked")
    tuning: list[dict[str, Any]] = Field(default_factory=list,
                                         description="next best legal candidates with estimated gain")
    pins: TilePins | None = Field(None, exclude=True, description="tiles pinned by `new --candidate` / `--tiles`")
    candidate: dict[str, Any] | None = Field(None, exclude=True,
                                             description="pinned design vs the default (rank, changes)")
    topk: int | None = Field(None, description="top-k KV positions per query (tokens)")
    window: int | None = Field(None, description="sliding-window width (tokens)")
    tile_decisions: list[Decision] = Field(description="q_tile and kv_tile with their basis")
    cube_tiles: dict[str, CubeTile] = Field(description="stage -> cube TileShape")
    vec_tiles: dict[str, VecTile] = Field(description="stage -> vector TileShape")
    unroll: Unroll = Field(description="the KV-loop unroll choice")
    unroll_factor: int = Field(description="unroll.unroll_factor")
    root_count: int = Field(description="independent roots (batch x heads x q tiles)")
    task_count: int = Field(description="C1-V1-C2 steps over all roots")
    work_per_root_macs: int = Field(description="multiply-accumulates of one matmul stage per root (MACs)")
    counts: list[Decision] = Field(description="loop and task counts with their basis")
    ub_budget: Budget = Field(description="UB per vector sub-block (bytes)")
    l1_budget: Budget = Field(description="L1 (bytes)")
    l0_budgets: list[Budget] = Field(description="L0A / L0B / L0C per cube stage (bytes)")
    expansion: Expansion = Field(description="C-TILE-04 expression-expansion estimate")
    loops: list[LoopRow] = Field(description="the loop nest")
    state: list[StateRow] = Field(description="state carried across KV tiles")
    config: dict[str, dict[str, Any]] = Field(description="pass_options and runtime_options")
    config_entries: list[ConfigEntry] = Field(description="config with status, purpose and source")
    primary_inputs: list[TensorSpec] = Field(description="inputs in golden signature order")
    final_outputs: list[TensorSpec] = Field(description="outputs of the operator")
    modules: list[Module] = Field(description="modules of eval/module_interfaces.yaml")
    module_count: int = Field(description="number of modules")
    module_reason: Text = Field(description="why that many modules")
    scale: float = Field(description="softmax scale 1/sqrt(head_dim)")
    rtol: float = Field(description="relative tolerance of the self-check (unitless)")
    atol: float = Field(description="absolute tolerance of the self-check (output units)")
    typical_configs: list[dict[str, Any]] = Field(description="the SPEC's typical configs with full shapes")
    dynamic_axes: list[dict[str, Any]] = Field(description="the SPEC's dynamic axes")
    risks: list[Text] = Field(description="what can break the design, one sentence each")
    cv_handover: Text | None = Field(
        None, description="how P reaches the cube for C2 on this device (devices.yaml ub_to_l1)")
    hardware: Hardware | None = Field(None, description="the SKU the design assumes, its platform file, and what the "
                                      "release's SIM checks of it (opdesign.plan.hardware)")
    pypto_release: str = Field(description="the PyPTO release the kernel is written for (constraints/pypto_api.yaml)")
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
            "pypto": self.pypto_release,
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
            "expansion": {"max_per_op": self.expansion.max_per_op, "body_total": self.expansion.body_total,
                          "limit": self.expansion.limit},
            "form_checks": {c.id: c.passed for c in self.form_checks},
            "module_count": self.module_count,
        }
        if self.direction == "backward":
            block["passes"] = self.passes
        return block
