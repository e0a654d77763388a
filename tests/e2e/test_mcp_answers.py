"""The MCP server keeps its estimate_design answers per (SPEC path, SPEC bytes) (issue 15): the same
SPEC is answered with the answer the tool gave, without a worker; an edited SPEC is planned again; a
SPEC that names a golden, a failed call and other tools are never kept."""

from __future__ import annotations

import shutil

import anyio
import pytest
from conftest import EXAMPLES

pytest.importorskip("mcp", reason="the MCP server needs the optional 'mcp' extra")

import mcp.types as types  # noqa: E402

from opdesign.agent.mcp_server import Calls, _result  # noqa: E402
from opdesign.agent.tools import Root, call_tool  # noqa: E402


@pytest.fixture()
def root(tmp_path):
    shutil.copy(EXAMPLES / "causal_gqa_tail.yaml", tmp_path / "spec.yaml")
    return tmp_path


def _calls(root, size: int = 64) -> tuple[Calls, list[str]]:
    ran: list[str] = []

    def tool(name, args, jail):  # the real tool, counted
        ran.append(name)
        return call_tool(name, args, jail)

    return Calls(types, Root(root), call=tool, answers=size), ran


def _ask(calls: Calls, name: str, args: dict):
    return anyio.run(calls, name, args)


def _error(result) -> bool:  # mcp 2.x names it is_error, 1.x isError
    return result.is_error if hasattr(result, "is_error") else result.isError


def _content(result) -> dict:
    return result.structured_content if hasattr(result, "structured_content") else result.structuredContent


def test_the_same_spec_is_answered_without_planning_and_an_edit_is_planned_again(root) -> None:
    calls, ran = _calls(root)
    args = {"spec_path": "spec.yaml"}
    first = _ask(calls, "estimate_design", args)
    assert first.model_dump() == _result(types, *call_tool("estimate_design", args, root)).model_dump()
    assert _error(first) is False and ran == ["estimate_design"]
    assert _ask(calls, "estimate_design", args) is first and ran == ["estimate_design"]  # kept: no worker

    spec = root / "spec.yaml"
    text = spec.read_text(encoding="utf-8")
    assert "seq_kv: 1000, head_dim" in text
    spec.write_text(text.replace("seq_kv: 1000, head_dim", "seq_kv: 512, head_dim"), encoding="utf-8")
    edited = _ask(calls, "estimate_design", args)
    assert ran == ["estimate_design"] * 2
    assert _content(edited)["seq_kv"] == 512 and _content(first)["seq_kv"] == 1000
    assert calls.answers.paths() == ["spec.yaml", "spec.yaml"]  # both byte versions are kept


def test_errors_goldens_and_other_tools_are_not_kept(root) -> None:
    calls, ran = _calls(root)
    for _ in range(2):
        bad = _ask(calls, "estimate_design", {"spec_path": "../outside.yaml"})
        assert _error(bad) is True and _content(bad)["error"]["code"] == "path_outside_root"
    spec = root / "spec.yaml"
    spec.write_text(spec.read_text(encoding="utf-8") + "golden: absent_golden.py\n", encoding="utf-8")
    for _ in range(2):
        assert _error(_ask(calls, "estimate_design", {"spec_path": "spec.yaml"})) is True
        assert _error(_ask(calls, "list_rules", {})) is False
    assert ran == ["estimate_design", "estimate_design"] + ["estimate_design", "list_rules"] * 2
    assert calls.answers.paths() == []


def test_the_oldest_answer_goes_first_and_size_zero_keeps_nothing(root) -> None:
    calls, ran = _calls(root, size=2)
    text = (root / "spec.yaml").read_text(encoding="utf-8")
    for n in (1, 2, 3):
        (root / f"s{n}.yaml").write_text(text.replace("seq_kv: 1000, head_dim", f"seq_kv: {256 * n}, head_dim"),
                                         encoding="utf-8")
        assert _error(_ask(calls, "estimate_design", {"spec_path": f"s{n}.yaml"})) is False
    assert calls.answers.paths() == ["s2.yaml", "s3.yaml"]
    _ask(calls, "estimate_design", {"spec_path": "s1.yaml"})  # dropped: planned again
    assert len(ran) == 4 and calls.answers.paths() == ["s3.yaml", "s1.yaml"]

    off, ran_off = _calls(root, size=0)
    for _ in range(2):
        _ask(off, "estimate_design", {"spec_path": "s1.yaml"})
    assert ran_off == ["estimate_design"] * 2 and off.answers.paths() == []
