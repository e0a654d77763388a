"""Rules that only make sense for attention (``@rule(..., attention_only=True)``) stay quiet on a
design that says it is not attention (its card selection names no attention skeleton), and run on the
same code when the design names SK-01. Decided from the design's cards, never from names in the code."""

from __future__ import annotations

import pytest
from rule_harness import CHAPTERS, FRONT, INTERFACES, _document

from opdesign.validate import all_rules, validate_text
from opdesign.validate.engine.rulebook import explain_text

# a softmax written the way real vector kernels are: no combine_axis, no KV loop, no online state
SOFTMAX = '''\
@pypto.frontend.jit()
def softmax_kernel(x, y):
    pypto.set_vec_tile_shapes(8, 1024)
    for r_idx in pypto.loop(rows, name="rows"):
        xi = pypto.view(x, [8, 1024], [r_idx * 8, 0])
        w = pypto.matmul(xi, xi, pypto.DT_FP32, b_trans=True)
        e = pypto.exp(pypto.sub(w, pypto.amax(w, dim=-1, keepdim=True)))
        pypto.assemble(pypto.div(e, pypto.sum(e, dim=-1, keepdim=True)), [r_idx * 8, 0], y)
'''


def _rules(cards: str) -> set[str]:
    decisions = CHAPTERS["decisions"].replace("| SK-01 | forward attention over KV tiles |", cards)
    chapters = dict(CHAPTERS, decisions=decisions, pseudocode="## Pseudocode\n\n```python\n" + SOFTMAX + "```\n")
    report = validate_text(_document(FRONT, chapters), "DESIGN.md", INTERFACES, "eval/module_interfaces.yaml")
    return {f.rule for f in report.findings}


ATTENTION_HITS = {"OD-PC-04", "SK-01-R1"}  # what the softmax code trips as an SK-01 design


@pytest.mark.parametrize("cards", ["| none | softmax, no attention skeleton |", "| AT-02 | standard softmax |",
                                   "| AT-21 | sub-graph scopes |"])
def test_attention_rules_quiet_on_other_operators(cards: str) -> None:
    assert _rules(cards) & ATTENTION_HITS == set()


@pytest.mark.parametrize("cards", ["| SK-01 | forward attention over KV tiles |", "| AT-01 | online softmax |"])
def test_attention_rules_run_on_attention_designs(cards: str) -> None:
    assert _rules(cards) >= ATTENTION_HITS


def test_the_attention_rules_say_so() -> None:
    flagged = sorted(r.id for r in all_rules().values() if r.attention_only)
    assert {"OD-PC-04", "SK-01-R1", "SK-01-R2", "SK-01-R3", "SK-01-R6", "AT-17-R4", "SK-02-R3",
            "SK-16-R3"} <= set(flagged)
    assert not {"OD-PC-03", "OD-PC-05", "C-SYM-06", "C-SYM-07", "C-TILE-06"} & set(flagged)
    assert "attention operators only" in explain_text("OD-PC-04")
    assert "attention operators only" not in explain_text("OD-PC-03")
