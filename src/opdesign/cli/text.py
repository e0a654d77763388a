"""Plain-text views the CLI prints: a card in full, a value as one YAML line or a block."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from opdesign.catalog import Card


def value_lines(name: str, value: object, indent: str = "  ") -> list[str]:
    """``name: value`` for people: one YAML flow line when short, an indented YAML block otherwise."""
    import yaml

    if isinstance(value, str):
        return [f"{indent}{name}: {value}"]
    flow = yaml.safe_dump(value, default_flow_style=True, width=10_000, sort_keys=False, allow_unicode=True)
    flow = flow.strip().removesuffix("...").strip()
    if len(indent) + len(name) + len(flow) <= 100:
        return [f"{indent}{name}: {flow}"]
    block = yaml.safe_dump(value, default_flow_style=False, width=10_000, sort_keys=False, allow_unicode=True)
    return [f"{indent}{name}:"] + [f"{indent}  {line}" for line in block.rstrip().splitlines()]


def card_text(card: Card) -> str:
    """Human view of one card: the front-matter fields, then the Markdown body."""
    out = [f"{card.id}  {card.title}  ({card.type})"]
    for label, value in (("file", card.path), ("flow", card.flow_pattern), ("tags", ", ".join(card.tags))):
        out.append(f"  {label:<8}{value}")
    out.append(f"  source  {card.source}")
    out += ["examples:"] + [f"  - {item}" for item in card.examples]
    out += ["applicability:"] + [f"  - {item}" for item in card.applicability]
    out.append("rules:")
    pad = " " * 23
    for rule in card.rules:
        out.append(f"  {rule.id:<11}{rule.level:<10}{rule.text}")
        if rule.when:
            out.append(f"{pad}when: {rule.when}")
        out.append(f"{pad}consequence: {rule.consequence}")
    out.append("config:" if card.config else "config: (none)")
    for rec in card.config:
        out += value_lines(f"{rec.key} ({rec.status})", rec.value)
        out.append(f"      purpose: {rec.purpose}")
        out += [f"      when: {rec.when}"] if rec.when else []
    out.append("unroll candidates:" if card.unroll_candidates else "unroll candidates: (none)")
    for variant, factors in card.unroll_candidates.items():
        out += value_lines(variant, factors)
    out.append("parameters:" if card.parameters else "parameters: (none)")
    for name, value in card.parameters.items():
        out += value_lines(name, value)
    return "\n".join(out) + "\n\n" + card.body.rstrip()
