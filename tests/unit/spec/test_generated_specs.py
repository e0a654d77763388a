"""The SPEC generator of benchmarks/verify_generated_specs.py draws only SPECs that `opdesign new` plans,
deterministically, and every variant it names gets its share (the 20-SPEC verify run is the script's)."""

from __future__ import annotations

import sys

import pytest
from conftest import REPO

from opdesign.skeletons.registry import estimate
from opdesign.spec import parse_spec

sys.path.insert(0, str(REPO / "benchmarks"))
import verify_generated_specs as gen  # noqa: E402

EXPECTED_SKELETON = {"sk02_topk": {"SK-02", "SK-01"}, "sk16_backward": {"SK-16"}}


@pytest.fixture(scope="module")
def drawn():
    return gen.draw_specs(20, 0)


def test_twenty_specs_cover_every_variant_deterministically(drawn):
    assert len(drawn) == 20
    counts = {v: sum(1 for variant, _ in drawn if variant == v) for v in gen.VARIANTS}
    assert min(counts.values()) >= 2, counts
    assert gen.draw_specs(20, 0) == drawn
    assert gen.draw_specs(20, 1) != drawn
    assert len({repr(spec) for _, spec in drawn}) == 20  # no duplicates
    # (the draws are fixed per process and Hypothesis release; tests/fixtures/generated pins four of them)


def test_every_drawn_spec_plans_as_its_variant(drawn):
    for variant, spec in drawn:
        plan = estimate(parse_spec(spec, variant))
        assert plan.skeleton.id in EXPECTED_SKELETON.get(variant, {"SK-01"}), (variant, plan.skeleton.id)
        s = spec["shape"]
        roots_ok = 16 <= s["batch"] * s["num_heads"] * 2 <= 256  # condition 3 (perf_root_range) with 2 Q tiles
        assert (plan.form == "performance") == (variant == "sk01_perf_form" and roots_ok), (
            variant, gen.describe(spec), [(c.id, c.passed) for c in getattr(plan, "form_checks", [])])
        if variant == "sk01_paged_decode":
            assert plan.variant.startswith("PageAttn")
        if variant == "sk01_tensor_mask":
            assert plan.variant == "FA Score"
