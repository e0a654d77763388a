"""The agent's error table is generated from the error classes (issue 29: it was a second list)."""

from __future__ import annotations

from opdesign import errors
from opdesign.agent.base import ERROR_CODES, error_schema


def test_the_tool_error_table_is_the_error_classes() -> None:
    assert list(ERROR_CODES) == [error.code for error in errors.TOOL_ERRORS]
    assert all(ERROR_CODES[error.code] == error.meaning and error.meaning for error in errors.TOOL_ERRORS)
    assert len(set(ERROR_CODES)) == len(errors.TOOL_ERRORS) == 12
    assert error_schema()["$defs"]["ErrorBody"]["properties"]["code"]["enum"] == list(ERROR_CODES)
    assert errors.CallTimeoutError("x").to_json()["error"]["code"] == "timeout"
