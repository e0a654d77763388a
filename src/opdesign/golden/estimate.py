"""Golden decomposition estimator: how many modules an operator's golden calls for.

The golden file is parsed with :mod:`ast` and never imported or executed (a
golden that raises at import time is estimated like any other). Three layers,
each reported on its own so that none silently changes another:

1. **Parity signals** (:class:`Signals`, ``suggested_module_count``): the
   CANNBot ``estimate_decomposition.py`` counts and formula, same key names.
2. **Design parameters** (:class:`Params`): the CANNBot
   ``derive_design_params.py`` formula over effective lines, matmuls, state
   groups ``S`` and cross-tile reductions, with the structural cap and the
   L0/L1 path. ``S`` and the cross-tile count come from the options when given,
   else from detection (:mod:`opdesign.golden.attention`); the deriver's default
   is 0 for both. Our counting scope differs on purpose: effective lines are
   those of the selected function (the deriver takes the largest ``*_golden``),
   and matmuls are counted in it and the module-level helpers it calls, not in
   the whole file (a self-test block at the bottom of a golden does not count).
3. **Attention-aware decision** (``module_count``, ``rule``, ``reason``): the
   count the plan uses. Rules, first match wins (domain.md §2, §4, §9):

   - backward with forward l/m inputs and ``matmul_count >= 5`` -> 1 module (SK-16
     single pass: C1 -> V1 -> C2 -> V2 per (q, kv) block pair, l/m never recomputed);
   - other backward -> the design-parameter count (SK-16 does not apply);
   - forward attention (online-softmax state carried across a loop, or a softmax
     chain together with QK^T and PV) -> 1 module (SK-01 C1 -> V1 -> C2 family; the
     softmax chain max -> subtract -> exp -> sum -> divide is part of it), plus one
     module per 3 further matmuls (projections outside the attention core);
   - anything else -> the design-parameter count.
"""

from __future__ import annotations

import ast
import json
import math
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, NamedTuple

from opdesign.errors import InputError, NotFoundError, TooLargeError
from opdesign.golden.attention import (
    SK16_MIN_MATMULS,
    Attention,
    count_cross_tile_reductions,
    detect_attention,
    find_carried_state,
)
from opdesign.golden.syntax import (
    FunctionNode,
    Signals,
    count_matmuls,
    count_signals,
    effective_lines,
    reachable_functions,
    top_level_functions,
)
from opdesign.io.limits import MAX_FILE_BYTES

__all__ = ["AttentionSignals", "DesignParams", "GoldenFacts", "GoldenReport", "GoldenSignals", "analyse_golden",
           "decide_module_count", "derive_design_params", "estimate_golden", "facts_json", "parity_module_count"]

GOLDEN_SUFFIX = "_golden"
#: Largest golden file, in bytes (1 MiB, as every file an agent tool reads).
MAX_GOLDEN_BYTES = MAX_FILE_BYTES  # opdesign.io.limits
LIMITATIONS = (
    "Static syntax hints only: the golden is parsed, never run, and calls are recognised by their "
    "name (a @ b, np.matmul, x.sum), so aliased or indirect calls are missed and look-alikes are "
    "counted. Use the counts as input to the decomposition decision, not as proof."
)

ATTENTION_CORE_MATMULS = 2  # QK^T (C1) and PV (C2) of SK-01
MATMULS_PER_EXTRA_MODULE = 3  # the deriver's O = matmuls / 3

Source = Literal["option", "detected"]
Rule = Literal["SK-01", "SK-16", "design-params"]

if TYPE_CHECKING:
    from opdesign.golden.models import AttentionSignals, DesignParams, GoldenReport, GoldenSignals


class Params(NamedTuple):
    """Deriver inputs and result (anchors.md, design-parameter deriver); the fields of
    :class:`opdesign.golden.models.DesignParams`."""

    effective_lines: int
    matmul_count: int
    state_groups: int
    cross_tile_reduce: int
    state_source: Source
    cross_tile_source: Source
    L: float
    O: float
    S: int
    structural: float
    total: float
    module_count: int
    path: Literal["L0", "L1"]


class GoldenFacts(NamedTuple):
    """Everything the estimator found about one golden function; the fields of
    :class:`opdesign.golden.models.GoldenReport`."""

    function: str
    signals: Signals
    suggested_module_count: int
    limitations: str
    design_params: Params
    attention: Attention
    module_count: int
    rule: Rule
    reason: str


