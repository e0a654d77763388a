"""One rule catalog: `opdesign rules [--json] [ID]` and the agent tools list_rules / explain_rule
serve the same rows, one per id, and every id opdesign prints can be explained."""

from __future__ import annotations

import json
import re

import pytest
from conftest import EXAMPLES, run_cli

from opdesign.agent.tools import call_tool
from opdesign.catalog import load_catalog
from opdesign.render.design import render_all
from opdesign.validate import all_rules, validate_text
from opdesign.validate.engine.rulebook import explain, rulebook
from opdesign.workflows.new import plan_from_spec_file

ID_PATTERN = re.compile(r"\b(?:SK|AT|C|OD)-[A-Z]*-?\d+(?:-[A-Z]*\d+)?\b")
CARD_IDS = re.compile(r"^(?:SK|AT)-\d\d$")


def _tool(name: str, args: dict) -> dict:
    result, ok = call_tool(name, args)
    assert ok, result
    return result


def test_cli_json_and_list_rules_have_the_same_rows():
    cli = json.loads(run_cli("rules", "--json").stdout)
    tool = _tool("list_rules", {})["rules"]
    assert [r["id"] for r in cli] == [r["id"] for r in tool]
    assert cli == tool
    ids = [r["id"] for r in cli]
    assert len(ids) == len(set(ids)) == len(rulebook())


def test_the_catalog_holds_every_constraint_card_rule_and_check_once():
    cat = load_catalog()
    book = rulebook()
    card_rules = {r.id for card in cat.cards.values() for r in card.rules}
    assert set(cat.constraints) | card_rules | set(all_rules()) <= set(book)
    for rid, check in all_rules().items():
        entry = book[rid]
        assert entry.check is not None and entry.check["level"] == check.level
        assert entry.kind == ("constraint" if rid in cat.constraints else "card" if rid in card_rules else "check")


@pytest.mark.parametrize("rule_id", ["SK-01-R4", "C-TILE-02", "OD-DOC-05", "SK-01-PERF-3", "SK-02-COND-2"])
def test_rules_id_and_explain_rule_agree(rule_id):
    proc = run_cli("rules", rule_id, "--json")
    assert proc.returncode == 0, proc.stderr
    cli = json.loads(proc.stdout)
    tool = _tool("explain_rule", {"id": rule_id.lower()})
    assert cli["id"] == tool["id"] == rule_id and cli["kind"] == tool["kind"] and cli["text"] == tool["text"]
    assert run_cli("rules", rule_id).returncode == 0


def _printed_ids(text: str) -> set[str]:
    return {i for i in ID_PATTERN.findall(text) if not CARD_IDS.match(i)}


@pytest.mark.parametrize("spec", sorted(p.name for p in EXAMPLES.glob("*.yaml")))
def test_every_id_a_design_prints_is_explainable(spec):
    plan = plan_from_spec_file(EXAMPLES / spec)
    files = render_all(plan)
    report = validate_text(files["DESIGN.md"], interfaces_text=files["eval/module_interfaces.yaml"])
    printed = _printed_ids("".join(files.values())) | {f.rule for f in report.findings}
    printed |= {c.id for c in plan.form_checks + plan.skeleton_checks} | {v.rule for v in plan.design_checks.values()}
    assert printed, spec
    for rule_id in sorted(printed):
        assert explain(rule_id).id == rule_id
