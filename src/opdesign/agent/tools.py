"""The agent tool surface in one place: the tool list, JSON Schemas, dispatch, JSON errors.

The same tools serve ``opdesign tool list``, ``opdesign tool call NAME`` and the
MCP server (:mod:`opdesign.agent.mcp_server`). A call is one JSON object in and one
JSON object out:

* result: the tool's output model serialised with ``model_dump(mode="json")``;
* error: ``{"error": {"code", "message", "details"}}`` with a code from
  :data:`~generated` (``tool call`` exits 2).

Inputs are checked against the tool's input JSON Schema (jsonschema) before the
tool runs. Paths are relative to the tool root (:class:`~opdesign.agent.base.Root`);
paths in results and messages are relative to it as well. Size limits:
:data:`~opdesign.agent.base.MAX_TEXT_CHARS` for inline texts,
:data:`~opdesign.agent.base.MAX_FILE_BYTES` for files a tool reads,
:data:`~opdesign.agent.base.MAX_REQUEST_BYTES` for a ``tool call`` request.
Anything a library prints while a tool runs goes to stderr, never stdout.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import threading
import traceback
from functools import cache
from pathlib import Path
from typing import Any, BinaryIO

from opdesign.agent.base import (
    ERROR_CODES,
    MAX_REQUEST_BYTES,
    InternalError,
    Root,
    Tool,
    TooLargeError,
    ToolIOError,
)
from opdesign.agent.catalog import CATALOG_TOOLS
from opdesign.agent.design import DESIGN_TOOLS
from opdesign.agent.verify import VERIFY_TOOLS
from opdesign.errors import InputError, NotFoundError, OpdesignError
from opdesign.io.streams import echo
from opdesign.render.phrases import SAY

__all__ = ["ERROR_CODES", "TOOLS", "Root", "call_tool", "get_tool", "main_call", "tool_definitions"]

#: The tools that rank (numpy and the cost model): a one-shot ``tool call`` of one loads numpy with one
#: OpenBLAS thread (:mod:`opdesign._startup.npthreads`); ``estimate_design`` plans without numpy.
RANKING_TOOLS = frozenset({"new_design", "rank_candidates"})
#: Every tool, in the order of the design workflow.
TOOLS: dict[str, Tool] = {tool.name: tool for tool in DESIGN_TOOLS + VERIFY_TOOLS + CATALOG_TOOLS}


def get_tool(name: str) -> Tool:
    """Return tool ``name``; NotFoundError lists the known names."""
    if name not in TOOLS:
        raise NotFoundError(f"unknown tool {name!r}; known: {', '.join(TOOLS)}", {"known": list(TOOLS)})
    return TOOLS[name]


def tool_definitions() -> list[dict[str, Any]]:
    """Name, description, inputSchema and outputSchema of every tool (the MCP ``Tool`` shape)."""
    return [tool.definition() for tool in TOOLS.values()]


@cache
def _input_validator(name: str) -> Any:
    from jsonschema.validators import validator_for

    schema = get_tool(name).input_schema()
    return validator_for(schema)(schema)


def _check_input(name: str, args: Any) -> None:
    """Validate ``args`` against the input schema; raise InputError / TooLargeError naming the field."""
    if not isinstance(args, dict):
        raise InputError(f"{name}: the arguments must be a JSON object, got {type(args).__name__}")
    from jsonschema.exceptions import best_match

    error = best_match(_input_validator(name).iter_errors(args))
    if error is None:
        return
    where = "/".join(str(p) for p in error.absolute_path) or "(arguments)"
    details = {"field": where, "schema_rule": error.validator}
    if error.validator == "maxLength":
        limit = error.validator_value
        raise TooLargeError(f"{name}: {where}: longer than {limit} characters", {**details, "limit": limit})
    message = error.message if len(error.message) < 300 else error.message[:300] + "..."
    raise InputError(f"{name}: {where}: {message}", details)


_redirect_lock = threading.Lock()
_redirect_depth = 0
_saved_stdout: Any = None


@contextlib.contextmanager
def _stdout_to_stderr() -> Any:
    """``sys.stdout`` points at stderr while any tool runs (threads included: the first in swaps, the last
    out restores)."""
    global _redirect_depth, _saved_stdout
    with _redirect_lock:
        if _redirect_depth == 0:
            _saved_stdout, sys.stdout = sys.stdout, sys.stderr
        _redirect_depth += 1
    try:
        yield
    finally:
        with _redirect_lock:
            _redirect_depth -= 1
            if _redirect_depth == 0:
                sys.stdout, _saved_stdout = _saved_stdout, None


def _run(name: str, args: Any, root: Root) -> dict[str, Any]:
    from pydantic import ValidationError

    tool = get_tool(name)
    _check_input(name, args)
    try:
        parsed = tool.input_model.model_validate(args)
    except ValidationError as err:  # cross-field rules the schema cannot express
        problems = [{"field": ".".join(map(str, e["loc"])) or "(arguments)",
                     "msg": e["msg"].removeprefix("Value error, ")} for e in err.errors()]
        raise InputError(f"{name}: " + "; ".join(p["msg"] for p in problems), {"errors": problems}) from None
    with _stdout_to_stderr():
        result = tool.run(parsed, root)
    return root.scrub(result.model_dump(mode="json", context=SAY))


def call_tool(name: str, args: Any, root: Root | str | Path = ".") -> tuple[dict[str, Any], bool]:
    """Run tool ``name`` on ``args`` (parsed JSON) inside ``root``.

    Returns:
        ``(payload, ok)``: the result object and True, or an ``{"error": ...}`` object and False.
        Never raises for bad input, a failing library call or a bug.
    """
    jail = None
    try:
        jail = root if isinstance(root, Root) else Root(root)
        return _run(name, args, jail), True
    except OpdesignError as err:
        error = err
    except OSError as err:
        error = ToolIOError(f"{name}: {err.strerror or err}" + (f" ({err.filename})" if err.filename else ""))
    except Exception as err:  # noqa: BLE001 - a tool must answer with JSON, never a traceback
        if os.environ.get("OPDESIGN_DEBUG"):
            traceback.print_exc(file=sys.stderr)
        error = InternalError(f"{name}: {type(err).__name__}: {err}")
    payload = error.to_json()
    return (jail.scrub(payload) if jail is not None else payload), False


def read_request(stream: BinaryIO) -> Any:
    """Parse one JSON request (at most MAX_REQUEST_BYTES; empty input means ``{}``)."""
    return parse_request(stream.read(MAX_REQUEST_BYTES + 1))


def parse_request(raw: bytes) -> Any:
    """Parse the bytes of one JSON request (see :func:`read_request`)."""
    if len(raw) > MAX_REQUEST_BYTES:
        raise TooLargeError(f"the request is larger than {MAX_REQUEST_BYTES} bytes", {"limit": MAX_REQUEST_BYTES})
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as err:
        raise InputError(f"the request is not UTF-8 (byte {err.start})") from None
    if not text.strip():
        return {}
    try:
        data = json.loads(text, object_pairs_hook=_strict_object, parse_constant=_NonFinite,
                          parse_float=_finite_float)
    except RecursionError:
        raise InputError("malformed JSON: nested too deeply") from None
    except json.JSONDecodeError as err:
        raise InputError(f"malformed JSON: {err.msg} (line {err.lineno}, column {err.colno})",
                         {"line": err.lineno, "column": err.colno}) from None
    bad = _non_finite(data)
    if bad is not None:
        raise InputError(f"malformed JSON: {_NOT_FINITE.format(bad)}")
    return data


_NOT_FINITE = "{} is not a finite JSON number (NaN, Infinity and numbers beyond the float range are refused)"


class _NonFinite(str):
    """``NaN``, ``Infinity``, ``-Infinity`` or a number too large for a float (``1e999``): not JSON."""


def _finite_float(text: str) -> float | _NonFinite:
    value = float(text)
    return value if value - value == 0 else _NonFinite(text)


def _non_finite(value: Any) -> _NonFinite | None:
    """The first non-finite number here or in the lists nested in it (objects check their own values)."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, _NonFinite):
            return item
        if isinstance(item, list):
            stack += reversed(item)
    return None


