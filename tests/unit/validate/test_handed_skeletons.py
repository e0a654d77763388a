"""The validator never imports the skeletons: the caller hands them in (opdesign.workflows.validate does)."""

from __future__ import annotations

import pytest

from opdesign.skeletons.registry import FALLBACK, SKELETONS
from opdesign.validate import api
from opdesign.workflows.validate import all_rules, validate_text


def test_workflows_validate_hands_the_registered_skeletons() -> None:
    handed = api.skeletons()
    assert handed.all == SKELETONS and handed.fallback is FALLBACK
    assert handed.find("SK-16") is next(s for s in SKELETONS if s.id == "SK-16")
    assert handed.find("SK-99") is None
    assert "SK-01-R1" in all_rules() and "OD-DOC-01" in all_rules()  # skeleton and shared rules


def test_without_skeletons_the_validator_says_so() -> None:
    kept = list(api._HANDED)
    api._HANDED.clear()
    try:
        with pytest.raises(RuntimeError, match="no skeletons"):
            api.skeletons()
        with pytest.raises(RuntimeError, match="workflows.validate"):
            validate_text("# x\n")
    finally:
        api._HANDED[:] = kept
    assert api.skeletons().fallback is FALLBACK