def parity_module_count(signals: Signals | GoldenSignals) -> int:
    """CANNBot estimator formula (anchors.md): lexical signals -> suggested module count.

    ``operations = (matmul + einsum + reduction) / 3``;
    ``score = max(min(statements / 30, max(1, operations) + 1), operations)``;
    1 when ``score < 1.3``, else ``min(floor(score + 0.5), ceil(statements / 12))``, at least 1.
    """
    operations = (signals.matmul_calls + signals.einsum_calls + signals.reduction_calls) / 3
    score = max(min(signals.statements / 30, max(1.0, operations) + 1), operations)
    if score < 1.3:
        return 1
    return max(1, min(math.floor(score + 0.5), math.ceil(signals.statements / 12)))


def derive_design_params(
    effective_lines: int,
    state_groups: int,
    matmul_count: int,
    cross_tile_reduce: int,
    state_source: Source = "option",
    cross_tile_source: Source = "option",
) -> Params:
    """CANNBot deriver formula (anchors.md), arguments in the order of its table.

    ``L = lines / 30``, ``O = (matmuls + cross_tile_reduce) / 3``, ``structural = max(S, O)``;
    lines lift the total by at most one over a non-zero structure; 1 module when
    ``total < 1.3``, else ``min(round(total), ceil(lines / 12))`` with Python's
    half-to-even ``round``, at least 1.
    """
    lines_signal = effective_lines / 30
    ops_signal = (matmul_count + cross_tile_reduce) / 3
    structural = max(state_groups, ops_signal)
    if structural >= 1 and lines_signal > structural + 1:
        total = structural + 1
    else:
        total = max(lines_signal, state_groups, ops_signal)
    if total < 1.3:
        modules = 1
    else:
        modules = max(1, min(round(total), math.ceil(effective_lines / 12)))
    return Params(
        effective_lines=effective_lines,
        matmul_count=matmul_count,
        state_groups=state_groups,
        cross_tile_reduce=cross_tile_reduce,
        state_source=state_source,
        cross_tile_source=cross_tile_source,
        L=float(lines_signal),
        O=float(ops_signal),
        S=state_groups,
        structural=float(structural),
        total=float(total),
        module_count=modules,
        path="L0" if modules == 1 else "L1",
    )


def decide_module_count(attention: Attention, design: Params) -> tuple[int, Rule, str]:
    """``(module_count, rule, reason)``: the attention-aware decision (rules in the module docstring).

    Sources: SK-16 "When" and single-pass rule (domain.md §4); SK-01 stage layout
    C1 -> V1 -> C2 with the online-softmax state in one loop (§2); the softmax
    chain as one module and the CANNBot step "record module_count" (§9).
    """
    mm = attention.matmul_count

    def overridden(why: str) -> str:
        return f" The design-parameter count ({design.module_count}) is not used: {why}." \
            if design.module_count != 1 else ""

    if attention.sk16_applicable:
        return 1, "SK-16", (
            f"Backward attention with forward statistics inputs ({', '.join(attention.stats_inputs)}) and {mm} "
            "matmuls meets SK-16: one single-pass module computes dQ, dK and dV per (q, kv) block pair "
            "(C1 -> V1 -> C2 -> V2), reading l/m instead of recomputing them."
            + overridden("a split would compute QK^T once per pass")
        )
    if attention.backward:
        missing = ("it has no forward l/m input" if not attention.stats_inputs
                   else f"it has {mm} matmuls, below SK-16's {SK16_MIN_MATMULS}")
        return design.module_count, "design-params", (
            f"Backward attention, but {missing}, so SK-16 does not apply and the design-parameter count "
            f"({design.module_count}) stands; record the single-pass or two-pass choice (SK-01 backward decision)."
        )
    if attention.online_softmax_state or (attention.softmax_chain and mm >= ATTENTION_CORE_MATMULS):
        evidence = (f"online-softmax state ({', '.join(attention.state_names)}) carried across a loop"
                    if attention.online_softmax_state else "a softmax chain between its matmuls")
        extra = max(0, mm - ATTENTION_CORE_MATMULS)
        count = 1 + math.ceil(extra / MATMULS_PER_EXTRA_MODULE)
        tail = (f" The {extra} matmul(s) beyond QK^T and PV add {count - 1} module(s), one per "
                f"{MATMULS_PER_EXTRA_MODULE} (O = matmuls / 3)." if extra
                else overridden("a split would pass the softmax state through GM"))
        return count, "SK-01", (
            f"Forward attention with {evidence}: QK^T -> softmax chain (max, subtract, exp, sum, divide) -> PV "
            f"is one SK-01 module (C1 -> V1 -> C2).{tail}"
        )
    chain = (" Its softmax chain (max, subtract, exp, sum, divide) is one module's work." if attention.softmax_chain
             else "")
    return design.module_count, "design-params", (
        f"No attention structure (online-softmax state, QK^T/PV around a softmax, dQ/dK/dV) was found, so "
        f"the design-parameter count ({design.module_count}) stands.{chain}"
    )


