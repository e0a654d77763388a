"""Building blocks of the agent tools: the tool record, error codes, limits, the root jail.

A tool is a name, a one-paragraph description for an agent, a pydantic input
model and a pydantic output model (both JSON Schemas are generated from them)
and a ``run(args, root)`` function that calls the same library functions as
the CLI. :mod:`opdesign.agent.tools` lists the tools and dispatches calls.

Safety: every path a tool reads or writes is given relative to a root folder
(``--root``, default the current directory) and is refused with
``path_outside_root`` when it resolves outside that root, symlinks included. Paths are resolved
on open descriptors, one component at a time (:mod:`opdesign.io.safefs`), so a path swapped for a
symlink between the check and the use cannot lead outside.
Paths in results and error messages are printed relative to the root.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from opdesign.errors import (  # noqa: F401  (re-exported for the tool modules)
    TOOL_ERRORS,
    InputError,
    InternalError,
    NotFoundError,
    OpdesignError,
    PathOutsideRootError,
    TooLargeError,
    ToolIOError,
)

#: The size limits (:mod:`opdesign.io.limits`): inline text in characters (schema ``maxLength``) and in
#: UTF-8 bytes (the validator's limit, also for DESIGN.md files), a file a tool reads (SPEC, golden), a
#: JSON request ``opdesign tool call`` reads from stdin or ``--input``.
from opdesign.io.limits import MAX_FILE_BYTES, MAX_REQUEST_BYTES, MAX_TEXT_BYTES, MAX_TEXT_CHARS  # noqa: E402, F401
from opdesign.io.safefs import Jail, Resolved

#: How deep below a folder argument symlinks are checked (artifacts sit at most at ``eval/<file>``).
LINK_CHECK_DEPTH = 2

#: Every error code a tool can return, with its meaning (stable; documented in SKILL.md): generated
#: from the error classes of :mod:`opdesign.errors`.
ERROR_CODES: dict[str, str] = {error.code: error.meaning for error in TOOL_ERRORS}


class ErrorBody(BaseModel):
    code: str = Field(description="stable machine-readable code, a key of ERROR_CODES")
    message: str = Field(description="for people: what is wrong, naming the field or path")
    details: Any = Field(None, description="structured extras (field, path, limit, known ids ...) or null")


class ErrorPayload(BaseModel):
    """What a failed call returns instead of its result: ``{"error": {code, message, details}}``."""

    model_config = ConfigDict(extra="forbid")

    error: ErrorBody


def error_schema() -> dict[str, Any]:
    """JSON Schema of a failed call's answer; ``code`` is one of :data:`ERROR_CODES`."""
    schema = ErrorPayload.model_json_schema()
    schema["$defs"]["ErrorBody"]["properties"]["code"]["enum"] = list(ERROR_CODES)
    return schema


class ToolInput(BaseModel):
    """Base of tool inputs: unknown keys are refused (``additionalProperties: false``)."""

    model_config = ConfigDict(extra="forbid")


class ToolOutput(BaseModel):
    """Base of result wrappers defined for the tools."""

    model_config = ConfigDict(extra="forbid")


@dataclass(frozen=True)
class Tool:
    """One agent tool. ``output_model`` is a callable so the library module loads only when needed."""

    name: str
    description: str
    input_model: type[ToolInput]
    output_model: Callable[[], type[BaseModel]]
    run: Callable[[Any, Root], BaseModel]

    def input_schema(self) -> dict[str, Any]:
        return _object_schema(self.input_model.model_json_schema(mode="validation"))

    def output_schema(self) -> dict[str, Any]:
        """JSON Schema of the result; a bare object schema (and a warning) when its module is missing."""
        try:
            model = self.output_model()
        except InternalError as err:
            sys.stderr.write(f"warning: tool {self.name}: output schema unavailable: {err.message}\n")
            return {"type": "object", "description": f"unavailable: {err.message}"}
        return _object_schema(model.model_json_schema(mode="serialization"))

    def definition(self) -> dict[str, Any]:
        """The MCP ``Tool`` shape: name, description, inputSchema, outputSchema."""
        return {
            "name": self.name,
            "description": self.description,
            "inputSchema": self.input_schema(),
            "outputSchema": self.output_schema(),
        }


