"""The golden estimate as pydantic models: the public result of :func:`opdesign.golden.estimate_golden`
and the output schema of the ``estimate_golden`` agent tool.

The estimator computes with the records (NamedTuples) of :mod:`.syntax`, :mod:`.attention` and :mod:`.estimate`
(same fields, same order), so ``opdesign golden`` never loads pydantic; these models are built from
them only when asked for (``tests/unit/golden/test_golden.py`` checks that both serialise to the same JSON).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

Source = Literal["option", "detected"]
Rule = Literal["SK-01", "SK-16", "design-params"]


class AttentionSignals(BaseModel):
    """Attention structure of a golden; reported beside, never inside, the parity counts."""

    online_softmax_state: bool = Field(description="one loop carries a running max and sum and computes exp (AT-01)")
    state_names: list[str] = Field(description="loop-carried tensor state; running max / sum / weighted sum first")
    state_roles: dict[str, str] = Field(description="state name -> max | sum | weighted_sum | other")
    softmax_chain: bool = Field(description="softmax call, or max + exp(x - ...) + sum (AT-02 chain)")
    backward: bool = Field(description="gradient outputs (dq/dk/dv) or an upstream-gradient input")
    stats_inputs: list[str] = Field(description="backward only: forward softmax statistics parameters (l/m/lse)")
    grad_outputs: list[str]
    sk16_applicable: bool = Field(description="backward, stats inputs and matmul_count >= 5 (SK-16 'When')")
    matmul_count: int


class GoldenSignals(BaseModel):
    """Lexical signals of one golden function (CANNBot estimator key names)."""

    statements: int
    loops: int
    matmul_calls: int
    einsum_calls: int
    reduction_calls: int


class DesignParams(BaseModel):
    """Deriver inputs and result (anchors.md, design-parameter deriver)."""

    effective_lines: int = Field(description="statements of the golden function, nested functions included, "
                                             "docstrings excluded")
    matmul_count: int = Field(description="@, matmul, mm, bmm and einsum in the function and the helpers it calls")
    state_groups: int = Field(description="loops carrying state (S)")
    cross_tile_reduce: int = Field(description="reductions across a tiled axis")
    state_source: Source
    cross_tile_source: Source
    L: float = Field(description="effective_lines / 30")
    O: float = Field(description="(matmul_count + cross_tile_reduce) / 3")
    S: int = Field(description="state_groups")
    structural: float = Field(description="max(S, O)")
    total: float = Field(description="structural + 1 when lines exceed it by more than one, else max(L, S, O)")
    module_count: int
    path: Literal["L0", "L1"] = Field(description="L0 for a single module, L1 otherwise")


class GoldenReport(BaseModel):
    """Everything the estimator found about one golden function."""

    function: str
    signals: GoldenSignals
    suggested_module_count: int = Field(description="CANNBot estimator formula over the signals (parity)")
    limitations: str
    design_params: DesignParams
    attention: AttentionSignals
    module_count: int = Field(description="attention-aware recommendation; the plan uses this one")
    rule: Rule = Field(description="the rule that decided module_count")
    reason: str

    def to_cannbot_json(self) -> dict[str, Any]:
        """Exactly the keys of CANNBot's ``estimate_decomposition.py`` JSON output."""
        return {
            "function": self.function,
            "signals": self.signals.model_dump(),
            "suggested_module_count": self.suggested_module_count,
            "limitations": self.limitations,
        }
