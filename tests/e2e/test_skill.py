"""skills/opdesign/SKILL.md: front matter, length, and every example call executed against the tools.

Example format in SKILL.md: a line ``<!-- call: TOOL -->`` followed by a ```json
block of arguments; optionally ``<!-- result: TOOL -->`` followed by a ```json
block that shows part of the answer (every key and value shown must be in the
real answer; a list shows a selection of the real items in their order; the
string "..." matches anything). A call followed by a result holding "error" must
fail with that error; every other call must succeed.
"""

from __future__ import annotations

import importlib.util
import json
import re
import shutil

import pytest
import yaml
from conftest import EXAMPLES, REPO
from jsonschema.validators import validator_for
from markdown_it import MarkdownIt

from opdesign.agent.base import ERROR_CODES, MAX_FILE_BYTES, MAX_TEXT_CHARS, error_schema
from opdesign.agent.tools import TOOLS, call_tool
from opdesign.io.paths import data_dir

SKILL = data_dir("skills") / "opdesign" / "SKILL.md"
MARKER = re.compile(r"^<!--\s*(call|result):\s*([a-z_]+)\s*-->$")


def _examples() -> list[tuple[str, str, object, int]]:
    """``(kind, tool, parsed json, line)`` for every marked block, in document order."""
    tokens = MarkdownIt().parse(SKILL.read_text(encoding="utf-8"))
    out, pending = [], None
    for token in tokens:
        if token.type == "html_block":
            match = MARKER.match(token.content.strip())
            assert match or "<!--" not in token.content, f"unreadable marker: {token.content!r}"
            pending = (match.group(1), match.group(2), token.map[0] + 1) if match else None
        elif token.type == "fence" and pending is not None:
            assert token.info.strip() == "json", f"line {pending[2]}: the block after a marker must be ```json"
            out.append((pending[0], pending[1], json.loads(token.content), pending[2]))
            pending = None
        elif token.type not in ("paragraph_open", "inline", "paragraph_close") and pending is not None:
            pytest.fail(f"line {pending[2]}: a marker must be followed by a ```json block")
    return out


HAVE_PYPTO = all(importlib.util.find_spec(m) is not None for m in ("pypto", "torch"))


def _matches(shown: object, actual: object, where: str = "$") -> None:
    if shown == "...":
        return
    if isinstance(shown, dict):
        assert isinstance(actual, dict), f"{where}: expected an object, got {actual!r}"
        for key, value in shown.items():
            assert key in actual, f"{where}: no key {key!r} in the real answer"
            _matches(value, actual[key], f"{where}.{key}")
    elif isinstance(shown, list):
        assert isinstance(actual, list), f"{where}: expected a list, got {actual!r}"
        rest = iter(enumerate(actual))
        for value in shown:  # a selection of the real items, in their order
            assert any(_fits(value, item) for _, item in rest), f"{where}: {value!r} is not among {actual!r}"
    else:
        assert shown == actual, f"{where}: SKILL.md shows {shown!r}, the tool answers {actual!r}"


def _fits(shown: object, actual: object) -> bool:
    try:
        _matches(shown, actual)
    except AssertionError:
        return False
    return True


def test_front_matter_and_length():
    text = SKILL.read_text(encoding="utf-8")
    assert text.startswith("---\n")
    front = yaml.safe_load(text[4:].split("\n---\n", 1)[0])
    assert front["name"] == "opdesign"
    description = front["description"]
    assert isinstance(description, str) and 100 < len(description) <= 1024
    assert "Use when" in description
    assert len(text.splitlines()) < 250


def test_skill_documents_every_error_code_and_limit():
    text = SKILL.read_text(encoding="utf-8")
    for code in ERROR_CODES:
        assert f"`{code}`" in text, code
    assert f"{MAX_TEXT_CHARS}" in text and f"{MAX_FILE_BYTES}" in text


def test_every_example_call_runs_and_matches_its_schema(tmp_path):
    """Run the round in a fresh project root holding the example SPECs and goldens, in document order."""
    shutil.copytree(EXAMPLES, tmp_path / "examples" / "specs")
    shutil.copytree(REPO / "tests" / "goldens", tmp_path / "goldens")
    examples = _examples()
    calls = [e for e in examples if e[0] == "call"]
    assert {tool for _, tool, _, _ in calls} == set(TOOLS), "every tool needs an example call"
    errors = error_schema()
    payload = None
    for i, (kind, tool, data, line) in enumerate(examples):
        assert tool in TOOLS, f"line {line}: unknown tool {tool}"
        if kind == "result":
            assert examples[i - 1][:2] == ("call", tool), f"line {line}: a result must follow a call of {tool}"
            if tool == "verify_design" and not HAVE_PYPTO:  # without the extra the real-kernel check says so
                assert payload["error"]["code"] == "extra_missing", payload
                continue
            _matches(data, payload, f"{tool}@{line}")
            continue
        schema = TOOLS[tool].input_schema()
        validator_for(schema)(schema).validate(data)
        payload, ok = call_tool(tool, data, tmp_path)
        shown = examples[i + 1] if i + 1 < len(examples) else None
        expect_error = shown is not None and shown[:2] == ("result", tool) and "error" in shown[2]
        expect_error |= tool == "verify_design" and not HAVE_PYPTO
        assert ok != expect_error, f"line {line}: {tool} answered {payload}"
        schema = TOOLS[tool].output_schema() if ok else errors
        validator_for(schema)(schema).validate(payload)
