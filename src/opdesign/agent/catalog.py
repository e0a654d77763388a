"""Agent tools over the catalog: pattern cards (SK/AT) and rules (constraints, card rules, validator rules).

They call the functions behind ``opdesign cards list|show`` and ``opdesign rules [ID]``.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

from opdesign.agent.base import Root, Tool, ToolInput, ToolOutput, require_library

RULE_ID = Field(min_length=1, max_length=64, description="rule id, e.g. C-TILE-02 or SK-01-R3")


# --- list_patterns / get_pattern ---


class ListPatternsInput(ToolInput):
    type: Literal["skeleton", "atom"] | None = Field(None, description="only skeletons (SK) or only atoms (AT)")
    tag: str | None = Field(None, min_length=1, max_length=64, description="only cards carrying this tag")


class PatternSummary(ToolOutput):
    id: str = Field(description="card id, SK-xx or AT-xx")
    type: Literal["skeleton", "atom"]
    title: str
    tags: list[str]
    flow_pattern: str
    path: str = Field(description="card file inside the opdesign data")


class ListPatternsResult(ToolOutput):
    patterns: list[PatternSummary]


def _list_patterns(args: ListPatternsInput, root: Root) -> ListPatternsResult:
    from opdesign.catalog import load_catalog

    keys = set(PatternSummary.model_fields)
    cards = [
        PatternSummary(**card.model_dump(include=keys))
        for card in load_catalog().cards.values()
        if (args.type is None or card.type == args.type) and (args.tag is None or args.tag in card.tags)
    ]
    return ListPatternsResult(patterns=cards)


class GetPatternInput(ToolInput):
    id: str = Field(min_length=1, max_length=16, description="card id, e.g. SK-01 or AT-17 (case-insensitive)")


def _card_model() -> type[BaseModel]:
    from opdesign.catalog import Card

    return Card


def _get_pattern(args: GetPatternInput, root: Root) -> BaseModel:
    from opdesign.catalog import load_catalog

    return load_catalog().card(args.id)


# --- list_rules / explain_rule ---


class ListRulesInput(ToolInput):
    prefix: str | None = Field(None, min_length=1, max_length=64,
                               description="only rules whose id starts with this, e.g. C-TILE or SK-01")


class RuleRow(ToolOutput):
    id: str
    kind: str = Field(description="constraint (table entry), card (SK/AT card rule), condition (planner condition) "
                                  "or check (validator rule without a catalog entry)")
    level: str
    text: str
    source: str
    family: str | None = Field(None, description="validator family when the validator checks the id: document, "
                                                 "interfaces, numbers, pseudocode")
    checked_by_validator: bool = Field(description="opdesign validate re-checks this rule")


class ListRulesResult(ToolOutput):
    rules: list[RuleRow]


def _rulebook(name: str) -> Any:
    """A function of the one rule catalog (:mod:`opdesign.validate.engine.rulebook`), shared with ``opdesign rules``."""
    return require_library("opdesign.workflows.validate", name)


def _list_rules(args: ListRulesInput, root: Root) -> ListRulesResult:
    return ListRulesResult(rules=[RuleRow(**row) for row in _rulebook("rule_rows")(args.prefix)])


class ExplainRuleInput(ToolInput):
    id: str = RULE_ID


class CheckInfo(ToolOutput):
    """How the validator checks the rule (ruff-style: what, why, a bad and a good example)."""

    family: str
    level: str
    message: str
    explanation: str
    bad: str = Field(description="a DESIGN.md / interface snippet the check reports")
    good: str = Field(description="what to write instead")
    needs_block: bool = Field(description="the check needs the opdesign: block of the DESIGN.md front matter")


class RuleInfo(ToolOutput):
    id: str
    kind: str = Field(description="constraint, card, condition or check (a validator rule with no catalog entry)")
    level: str
    text: str = Field(description="the rule")
    consequence: str | None = Field(None, description="what goes wrong when it is broken")
    when: str | None = Field(None, description="when the rule applies (always when absent)")
    source: str
    parameters: dict[str, Any] = Field(default_factory=dict, description="thresholds the check reads")
    owner: str | None = Field(None, description="the card (SK/AT id) or table file the rule belongs to")
    area: str | None = Field(None, description="constraint area (TILE, LOOP, SYM, DATA, API)")
    checked_by: str | None = Field(None, description="for a condition: the validator rule that re-checks it")
    check: CheckInfo | None = Field(None, description="the validator check of this id, when there is one")


def _explain_rule(args: ExplainRuleInput, root: Root) -> RuleInfo:
    entry = _rulebook("explain")(args.id)
    data = entry.model_dump()
    check = data.pop("check")
    return RuleInfo(**data, check=CheckInfo(**{k: v for k, v in check.items() if k in CheckInfo.model_fields})
                    if check else None)


CATALOG_TOOLS = (
    Tool(
        "list_patterns",
        "List the pattern cards: skeletons (SK-xx, the overall loop structure such as SK-01 online-softmax "
        "flash attention) and atoms (AT-xx, building blocks such as paged KV gather or FP8 dequantisation), "
        "with title, tags and flow. Filter by type or tag. Follow with get_pattern for the rules of one card.",
        ListPatternsInput, lambda: ListPatternsResult, _list_patterns,
    ),
    Tool(
        "get_pattern",
        "Return one pattern card in full: applicability, rules (id, level, text, consequence), recommended "
        "configuration, unroll candidates, parameters and the explanation body. Read it when a finding names "
        "the card or when deciding whether a skeleton or atom fits the operator.",
        GetPatternInput, _card_model, _get_pattern,
    ),
    Tool(
        "list_rules",
        "List every rule opdesign knows: constraint table entries (C-TILE, C-LOOP, C-SYM, C-DATA, C-API), "
        "pattern card rules (SK-xx-Rn, AT-xx-Rn) and validator checks (OD-DOC, OD-IF, OD-NUM, OD-PC and the "
        "constraint or card ids they enforce), each with id, level, one-line text, source and kind. Filter by id "
        "prefix. Use explain_rule for the full entry of one id.",
        ListRulesInput, lambda: ListRulesResult, _list_rules,
    ),
    Tool(
        "explain_rule",
        "Explain one rule by id (as given in a validate_design finding): what it requires, when it applies, "
        "what breaks when it is violated, its source, the thresholds it uses and, for a validator check, a bad "
        "and a good example. Read it before fixing a finding you do not understand.",
        ExplainRuleInput, lambda: RuleInfo, _explain_rule,
    ),
)
