"""SK-01 variants: KV-block validity per mask, unroll choice, multi-core balance, FP8 tolerance.

Sources: SK-01 variant matrix and unroll candidates (card ``unroll_candidates``),
C-LOOP-05 (one unroll factor chosen by bounds and remainder), AT-01 mask kinds,
AT-17 paged tail rule, the FlashAttention-Infer load balance (domain.md §7),
AT-08 (FP8 E4M3, largest finite value 448).
"""

from __future__ import annotations

from math import ceil

from opdesign.catalog import Card
from opdesign.plan import Balance, CoreLoad, Unroll
from opdesign.spec import Spec

# E4M3 keeps 3 mantissa bits: round-to-nearest relative error is at most 2**-4.
E4M3_UNIT_ROUNDOFF = 2.0 ** -4


def sk01_variant(spec: Spec) -> str:
    """Row of the SK-01 variant matrix that the SPEC falls in."""
    if spec.quant == "fp8":
        return "PageAttn FP8"
    if spec.mask == "tensor":
        return "FA Score"
    if spec.mask == "topk":
        return "Sparse Attn"
    if spec.kv_cache == "paged":
        return "PageAttn"
    return "FA MHA"


def kv_block_ranges(mask: str, seq_q: int, seq_kv: int, q_tile: int, kv_tile: int,
                    window: int | None = None) -> list[tuple[int, int]]:
    """``(first_kv_block, block_count)`` per q block: the KV tiles a Q tile must visit.

    Row ``r`` of the query sees column ``c`` when (bottom-right aligned, AT-01
    mask kinds): ``causal``: ``c <= r + seq_kv - seq_q``; ``sliding_window``:
    additionally ``c > r + seq_kv - seq_q - window``; ``none``, ``tensor`` and
    ``topk`` (mask values and picks unknown at design time): every column.
    """
    offset = seq_kv - seq_q
    kv_tiles = ceil(seq_kv / kv_tile)
    out = []
    for i in range(ceil(seq_q / q_tile)):
        first_row, last_row = i * q_tile, min((i + 1) * q_tile, seq_q) - 1
        if mask in ("causal", "sliding_window"):
            hi = min(seq_kv, last_row + offset + 1)  # exclusive column bound
            lo = 0 if mask == "causal" else max(0, first_row + offset - window + 1)
            if hi <= lo:
                out.append((0, 0))
                continue
            first = lo // kv_tile
            out.append((first, ceil(hi / kv_tile) - first))
        else:
            out.append((0, kv_tiles))
    return out


def unroll_candidates(spec: Spec, sk01: Card) -> list[int]:
    """Tuning candidates of the KV-loop unroll factor for the SPEC's variant.

    The variant's own list when it has one with a choice in it (PageAttn FP8
    8/4/2/1, FA Score 4/2/1); otherwise SK-01's general candidates (8/4/2/1):
    FA MHA runs ``pypto.loop`` first and keeps the others for tuning.
    """
    own = sk01.unroll_candidates.get(sk01_variant(spec), [])
    return list(own) if len(own) > 1 else list(sk01.unroll_candidates.get("default", [1]))


def choose_unroll(spec: Spec, sk01: Card, variant: str, kv_tile: int, form: str) -> Unroll:
    """One KV-loop unroll factor (C-LOOP-05) from the variant's candidates.

    Variants whose KV loop is ``loop_unroll`` in the SK-01 variant matrix take the
    largest candidate not above the smallest KV tile count of the typical
    configs, so every config runs at least one full unrolled group; the last
    group of a longer loop runs the remainder (``loop_unroll`` yields
    ``(index, factor)``). Variants on ``pypto.loop`` start from 1.
    """
    candidates = unroll_candidates(spec, sk01)
    if form == "performance":
        return Unroll(candidates=candidates, unroll_factor=1, unroll_list=[1],
                      remainder_rule="no remainder: the static range traces every KV tile",
                      reason="performance form: static Python range over <= 8 KV tiles, no unroll_list (SK-01 perf invariant 2)",
                      source="SK-01 perf invariant 2, C-LOOP-05")
    own = sk01.unroll_candidates.get(variant, [])
    if len(own) <= 1:
        return Unroll(candidates=candidates, unroll_factor=1, unroll_list=[1], remainder_rule="factor 1: no remainder",
                      reason=f"{variant} runs the KV loop as pypto.loop (SK-01 variant matrix); "
                             f"factors {candidates} are tuning candidates",
                      source="SK-01 variant matrix and unroll candidates, C-LOOP-05")
    min_tiles = min(ceil(spec.config_shape(c).seq_kv / kv_tile) for c in spec.typical_configs)
    factor = max([c for c in candidates if c <= min_tiles] or [1])
    rule = ("factor 1: no remainder" if factor == 1 else
            f"loop_unroll(unroll_list=[{factor}]) runs groups of {factor} KV tiles; the last group runs "
            f"kv_tiles mod {factor} tiles through the same body (valid_shape tails)")
    return Unroll(candidates=candidates, unroll_factor=factor, unroll_list=[factor], remainder_rule=rule,
                  reason=f"{variant} candidates {candidates}: largest not above the smallest typical KV tile count {min_tiles}",
                  source=f"SK-01 unroll candidates ({variant}), C-LOOP-05")