def _strict_object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object whose keys are unique and whose values are finite numbers (``json`` accepts both)."""
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise InputError(f"malformed JSON: the key {key!r} is given twice", {"field": key})
        bad = _non_finite(value)
        if bad is not None:
            raise InputError(f"malformed JSON: {key!r}: {_NOT_FINITE.format(bad)}", {"field": key})
        out[key] = value
    return out


def main_call(name: str, input_file: Path | None, root: str | Path) -> int:
    """``opdesign tool call``: read the request, run the tool, print one JSON object; return the exit code."""
    try:
        if input_file is None:
            if sys.stdin is None:
                raise ToolIOError("stdin is closed: give the JSON request on stdin or with --input")
            args = read_request(sys.stdin.buffer)
        else:  # one bounded read of a regular file: a FIFO or /dev/zero is refused, never waited on
            from opdesign.io.safefs import read_regular

            try:
                raw = read_regular(input_file, MAX_REQUEST_BYTES, "--input")
            except NotFoundError as err:  # documented as io_error: the --input file cannot be read
                raise ToolIOError(f"--input: {err.message}") from None
            args = parse_request(raw)
    except OpdesignError as err:
        payload, ok = err.to_json(), False
    except OSError as err:
        payload, ok = ToolIOError(f"--input: {err.strerror or err}").to_json(), False
    else:
        if name in RANKING_TOOLS:
            from opdesign._startup.npthreads import import_numpy

            import_numpy()
        payload, ok = call_tool(name, args, root)
    echo(json.dumps(payload))  # ASCII JSON: the same answer on any terminal; a failed write is io_error
    return 0 if ok else 2