def parse_golden(path: Path, data: bytes | None = None) -> ast.Module:
    """Read (one bounded read of a regular file, unless ``data`` holds its bytes) and parse a golden
    file without running it.

    Errors: :class:`NotFoundError` for a missing file or a symlink loop; :class:`InputError` for a
    directory, FIFO or device, an unreadable or oversized file (over MAX_GOLDEN_BYTES), bytes that are
    not UTF-8 and syntax errors (both with ``line N``).
    """
    if data is None:
        from opdesign.errors import ToolIOError
        from opdesign.io.safefs import read_regular

        try:
            data = read_regular(path, MAX_GOLDEN_BYTES)
        except NotFoundError as err:
            why = "symlink loop" if "loop" in err.message else "not found"
            raise NotFoundError(f"golden file {why}: {path}", details={"path": str(path)}) from None
        except (InputError, ToolIOError, TooLargeError) as err:
            raise type(err)(f"golden file {path}: {err.message.removeprefix(str(path) + ': ')}",
                            {**(err.details or {}), "path": str(path)}) from None
    if len(data) > MAX_GOLDEN_BYTES:
        raise TooLargeError(f"golden file {path} is {len(data)} bytes, over the {MAX_GOLDEN_BYTES}-byte limit",
                         details={"path": str(path)})
    import io
    import tokenize

    try:  # the PEP 263 coding line (`# -*- coding: latin-1 -*-`), as Python reads the file; else UTF-8
        encoding = tokenize.detect_encoding(io.BytesIO(data).readline)[0]
    except SyntaxError as err:  # an unknown coding or one that contradicts the BOM; undeclared non-UTF-8 below
        encoding = "utf-8-sig"
        if "unknown encoding" in err.msg or "encoding problem" in err.msg:
            raise InputError(f"{path}: encoding declaration: {err.msg}", details={"path": str(path)}) from None
    try:
        source = data.decode("utf-8-sig" if encoding in ("utf-8", "utf-8-sig") else encoding)
    except UnicodeDecodeError as err:
        line = data[: err.start].count(b"\n") + 1
        what = "UTF-8" if encoding in ("utf-8", "utf-8-sig") else f"{encoding} as its coding line declares"
        raise InputError(f"{path}: line {line}: not {what} (byte {err.start})",
                         details={"path": str(path), "line": line}) from err
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # e.g. SyntaxWarning for invalid escapes: not ours to report
            return ast.parse(source, filename=str(path))
    except SyntaxError as err:
        spec = "; this is YAML: a SPEC goes to `opdesign estimate --spec FILE`" \
            if str(path).endswith((".yaml", ".yml")) else ""
        raise InputError(f"{path}: line {err.lineno}: syntax error: {err.msg}{spec}",
                         details={"path": str(path), "line": err.lineno}) from err
    except (ValueError, RecursionError, MemoryError) as err:  # NUL bytes, absurdly deep nesting
        raise InputError(f"{path}: cannot parse: {str(err) or type(err).__name__}",
                         details={"path": str(path)}) from err


