"""Text rendering of a golden estimate (the CLI's default output): a :class:`~opdesign.golden.GoldenReport` or the
:class:`~opdesign.golden.estimate.GoldenFacts` it is built from (the same fields)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from opdesign.golden.estimate import GoldenFacts
    from opdesign.golden.models import GoldenReport


def _yes(flag: bool) -> str:
    return "yes" if flag else "no"


def _names(names: list[str]) -> str:
    return ", ".join(names) if names else "none"


def render_golden_text(report: GoldenReport | GoldenFacts) -> str:
    """A readable summary: parity signals and count, design parameters, attention signals, decision."""
    sig = report.signals
    dp = report.design_params
    att = report.attention
    state = ", ".join(f"{name} ({att.state_roles[name]})" for name in att.state_names) or "none"
    lines = [
        f"function: {report.function}",
        f"signals: statements {sig.statements}, loops {sig.loops}, matmul_calls {sig.matmul_calls}, "
        f"einsum_calls {sig.einsum_calls}, reduction_calls {sig.reduction_calls}",
        f"suggested_module_count (CANNBot parity; an input, not the decision): {report.suggested_module_count}",
        f"design params: effective_lines {dp.effective_lines}, matmul_count {dp.matmul_count}, "
        f"S {dp.state_groups} ({dp.state_source}), cross_tile_reduce {dp.cross_tile_reduce} ({dp.cross_tile_source})",
        f"  L {dp.L:.2f}, O {dp.O:.2f}, S {dp.S}, structural {dp.structural:.2f}, total {dp.total:.2f} "
        f"-> design-parameter count {dp.module_count}, path {dp.path} (an input, not the decision)",
        f"attention: online-softmax state {_yes(att.online_softmax_state)}; loop-carried state: {state}",
        f"  softmax chain {_yes(att.softmax_chain)}; backward {_yes(att.backward)} "
        f"(grad outputs: {_names(att.grad_outputs)}; stats inputs: {_names(att.stats_inputs)}); "
        f"SK-16 applicable {_yes(att.sk16_applicable)} ({att.matmul_count} matmuls)",
        f"module_count: {report.module_count} ({report.rule}; the decision)",
        f"reason: {report.reason}",
        f"limitations: {report.limitations}",
    ]
    return "\n".join(lines)