def greedy_allocation(weights: list[int], cores: int, repeats: int = 1) -> list[list[tuple[int, int]]]:
    """Contiguous greedy split of q blocks over ``cores`` (FAI load balance), per core.

    The blocks are ``weights`` repeated ``repeats`` times (one copy per
    (batch, head), in order). Block ``j`` goes to core
    ``floor((prefix_j + w_j / 2) / target)`` with ``target = total / cores``: blocks
    stay in (batch, head, q block) order and a block heavier than the target is
    never split. Exact integer arithmetic; the repeats are counted per core in
    closed form, so the cost is ``O(cores x len(weights))``, not per block.
    Returns, per core, ``(position in weights, number of copies)`` pairs.
    """
    alloc: list[list[tuple[int, int]]] = [[] for _ in range(cores)]
    period = sum(weights)
    if period == 0 or repeats == 0:
        return alloc
    denom = 2 * repeats * period  # block j sits on core floor((2 prefix_j + w_j) * cores / denom)
    prefix = 0
    for pos, w in enumerate(weights):
        a = 2 * prefix + w  # position of this block in the first copy, doubled
        prefix += w
        start = 0  # first repeat index not yet placed
        for core in range(cores):
            if core == cores - 1:
                end = repeats
            else:  # repeats r with (2 r period + a) * cores < (core + 1) * denom
                bound = (core + 1) * denom - a * cores
                end = min(repeats, max(0, -(-bound // (2 * period * cores))))
            if end > start:
                alloc[core].append((pos, end - start))
                start = end
            if start == repeats:
                break
    return alloc


def greedy_balance(weights: list[int], cores: int, repeats: int = 1) -> tuple[list[int], list[int]]:
    """(core weights, q blocks per core) of :func:`greedy_allocation`."""
    alloc = greedy_allocation(weights, cores, repeats)
    return ([sum(weights[p] * n for p, n in core) for core in alloc], [sum(n for _, n in core) for core in alloc])


def balance(weights: list[int], cores: int, repeats: int = 1) -> Balance:
    """Per-core weights, ``imbalance = max / mean`` and whether fewer cores would do as well.

    ``weights`` are the valid KV blocks per q block of one (batch, head), repeated
    ``repeats`` times (see :func:`greedy_balance`).
    """
    loads, counts = greedy_balance(weights, cores, repeats)
    total = sum(weights) * repeats
    mean = total / cores if cores else 0.0
    worst = max(loads) if loads else 0
    fewer = None
    for c in range(1, cores):
        if max(greedy_balance(weights, c, repeats)[0]) <= worst:
            fewer = c
            break
    imbalance = worst / mean if mean else 1.0
    note = (f"{cores} cores, target {total / cores:.1f} valid KV blocks each; imbalance {imbalance:.3f}"
            + (f"; {fewer} cores reach the same busiest-core weight {worst}, so fewer cores would do as well"
               if fewer else "; every core is needed for the busiest-core weight"))
    return Balance(cores=cores, total_valid_blocks=total, target=round(total / cores, 3) if cores else 0.0,
                   per_core=[CoreLoad(core=i, q_blocks=n, weight=w) for i, (w, n) in enumerate(zip(loads, counts))],
                   imbalance=round(imbalance, 4), fewer_cores=fewer, note=note)


def fp8_tolerance(rtol: float, atol: float) -> tuple[float, float]:
    """Tolerance of an FP8 PV path: P and V each rounded to E4M3 (2**-4 relative).

    ``rtol = max(rtol, 2u)`` (two roundings per product), ``atol = max(atol, u)``;
    ``u`` is the E4M3 unit roundoff.
    """
    return max(rtol, 2 * E4M3_UNIT_ROUNDOFF), max(atol, E4M3_UNIT_ROUNDOFF)
