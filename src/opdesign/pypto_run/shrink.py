"""The shapes a generated SK-01 kernel's self-check runs (issue 32 deliver 0).

Without ``--quick`` a typical config runs at its own shape, whatever its size: ``shape`` is the
config's shape and ``shrunk`` is None. A config beyond :data:`BUDGET_PAIRS` tile pairs is announced
before it runs (:func:`estimate_seconds`).

``--quick`` shrinks, and the shrunk shape depends on the SPEC and the config only, never on the
candidate's tiles, so every candidate of one SPEC is measured on the same shape; a tile larger
than the shrunk axis is cut to it (``quick_constants``):

- baseline form (lengths are dynamic axes): ``seq`` > 512 becomes ``384 + seq % 128`` (a tail
  tile stays a tail), keeping the order of ``seq_q`` and ``seq_kv``; a sliding window keeps
  ``window + 128`` KV positions; 2 KV heads and 1 or 2 batches. ``Q_TILE`` / ``KV_TILE`` larger than
  a shrunk axis become its largest power of two (the ranking's tiles are powers of two; a tile
  over an axis the shrink left alone, e.g. a decode's 16-row Q tile, stays);
  paged and top-k kernels keep their ``KV_TILE`` (their page count and keep table are built
  from it) and say so;
- performance form (lengths are compile-time constants): ``SEQ_Q`` and ``SEQ_KV`` are divided by
  one factor ``f`` in 8, 4, 2 that the SPEC fixes (``Q_TILE`` of the form, ``seq_q / 2`` aligned,
  stays a multiple of 16 and both lengths divide by ``f`` and keep >= 128); ``Q_TILE`` and
  ``KV_TILE`` are divided by the same ``f`` (``KV_TILE`` at least ``min(128, SEQ_KV')``, at most
  ``SEQ_KV'``); batch 1 and the fewest query heads that are a multiple of every head_group x
  streams product (G <= 4, S <= 8) that divides ``num_heads``.
"""

from __future__ import annotations

from math import gcd
from typing import Any

#: the old rule's SIM budget: about 10 s of compile + SIM for 48 (q tile, kv tile) pairs
BUDGET_PAIRS = 48
BUDGET_SECONDS = 10.0
#: largest head_group x streams product the ranking tries: AT-23 group_sizes (<= 4) x STREAM_COUNTS (<= 8)
CHAINS_MAX = 32
#: a cut tile keeps at least 16 rows / columns (the cube's fp16 / bf16 alignment)
TILE_FLOOR = 16
KEYS = ("batch", "num_heads", "num_kv_heads", "seq_q", "seq_kv")


