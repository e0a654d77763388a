"""SK-01's tuning form rules are data of its card, not literals of the cost model (issue 29)."""

from __future__ import annotations

from opdesign.catalog import load_catalog
from opdesign.tuning.space import form_rule_ids


def test_the_form_rule_ids_come_from_the_card() -> None:
    cards = load_catalog()
    assert form_rule_ids(cards.card("SK-01")) == ("SK-01-P1", "SK-01-P2")
    perf = {inv["id"] for inv in cards.card("SK-01").param("perf_invariants")}
    assert set(form_rule_ids(cards.card("SK-01"))) <= perf  # both name invariants the card states
    assert form_rule_ids(cards.card("SK-16")) == ("", "")  # a card without a performance form