def select_function(functions: dict[str, FunctionNode], name: str | None, path: Path) -> FunctionNode:
    """The named top-level function, or the only one whose name ends in ``_golden``.

    Errors carry the candidate names in the message and in ``details["candidates"]``:
    :class:`NotFoundError` when nothing matches, :class:`InputError` when several do.
    """
    names = list(functions)
    if name is not None:
        if name not in functions:
            raise NotFoundError(
                f"{path}: no top-level function named {name!r}; candidates: {_listing(names)}",
                details={"path": str(path), "candidates": names},
            )
        return functions[name]
    goldens = [n for n in names if n.endswith(GOLDEN_SUFFIX)]
    if not goldens:
        raise NotFoundError(
            f"{path}: no top-level function ending in {GOLDEN_SUFFIX!r}; candidates: {_listing(names)}; "
            "pick one with --function NAME",
            details={"path": str(path), "candidates": names},
        )
    if len(goldens) > 1:
        raise InputError(
            f"{path}: several top-level functions end in {GOLDEN_SUFFIX!r}: {_listing(goldens)}; "
            "pick one with --function NAME",
            details={"path": str(path), "candidates": goldens},
        )
    return functions[goldens[0]]


def _listing(names: list[str]) -> str:
    return ", ".join(names) if names else "(none)"


def analyse_golden(
    path: str | Path,
    function: str | None = None,
    state_groups: int | None = None,
    cross_tile_reduce: int | None = None,
    *,
    source: bytes | None = None,
) -> GoldenFacts:
    """Estimate the module count of a golden file (see the module docstring for the three layers), as
    plain data (:func:`estimate_golden` gives the same as a pydantic :class:`GoldenReport`).

    Args:
        path: golden ``.py`` file; parsed, never executed.
        function: top-level function to analyse; default: the only ``*_golden`` one.
        state_groups: loop-carried state groups ``S``; default: detected.
        cross_tile_reduce: reductions across a tiled axis; default: detected.
        source: the file's bytes, already read (the agent tools read them inside their root).

    Raises:
        NotFoundError: missing file or function (candidates listed).
        InputError: unreadable / non-UTF-8 file, syntax error (``line N``),
            several ``*_golden`` candidates, a negative count.
    """
    for option, value in (("--state-groups", state_groups), ("--cross-tile-reduce", cross_tile_reduce)):
        if value is not None and value < 0:
            raise InputError(f"{option} must be >= 0, got {value}", details={"option": option, "value": value})
    golden_path = Path(path)
    functions = top_level_functions(parse_golden(golden_path, source))
    node = select_function(functions, function, golden_path)
    signals = count_signals(node)
    scope = reachable_functions(node, functions)
    matmul_count = count_matmuls(scope)
    state = find_carried_state(scope, functions)
    design = derive_design_params(
        effective_lines=effective_lines(node),
        state_groups=state.groups if state_groups is None else state_groups,
        matmul_count=matmul_count,
        cross_tile_reduce=count_cross_tile_reductions(scope) if cross_tile_reduce is None else cross_tile_reduce,
        state_source="detected" if state_groups is None else "option",
        cross_tile_source="detected" if cross_tile_reduce is None else "option",
    )
    attention = detect_attention(node, scope, state, matmul_count)
    module_count, rule, reason = decide_module_count(attention, design)
    return GoldenFacts(
        function=node.name,
        signals=signals,
        suggested_module_count=parity_module_count(signals),
        limitations=LIMITATIONS,
        design_params=design,
        attention=attention,
        module_count=module_count,
        rule=rule,
        reason=reason,
    )


def estimate_golden(
    path: str | Path,
    function: str | None = None,
    state_groups: int | None = None,
    cross_tile_reduce: int | None = None,
    *,
    source: bytes | None = None,
) -> GoldenReport:
    """:func:`analyse_golden` (same arguments, same errors) as a :class:`GoldenReport`."""
    from opdesign.golden.models import GoldenReport

    facts = analyse_golden(path, function, state_groups, cross_tile_reduce, source=source)
    return GoldenReport.model_validate(_plain(facts))


def facts_json(facts: GoldenFacts) -> str:
    """The JSON of ``facts``, byte for byte ``estimate_golden(...).model_dump_json(indent=2)`` (same keys in
    the same order, floats as floats, non-ASCII as is) without building the model."""
    return json.dumps(_plain(facts), indent=2, ensure_ascii=False, allow_nan=False)


def _plain(record: Any) -> dict[str, Any]:
    """A record (nested records included) as a dict, in field order."""
    return {name: _plain(value) if hasattr(value, "_asdict") else value for name, value in record._asdict().items()}


_MODELS = ("AttentionSignals", "DesignParams", "GoldenReport", "GoldenSignals")


def __getattr__(name: str) -> Any:
    """The pydantic models (:mod:`opdesign.golden.models`) load on first use."""
    if name in _MODELS:
        from opdesign.golden import models

        return getattr(models, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