def _object_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """A pydantic model schema with the keys agents do not need removed (``title``)."""
    schema.pop("title", None)
    schema.setdefault("properties", {})
    return schema


def require_library(module: str, *names: str) -> Any:
    """Import ``module`` and return its attribute(s) ``names``.

    Raises:
        InternalError: the module or a name is missing (a component not installed or not written yet).
    """
    import importlib

    try:
        mod = importlib.import_module(module)
        found = [getattr(mod, name) for name in names]
    except (ImportError, AttributeError) as err:
        raise InternalError(f"{module} does not provide {', '.join(names)}: {err}",
                            {"module": module, "names": list(names)}) from None
    return found[0] if len(found) == 1 else tuple(found)


class Root:
    """The folder tools may touch. Paths are resolved on open descriptors (:class:`opdesign.io.safefs.Jail`):
    the check that a path stays inside and the use of the file are the same descriptor."""

    def __init__(self, path: str | Path = ".") -> None:
        root = Path(path)
        if not root.is_dir():
            raise NotFoundError(f"tool root {str(path)!r} is not a folder", {"root": str(path)})
        self.path = root.resolve()
        self.jail = Jail(self.path)

    def contains(self, path: Path) -> bool:
        return path == self.path or self.path in path.parents

    def relative(self, path: Path) -> str:
        """``path`` relative to the root, POSIX style (``.`` for the root itself)."""
        return path.relative_to(self.path).as_posix() if self.contains(path) else str(path)

    def walk(self, value: str, field: str, **options: Any) -> Resolved:
        """:meth:`opdesign.io.safefs.Jail.walk` (the caller closes the result)."""
        return self.jail.walk(value, field, **options)

    def resolve(self, value: str, field: str) -> Path:
        """The path ``value`` names inside the root (an existing path, or an absent last component).

        Raises:
            InputError: empty or NUL-containing path.
            PathOutsideRootError: the path (after symlinks) leaves the root.
            NotFoundError: a missing parent folder or a symlink loop.
        """
        with self.jail.walk(value, field, want="out") as res:
            return self.path.joinpath(*res.names, *([res.name] if res.kind == "missing" else []))

    def read(self, value: str, field: str, limit: int = MAX_FILE_BYTES,
             start: Resolved | None = None) -> tuple[bytes, Resolved]:
        """Bytes (one bounded read) of the regular file ``value`` inside the root, and its resolution.

        Raises:
            NotFoundError, InputError (not a regular file), TooLargeError, PathOutsideRootError.
        """
        return self.jail.read(value, field, limit, start=start)

    def folder(self, value: str, field: str, must_exist: bool = True) -> Path:
        """A folder inside the root whose symlinks (to :data:`LINK_CHECK_DEPTH`) stay inside it."""
        with self.jail.walk(value, field, want="out" if not must_exist else "dir") as res:
            path = self.path.joinpath(*res.names, *([res.name] if res.kind == "missing" else []))
        if path.is_dir():
            self.check_links(path, field)
        return path

    def check_links(self, folder: Path, field: str, depth: int = LINK_CHECK_DEPTH) -> None:
        """Refuse symlinks under ``folder`` (``depth`` levels) that point outside the root."""
        try:
            entries = list(os.scandir(folder))
        except OSError as err:
            raise ToolIOError(f"{field}: cannot list {self.relative(folder)}: {err.strerror}") from None
        for entry in entries:
            path = Path(entry.path)
            if entry.is_symlink() and not self.contains(path.resolve()):
                raise PathOutsideRootError(
                    f"{field}: {self.relative(path)} is a symlink that leaves the tool root",
                    {"field": field, "path": self.relative(path)})
            if depth > 1 and entry.is_dir(follow_symlinks=False):
                self.check_links(path, field, depth - 1)

    def scrub(self, data: Any) -> Any:
        """Replace the absolute root prefix in every string of ``data`` by a relative path."""
        prefix = str(self.path) + os.sep
        if isinstance(data, str):
            if data == str(self.path):
                return "."
            return data.replace(prefix, "")
        if isinstance(data, dict):
            return {key: self.scrub(value) for key, value in data.items()}
        if isinstance(data, list):
            return [self.scrub(value) for value in data]
        return data
