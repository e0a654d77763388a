"""OD-PC-05 types a call's result from the target's manifest (issue 33): a name the target lacks is
reported once and its result is unknown (no cascade of "Tensor has no method" findings on an
``ir.IRBuilder()`` of a later release), and calling a class gives an instance of that class."""

from __future__ import annotations

from opdesign.validate.analysis.api_surface import check_source


def _messages(text: str) -> list[str]:
    return [hit.message for hit in check_source(text)]


def test_a_name_the_target_lacks_is_reported_once_and_its_result_is_unknown():
    text = "import pypto\n\nb = pypto.ir.IRBuilder()\nb.begin_function('f')\nb.assign(1)\n"
    found = _messages(text)
    assert len(found) == 1 and found[0].startswith("pypto.ir: not in PyPTO 0.2.0 (added later"), found


def test_a_symbolic_scalar_instance_is_not_a_tensor():
    assert _messages("import pypto\n\ns = pypto.symbolic_scalar(4)\nc = s.concrete()\nok = s.is_concrete()\n") == []
    # the near miss: a tensor still has no .concrete()
    found = _messages("import pypto\n\nt = pypto.tensor([4, 4], pypto.DT_FP32)\nc = t.concrete()\n")
    assert found == ["a PyPTO Tensor has no method .concrete() in 0.2.0"], found
