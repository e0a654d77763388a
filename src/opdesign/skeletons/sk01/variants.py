"""SK-01 variants: the variant matrix row, the unroll choice, the FP8 tolerance.

Sources: SK-01 variant matrix and unroll candidates (card ``unroll_candidates``),
C-LOOP-05 (one unroll factor chosen by bounds and remainder), AT-08 (FP8 E4M3,
largest finite value 448). KV-block validity and the multi-core balance are
shared: :mod:`opdesign.plan.blocks`.
"""

from __future__ import annotations

from math import ceil

from opdesign.catalog import Card
from opdesign.plan.blocks import lpt_balance, typical_lengths
from opdesign.plan.models import Balance, Unroll, text
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
                      remainder_rule=text("sk01.unroll.static_remainder"), reason=text("sk01.unroll.static"),
                      source="SK-01 perf invariant 2, C-LOOP-05")
    own = sk01.unroll_candidates.get(variant, [])
    if len(own) <= 1:
        return Unroll(candidates=candidates, unroll_factor=1, unroll_list=[1], remainder_rule=text("unroll.factor_1"),
                      reason=text("sk01.unroll.loop", variant=variant, candidates=candidates),
                      source="SK-01 variant matrix and unroll candidates, C-LOOP-05")
    tiles = [ceil(spec.config_shape(c).seq_kv / kv_tile) for c in spec.typical_configs]
    min_tiles = min(tiles)
    factor = max([c for c in candidates if c <= min_tiles] or [1])
    rule = text("unroll.factor_1") if factor == 1 else text("sk01.unroll.remainder", factor=factor)
    per_config = [text("sk01.unroll.config", name=c.name, tiles=n, groups=n // factor, rem=n % factor)
                  for c, n in zip(spec.typical_configs, tiles, strict=True)]
    return Unroll(candidates=candidates, unroll_factor=factor, unroll_list=[factor], remainder_rule=rule,
                  reason=text("sk01.unroll.chosen", variant=variant, candidates=candidates, min_tiles=min_tiles,
                              per_config=per_config),
                  source=f"SK-01 unroll candidates ({variant}), C-LOOP-05")


def fp8_tolerance(rtol: float, atol: float) -> tuple[float, float]:
    """Tolerance of an FP8 PV path: P and V each rounded to E4M3 (2**-4 relative).

    ``rtol = max(rtol, 2u)`` (two roundings per product), ``atol = max(atol, u)``;
    ``u`` is the E4M3 unit roundoff.
    """
    return max(rtol, 2 * E4M3_UNIT_ROUNDOFF), max(atol, E4M3_UNIT_ROUNDOFF)


def varlen_balance(spec: Spec, q_tile: int, kv_tile: int, cores: int) -> Balance | None:
    """Length-aware core split of a varlen SPEC without a banded mask (None otherwise).

    Every (batch, head, q block) task visits ``ceil(kv_len_b / kv_tile)`` KV tiles at the modelled
    per-batch lengths (:func:`opdesign.plan.blocks.typical_lengths`); the tasks are split whole,
    longest first (:func:`opdesign.plan.blocks.lpt_balance`).
    """
    varlen = {a.name: a.range[0] for a in spec.dynamic_axes if not a.uniform}
    if "seq_kv" not in varlen or spec.mask not in ("none", "tensor"):
        return None
    s = spec.shape
    kv_lens = typical_lengths(varlen["seq_kv"], s.seq_kv, s.batch)
    q_lens = typical_lengths(varlen["seq_q"], s.seq_q, s.batch) if "seq_q" in varlen else [s.seq_q] * s.batch
    weights = [ceil(kv / kv_tile) for kv, sq in zip(kv_lens, q_lens, strict=True)
               for _ in range(s.num_heads * ceil(sq / q_tile))]
    return lpt_balance(weights, cores, kv_lens)