def tile_pairs(shape: dict[str, Any], q_tile: int, kv_tile: int) -> int:
    """(Q tile, KV tile) pairs of one run: batch x heads x ceil(seq_q / q_tile) x ceil(seq_kv / kv_tile)."""
    return (shape["batch"] * shape["num_heads"] * -(-shape["seq_q"] // q_tile)
            * -(-shape["seq_kv"] // kv_tile))


def estimate_seconds(pairs: int, per_pair: float | None = None) -> float:
    """Compile + SIM seconds expected for ``pairs`` tile pairs: ``per_pair`` (e.g. measured from the SIM
    cache) or the budget rule's 10 s / 48 pairs."""
    return round(pairs * (per_pair if per_pair else BUDGET_SECONDS / BUDGET_PAIRS), 1)


def _pow2_floor(n: int) -> int:
    return 1 << (max(n, 1).bit_length() - 1)


def _seq_small(s: int) -> int:
    return s if s <= 512 else 384 + s % 128


def _baseline_seqs(sh: dict[str, Any], mask: str, window: int | None) -> tuple[int, int]:
    sq = _seq_small(sh["seq_q"])
    if mask == "sliding_window" and window and sh["seq_kv"] > window + 256:
        skv = window + 128 + sh["seq_kv"] % 128
    else:
        skv = _seq_small(sh["seq_kv"])
    if sh["seq_q"] < sh["seq_kv"] and sq >= skv:
        skv = sq + 1 + (sh["seq_kv"] - sh["seq_q"]) % 128
    elif sh["seq_q"] > sh["seq_kv"] and sq <= skv:
        sq = skv + 1 + (sh["seq_q"] - sh["seq_kv"]) % 128
    elif sh["seq_q"] == sh["seq_kv"]:
        sq = skv = max(sq, skv)
    return sq, skv


def perf_factor(seq_q: int, seq_kv: int, q_tile: int) -> int:
    """The performance form's quick factor: the largest f in 8, 4, 2 with ``q_tile % (16 f) == 0`` and both
    lengths divisible by f and at least 128 after it (1: no shrink). ``q_tile`` is the form's (the same for
    every candidate the form builds)."""
    for f in (8, 4, 2):
        if q_tile % (16 * f) == 0 and seq_q % f == 0 and seq_kv % f == 0 and seq_q // f >= 128 \
                and seq_kv // f >= 128:
            return f
    return 1


def quick_heads(num_heads: int, num_kv_heads: int, group: int) -> int:
    """KV heads of the performance form's quick shape: the fewest whose query heads are a multiple of every
    head_group x streams product that divides ``num_heads`` (their gcd with :data:`CHAINS_MAX`)."""
    need = gcd(num_heads, CHAINS_MAX)
    return next((n for n in range(1, num_kv_heads + 1) if (n * group) % need == 0), num_kv_heads)


def harness_configs(plan: Any, out_rows: int | None = None) -> list[dict[str, Any]]:
    """The ``CONFIGS`` entries of a generated SK-01 kernel (see the module docstring), in order.

    ``out_rows``: the performance kernel's ``OUT_ROWS`` (None in the baseline form).
    """
    perf = plan.form == "performance"
    paged, topk = plan.kv_cache == "paged", plan.mask == "topk"
    var = bool(plan.batch_lengths) or paged
    g = plan.group_size
    out = []
    for c in plan.typical_configs:
        sh = dict(c["shape"])
        qs = dict(sh)
        consts: dict[str, int] = {}
        notes: list[str] = []
        if perf:
            qs["batch"] = 1
            qnkv = quick_heads(sh["num_heads"], sh["num_kv_heads"], g)
            f = perf_factor(plan.seq_q, plan.seq_kv, plan.q_tile)
            if f > 1:
                sq, skv = plan.seq_q // f, plan.seq_kv // f
                kt = min(max(-(-plan.kv_tile // f), min(128, skv)), skv)
                qt = plan.q_tile // f
                consts = {"SEQ_Q": sq, "SEQ_KV": skv, "Q_TILE": qt, "KV_TILE": kt,
                          "Q_TILES": -(-sq // qt), "KV_TILES": -(-skv // kt)}
                if out_rows:
                    consts["OUT_ROWS"] = gcd(min(out_rows, qt), qt)
                qs.update(seq_q=sq, seq_kv=skv)
        else:
            qnkv = min(sh["num_kv_heads"], 2)
            qs["batch"] = 2 if (qnkv * g <= 4 or var) else 1
            sq, skv = _baseline_seqs(sh, plan.mask, plan.window)
            qs.update(seq_q=sq, seq_kv=skv)
            if plan.q_tile > sq and sq < sh["seq_q"]:  # only a shrunk axis cuts a tile (a decode's 16-row tile stays)
                consts["Q_TILE"] = max(_pow2_floor(sq), TILE_FLOOR)
            if plan.kv_tile > skv and skv < sh["seq_kv"]:
                if paged or topk:
                    notes.append(f"KV_TILE {plan.kv_tile} kept (the {'page table' if paged else 'top-k keep table'} "
                                 "is built from it)")
                else:
                    consts["KV_TILE"] = max(_pow2_floor(skv), TILE_FLOOR)
        qs["batch"] = min(qs["batch"], sh["batch"])
        if sh["num_kv_heads"] > qnkv:
            qs.update(num_kv_heads=qnkv, num_heads=qnkv * g)
        full = {"SEQ_Q": plan.seq_q, "SEQ_KV": plan.seq_kv, "Q_TILE": plan.q_tile, "KV_TILE": plan.kv_tile,
                "Q_TILES": plan.q_tiles, "KV_TILES": plan.kv_tiles, "OUT_ROWS": out_rows}
        consts = {k: v for k, v in consts.items() if v != full[k]}
        changes = [f"{k} {sh[k]} -> {qs[k]}" for k in KEYS if qs[k] != sh[k]]
        changes += [f"{k} {full[k]} -> {v}" for k, v in consts.items() if k not in ("SEQ_Q", "SEQ_KV")]
        changes += notes
        qt, kt = consts.get("Q_TILE", plan.q_tile), consts.get("KV_TILE", plan.kv_tile)
        entry: dict[str, Any] = {
            "name": c["name"], "seed": c["seed"], "shape": sh, "quick": qs, "shrunk": None,
            "quick_shrunk": ", ".join(changes) or None,
            "tile_pairs": tile_pairs(sh, plan.q_tile, plan.kv_tile), "quick_tile_pairs": tile_pairs(qs, qt, kt)}
        if consts:
            entry["quick_constants"] = consts
        out.append(entry)
    return out
