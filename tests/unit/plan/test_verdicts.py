"""The verdicts DESIGN.md prints are computed from the plan by the validator's own check functions.

``opdesign.plan.checks`` holds pure functions over the ``opdesign:`` block; the planner stores their
verdicts on ``Plan.design_checks`` and the templates print them; the validator's number rules call
the same functions on the block parsed back from the front matter.
"""

from __future__ import annotations

import re

import pytest
import yaml
from conftest import EXAMPLES

from opdesign.plan import checks
from opdesign.render.design import render_all
from opdesign.skeletons.registry import estimate
from opdesign.spec import load_spec
from opdesign.validate import validate_text
from opdesign.workflows.new import plan_from_spec_file

#: The label each verdict row starts with in the design-check table.
LABELS = {
    "C-TILE-02": "C-TILE-02 vector tail alignment", "C-TILE-05": "C-TILE-05 cube [L0, L1]",
    "C-TILE-03 UB": "C-TILE-03 UB budget", "C-TILE-03 L1": "C-TILE-03 L1 budget",
    "C-TILE-03 L0": "C-TILE-03 L0 budgets", "C-TILE-04": "C-TILE-04 expansion estimate",
    "C-LOOP-05": "C-LOOP-05 single unroll value", "SK-01-R6": "SK-01-R6 FP32 state",
    "SK-16-R4": "SK-16-R4 / C-API-05 FP32 gradients", "SK-02-R3": "SK-02-R3 no KV loop, accumulators or unroll",
    "SK-02-R1": "SK-02-R1 / R2 single pass",
}
ROWS_OF = {row.key: row for row in checks.COMMON_ROWS}


def _front_block(design: str) -> dict:
    front = design.split("---\n", 2)[1]
    return yaml.safe_load(front)["opdesign"]


def _printed(design: str) -> dict[str, list[str]]:
    """key -> cells of its row in the design-check table."""
    out = {}
    for line in design.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        for key, label in LABELS.items():
            if cells and cells[0] == label:
                out[key] = cells
    return out


def _check_of(key: str, block: dict) -> dict:
    """Recompute one row from the parsed block with the check function the plan used."""
    fn = {**{k: r.check for k, r in ROWS_OF.items()}, "C-LOOP-05": checks.single_unroll,
          "SK-01-R6": checks.fp32_accumulators, "SK-16-R4": checks.fp32_accumulators,
          "SK-02-R3": checks.no_kv_loop_state, "SK-02-R1": checks.whole_row_fits}[key]
    return [p.message for p in fn(block)]


def _long_context(tmp_path):
    data = yaml.safe_load((EXAMPLES / "dense_fa_8192.yaml").read_text())
    data.update(op_name="longctx_512k", mask="causal")
    data["shape"].update(seq_q=524288, seq_kv=524288)
    path = tmp_path / "longctx_512k.yaml"
    path.write_text(yaml.safe_dump(data))
    return estimate(load_spec(path))


def test_a_512k_plan_prints_the_expansion_it_breaks(tmp_path):
    plan = _long_context(tmp_path)
    assert plan.form == "performance" and plan.expansion.max_per_op == 50331648
    verdict = plan.design_checks["C-TILE-04"]
    assert (verdict.rule, verdict.result) == ("C-TILE-04", "warn")  # C-TILE-04 is a should: warn, not pass
    files = render_all(plan)
    printed = _printed(files["DESIGN.md"])["C-TILE-04"]
    body = plan.expansion.body_total
    assert printed == ["C-TILE-04 expansion estimate", "warn", f"whole body {body} > 18000 (largest op 50331648)"]
    report = validate_text(files["DESIGN.md"], interfaces_text=files["eval/module_interfaces.yaml"])
    found = [f for f in report.findings if f.rule == verdict.rule]
    assert [(f.level, f.message) for f in found] == [
        ("warning", f"stated expansion {body} over the whole traced body exceeds the limit 18000 "
                    f"({body / 18000:.1f}x)")]
    assert found[0].message in verdict.problems  # same function, same words
    # the other rows still pass, and the validator agrees
    assert {k for k, v in plan.design_checks.items() if not v.passed} == {"C-TILE-04"}
    assert {f.rule for f in report.findings if f.level != "info"} == {"C-TILE-04"}


def test_a_failing_budget_prints_fail_and_greater_than():
    plan = plan_from_spec_file(EXAMPLES / "causal_gqa_tail.yaml")
    block = plan.design_block()
    block["ub_budget"]["total_bytes"] = block["ub_budget"]["capacity_bytes"] + 1
    (problem,) = checks.ub_fits(block)
    assert problem.path == ("ub_budget", "total_bytes") and "exceeds the capacity" in problem.message
    again = checks.verdicts(block, [ROWS_OF["C-TILE-03 UB"]])
    broken = plan.model_copy(update={"design_checks": {**plan.design_checks, **again}})
    assert broken.design_checks["C-TILE-03 UB"].result == "fail"
    cells = _printed(render_all(broken)["DESIGN.md"])["C-TILE-03 UB"]
    assert cells[1] == "fail" and " > " in cells[2]


@pytest.mark.parametrize("spec", sorted(p.name for p in EXAMPLES.glob("*.yaml")))
def test_every_printed_verdict_is_what_the_validator_computes(spec):
    plan = plan_from_spec_file(EXAMPLES / spec)
    files = render_all(plan)
    design = files["DESIGN.md"]
    block = _front_block(design)
    assert block == plan.design_block()
    printed = _printed(design)
    assert set(printed) == set(plan.design_checks) and len(printed) >= 8
    report = validate_text(design, interfaces_text=files["eval/module_interfaces.yaml"])
    fired = {f.rule for f in report.findings if f.level in ("error", "warning")}
    for key, verdict in plan.design_checks.items():
        assert printed[key][1] == verdict.result, key
        assert _check_of(key, block) == verdict.problems, key
        assert (verdict.rule in fired) == (not verdict.passed), (key, report.findings)
        if verdict.passed:
            assert not re.search(r"\d >(?!=) \d", printed[key][2]), printed[key]
