"""Typed access to the ``opdesign:`` block (``Plan.design_block()``) and the catalog for the rules.

Every accessor is defensive: a value of the wrong type reads as None (the
rule that owns that value, e.g. C-TILE-06 or OD-NUM-02, reports it), so no
other rule trips over it. Thresholds come from the catalog, never from here.
"""

from __future__ import annotations

import re
from typing import Any

from opdesign.catalog import load_catalog
from opdesign.plan import checks
from opdesign.validate.api import Context, Hit, skeletons

#: Largest tile or size value taken as a number; bigger ones are reported by C-TILE-06.
MAX_VALUE = checks.MAX_VALUE
_LEADING_INT = re.compile(r"^\s*\**\s*(-?\d+)\b")
_SKELETON_ID = re.compile(r"^SK-\d{2}$")
_CARD_ID = re.compile(r"^(SK|AT)-\d{2}$")
#: What an ``opdesign:`` block's ``skeleton`` or a card-table row says for a design with no skeleton.
NO_SKELETON = ("none",)
#: Card tags that make a design an attention one although it names no skeleton (an online-softmax KV loop).
ATTENTION_TAGS = ("attention", "online-softmax")


#: Largest count (root_count, task_count) taken as a number: counts of long-context plans pass 2^31
#: (a 64 x 64-head causal 128K plan has 2.1e9 tasks); 2^53 keeps them exact in JSON.
MAX_COUNT = 2**53


def pos_int(value: Any, limit: int = MAX_VALUE) -> int | None:
    """``value`` if it is an int in [1, limit] (not a bool), else None."""
    return checks.pos_int(value, limit)


def catalog():
    return load_catalog()


def constraint(constraint_id: str):
    return catalog().constraint(constraint_id)


def device(ctx: Context):
    """The block's device profile, or None (unknown names are reported by OD-NUM-02)."""
    name = (ctx.block or {}).get("device")
    if isinstance(name, str):
        return catalog().devices.get(name.strip().lower())
    return None


def is_fp32(name: Any) -> bool:
    return checks.is_fp32(name)


def accumulator_names(ctx: Context) -> list[str]:
    """Names of the loop-carried accumulators: the block's ``accumulators`` keys, else the fallback
    skeleton's (SK-01) card list."""
    accs = (ctx.block or {}).get("accumulators")
    if isinstance(accs, dict) and accs:
        return [str(k) for k in accs]
    return list(catalog().card(skeletons().fallback.id).param("accumulators"))


def _pair(value: Any) -> tuple[int, int] | None:
    return checks.pair(value)


def cube_tiles(ctx: Context) -> dict[str, Any] | None:
    """``{stage: plan.CubeTile}`` when every cube tile of the block is well-formed, else None."""
    return checks.cube_tiles(ctx.block or {})


def vec_tiles(ctx: Context) -> dict[str, Any] | None:
    """``{stage: plan.VecTile}`` when every vector tile of the block is well-formed, else None."""
    return checks.vec_tiles(ctx.block or {})


def hits(ctx: Context, problems: list[checks.Problem]) -> list[Hit]:
    """The problems of a :mod:`opdesign.plan.checks` function as hits at their block lines."""
    return [Hit(ctx.block_line(*p.path), p.message) for p in problems]


def axis_hi(ctx: Context, name: str) -> int | None:
    """Largest value of a sequence axis: the block's typical value or the dynamic range's ``hi``."""
    value = pos_int((ctx.block or {}).get(name))
    axes = ctx.front.get("dynamic_axes")
    for axis in axes if isinstance(axes, list) else []:
        if isinstance(axis, dict) and axis.get("name") == name:
            rng = axis.get("range")
            hi = pos_int(rng[1]) if isinstance(rng, list) and len(rng) == 2 else None
            if hi is not None:
                value = max(value or 0, hi)
    return value


def known_skeletons() -> tuple[str, ...]:
    """The skeleton ids of the catalog (``patterns/skeletons``), e.g. ``("SK-01", "SK-02", "SK-16")``."""
    return tuple(sorted(k for k in catalog().cards if k.startswith("SK-")))


def block_skeleton(ctx: Context) -> str | None:
    """The block's ``skeleton`` when it is a catalog skeleton id (exact spelling), else None."""
    value = (ctx.block or {}).get("skeleton")
    return value if isinstance(value, str) and value in known_skeletons() else None


def table_skeleton(ctx: Context) -> str | None:
    """The first SK id in the first column of a decisions-chapter table (the SK/AT selection), or None."""
    for table in ctx.doc.tables:
        if table.chapter == "decisions":
            for row in table.rows:
                if row.cells and _SKELETON_ID.match(row.cells[0].strip()):
                    return row.cells[0].strip()
    return None


def named_cards(ctx: Context) -> list[str]:
    """The card ids (``SK-nn`` / ``AT-nn``) and ``none`` entries in the first column of the decisions
    chapter's tables (the card selection), in order."""
    out = []
    for table in ctx.doc.tables:
        if table.chapter != "decisions":
            continue
        for row in table.rows:
            cell = row.cells[0].strip().strip("`").strip() if row.cells else ""
            if _CARD_ID.match(cell) or cell.casefold() in NO_SKELETON:
                out.append(cell)
    return out


def is_attention_design(ctx: Context) -> bool:
    """Whether the attention rules apply (``@rule(..., attention_only=True)``), decided from what the
    design says, never from names in its code:

    - the block says ``skeleton: none``: no;
    - a skeleton (block ``skeleton`` or the first SK id of the card selection): its card's tags say
      (SK-01, SK-02, SK-16 are attention skeletons);
    - no skeleton, but the card selection names cards (or ``none``): yes only when one of them is
      tagged ``online-softmax`` (AT-01: an online-softmax KV loop written without a skeleton card);
      a matmul, layernorm or plain softmax design that names AT-02 / AT-21 or ``none`` is not attention;
    - nothing named at all: unknown, treated as attention (opdesign's operators; the fallback skeleton's
      rules apply, as :func:`rules_skeleton` says).
    """
    if ctx.block is not None and str(ctx.block.get("skeleton", "")).strip().casefold() in NO_SKELETON:
        return False
    name = skeleton(ctx)
    cards = catalog().cards
    if name is not None:
        card = cards.get(name)
        return card is None or any(t in ATTENTION_TAGS for t in card.tags)
    named = named_cards(ctx)
    if not named:
        return True
    return any(c in cards and any(t in ATTENTION_TAGS for t in cards[c].tags) for c in named)


def skeleton(ctx: Context) -> str | None:
    """The design's skeleton: the block's ``skeleton`` when it is a known id; else (no block, or a
    malformed / unknown value, which OD-NUM-02 reports) the first SK id of the decisions chapter's
    selection table; else (a kernel ``.py``) the skeleton its docstring names; else None (unknown: the
    fallback skeleton's rules apply, see :func:`rules_skeleton`).
    A bad value in the block therefore never switches rules off."""
    return block_skeleton(ctx) or table_skeleton(ctx) or ctx.declared_skeleton


def rules_skeleton(ctx: Context) -> Any | None:
    """The registered skeleton whose formulas the rules use: the design's, or the fallback (SK-01) when
    it names none; None when it names a skeleton without a package."""
    name = skeleton(ctx)
    handed = skeletons()
    return handed.fallback if name is None else handed.find(name)


def cell_int(text: str) -> int | None:
    """The integer a table cell starts with (``**192768**`` -> 192768), or None."""
    match = _LEADING_INT.match(text)
    return int(match.group(1)) if match and len(match.group(1)) < 19 else None
