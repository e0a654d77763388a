"""The one rule catalog behind ``opdesign rules [ID] [--json]`` and the agent tools ``list_rules`` /
``explain_rule``.

A row is one rule id, whatever enforces it. Its facets:

- ``constraint``: an entry of the constraint tables (``constraints/*.yaml``: C-TILE, C-LOOP ...);
- ``card``: a rule of a pattern card (``SK-01-R6``, ``AT-17-R4``);
- ``condition``: an applicability or form condition a planner evaluates and DESIGN.md prints
  (``SK-01-PERF-1``, ``SK-02-COND-2``, ``SK-16-WHEN-3``), declared by the skeleton's rule module;
- ``check``: a validator rule (:mod:`opdesign.validate.api`).

A check with the id of a constraint or card rule is the same row (``kind`` is the catalog entry's,
``checked_by_validator`` is true and ``check`` holds the validator facet); a check without a catalog
entry (``OD-*``) is a row of kind ``check``. Ids are unique.
"""

from __future__ import annotations

from functools import cache
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from opdesign.catalog import load_catalog
from opdesign.errors import NotFoundError
from opdesign.validate.api import conditions
from opdesign.validate.engine.collect import all_rules

Kind = Literal["constraint", "card", "condition", "check"]


class Entry(BaseModel):
    """One rule id with every facet opdesign has for it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str
    kind: Kind = Field(description="constraint, card (SK/AT card rule), condition (planner condition) or check "
                                   "(a validator rule with no catalog entry)")
    level: str = Field(description="must / must_not / should for catalog rules, error / warning / info for checks")
    text: str
    source: str
    consequence: str | None = None
    when: str | None = None
    parameters: dict[str, Any] = Field(default_factory=dict)
    owner: str | None = Field(None, description="the card (SK/AT id) or table file the rule belongs to")
    area: str | None = Field(None, description="constraint area (TILE, LOOP, SYM, DATA, API)")
    checked_by: str | None = Field(None, description="for a condition: the validator rule that re-checks it")
    check: dict[str, Any] | None = Field(None, description="the validator facet: family, level, message, "
                                                           "explanation, bad, good, needs_block, attention_only")

    @property
    def checked_by_validator(self) -> bool:
        return self.check is not None or self.checked_by is not None

    def row(self) -> dict[str, Any]:
        """The listing row: ``{id, kind, level, text, source, family, checked_by_validator}``."""
        return {"id": self.id, "kind": self.kind, "level": self.level, "text": self.text, "source": self.source,
                "family": self.check["family"] if self.check else None,
                "checked_by_validator": self.checked_by_validator}


@cache
def rulebook() -> dict[str, Entry]:
    """Every rule id opdesign knows, in order: constraints, card rules, conditions, validator-only checks."""
    catalog, checks = load_catalog(), all_rules()
    facet = {rid: r.as_dict() for rid, r in checks.items()}
    out: dict[str, Entry] = {}

    def add(entry: Entry) -> None:
        if entry.id in out:
            raise ValueError(f"rule id {entry.id} is defined twice ({out[entry.id].kind}, {entry.kind})")
        out[entry.id] = entry

    for c in catalog.constraints.values():
        add(Entry(id=c.id, kind="constraint", level=c.level, text=c.rule, source=c.source, consequence=c.consequence,
                  when=c.when, parameters=c.parameters, owner=c.path, area=c.area, check=facet.get(c.id)))
    for card in catalog.cards.values():
        for r in card.rules:
            add(Entry(id=r.id, kind="card", level=r.level, text=r.text, source=card.source, consequence=r.consequence,
                      when=r.when, owner=card.id, check=facet.get(r.id)))
        for inv in card.parameters.get("perf_invariants", []):  # SK-01-P1..P5; the checked ones are checks
            if inv["id"] not in checks:
                add(Entry(id=inv["id"], kind="card", level="must", text=inv["text"], source=card.source,
                          owner=card.id))
    for cond in conditions():
        add(Entry(id=cond.id, kind="condition", level="must", text=cond.text, source=cond.source,
                  owner=cond.id.rsplit("-", 2)[0], checked_by=cond.checked_by))
    for rid, r in checks.items():
        if rid not in out:
            add(Entry(id=rid, kind="check", level=r.level, text=r.message, source=r.source, check=facet[rid]))
    return out


def rule_rows(prefix: str | None = None) -> list[dict[str, Any]]:
    """Listing rows of the rules whose id starts with ``prefix`` (case-insensitive; all without one)."""
    want = (prefix or "").strip().upper()
    return [e.row() for rid, e in rulebook().items() if rid.upper().startswith(want)]


def explain(rule_id: str) -> Entry:
    """The entry of one id (case-insensitive). Raises NotFoundError for an unknown id (with close ids)."""
    found = rulebook().get(rule_id.strip().upper())
    if found is None:
        import difflib

        close = difflib.get_close_matches(rule_id.strip().upper(), list(rulebook()), n=3, cutoff=0.75)
        hint = f"did you mean {' or '.join(close)}? " if close else ""
        raise NotFoundError(f"unknown rule {rule_id!r}; {hint}`opdesign rules` lists every id",
                            {"id": rule_id, "close": close})
    return found


def group_rows(query: str) -> list[dict[str, Any]]:
    """Rows of the ids under ``query``: a card (``SK-01`` -> its ``SK-01-*`` rules and conditions) or a
    family (``C-TILE``, ``OD-IF``, ``SK-01-PERF``); case-insensitive, the id must continue with ``-``."""
    want = query.strip().upper() + "-"
    return [e.row() for rid, e in rulebook().items() if rid.startswith(want)]


def _indent(text: str, pad: str = "    ") -> str:
    return "\n".join(f"{pad}{line}" if line else "" for line in text.splitlines())


def _check_text(entry: Entry) -> str:
    c = entry.check or {}
    return (f"{entry.id}  ({c['level']}, {c['family']} rule; source: {c['source']})"
            f"\n  {c['message']}\n\n{c['explanation']}\n\nbad:\n{_indent(c['bad'])}\n\ngood:\n{_indent(c['good'])}"
            + ("\n\n(needs the opdesign block of the front matter)" if c["needs_block"] else "")
            + ("\n\n(also runs on kernel .py files: opdesign validate kernel.py / DIR)" if c.get("on_kernel") else "")
            + ("\n\n(attention operators only: skipped on a design whose skeleton or card selection says it is "
               "not attention, e.g. a matmul, layernorm or plain softmax)" if c.get("attention_only") else ""))


def explain_text(rule_id: str, value_lines: Any = None) -> str:
    """Human view of one id (``opdesign rules ID``): the catalog fields, then the validator check.

    ``value_lines(name, value, indent)`` formats a parameter (the CLI passes its YAML formatter).
    """
    e = explain(rule_id)
    if e.kind == "check":
        return _check_text(e)
    head = f"{e.id}  ({e.level}, " + (f"area {e.area}" if e.area else f"{e.kind} of {e.owner}") + ")"
    out = [head]
    out += [f"  {label:<13}{value}" for label, value in
            (("rule", e.text), ("when", e.when), ("consequence", e.consequence)) if value]
    out.append(f"  {'source':<13}{e.source}")
    if e.kind == "constraint":
        out.append(f"  {'file':<13}{e.owner}")
    if e.parameters:
        out.append("  parameters:")
        for name, value in e.parameters.items():
            out += value_lines(name, value, "    ") if value_lines else [f"    {name}: {value}"]
    if e.checked_by:
        out.append(f"  {'checked by':<13}{e.checked_by} (opdesign validate)")
    text = "\n".join(out)
    return text + (f"\n\ncheck (opdesign validate): {_check_text(e)}" if e.check else "")


def row_line(row: dict[str, Any]) -> str:
    """One listing line of ``opdesign rules``: id, ``*`` when the validator checks it, level, text."""
    return f"{row['id']:<11}{'*' if row['checked_by_validator'] else ' '} {row['level']:<10}{row['text']}"


def lookup_text(query: str, as_json: bool = False, value_lines: Any = None) -> str:
    """``opdesign rules ID``: a rule id in full; a card id (``SK-01``, ``AT-17``) or a family
    (``C-TILE``, ``OD-IF``, ``SK-01-PERF``) as its rules, one a line (``--json``: the rows).

    Raises:
        NotFoundError: neither a rule, a card nor a family (the message names close ids).
    """
    import json

    rid = query.strip().upper()
    if rid in rulebook():
        return rulebook()[rid].model_dump_json(indent=2) if as_json else explain_text(rid, value_lines)
    rows, card = group_rows(rid), load_catalog().cards.get(rid)
    if not rows and card is None:
        explain(query)  # raises NotFoundError
    if as_json:
        return json.dumps(rows, indent=2, ensure_ascii=False)
    if card is not None:
        head = f"{card.id} is a pattern card ({card.title}); `opdesign cards show {card.id}` shows it in full."
        head += f" Its rules ({len(rows)}):" if rows else " It has no rule ids of its own."
    else:
        head = f"{rid}: {len(rows)} rule{'' if len(rows) == 1 else 's'} (`opdesign rules ID` explains one):"
    return "\n".join([head] + [row_line(r) for r in rows])
