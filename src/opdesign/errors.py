"""Error types shared by the CLI and the agent tools.

Every error opdesign raises on purpose is an :class:`OpdesignError` with a
stable ``code`` (used in JSON tool errors) and an ``exit_code`` (used by the
CLI). Exit codes: 0 success, 1 findings at error level / failed self-check,
2 unusable input (bad SPEC, missing file, refused overwrite, bad arguments, a bad configuration
file: ``config_invalid``, a closed,
full or broken stdout / stderr: ``io_error``),
3 internal error (a bug; the message says so).
"""

from __future__ import annotations

from typing import Any

EXIT_OK = 0
EXIT_FINDINGS = 1
EXIT_INPUT = 2
EXIT_INTERNAL = 3  # a bug in opdesign, never a user mistake
EXIT_INTERRUPTED = 130  # Ctrl-C (SIGINT): 128 + 2, as shells report it; nothing is published


class OpdesignError(Exception):
    """Base error: ``code`` is stable and machine-readable, ``message`` is for people."""

    code = "error"
    exit_code = EXIT_INPUT
    #: what the code means, for the agent tools' error table (``generated``)
    meaning = ""

    def __init__(self, message: str, details: Any = None) -> None:
        super().__init__(message)
        self.message = message
        self.details = details

    def to_json(self) -> dict[str, Any]:
        return {"error": {"code": self.code, "message": self.message, "details": self.details}}


class SpecError(OpdesignError):
    """The SPEC is missing, unreadable or breaks the SPEC schema (field path in the message)."""

    code = "spec_invalid"
    meaning = "the SPEC is missing, unreadable or breaks the SPEC schema (the message names the field path)"


class CatalogError(OpdesignError):
    """A card, constraint table or device profile shipped with opdesign is malformed."""

    code = "catalog_invalid"
    meaning = "a card or constraint table shipped with opdesign is malformed"


class NotFoundError(OpdesignError):
    """A named card, rule, device, tool or file does not exist."""

    code = "not_found"
    meaning = "an unknown tool, card, rule, file or function"


class OutputExistsError(OpdesignError):
    """An output file exists and ``--force`` was not given."""

    code = "output_exists"
    meaning = "new_design would overwrite a file and force is not true"


class BusyError(OpdesignError):
    """Another opdesign run is writing the same output folder and kept its lock too long."""

    code = "busy"
    meaning = ("another opdesign run kept the output folder locked, or the MCP server runs its maximum of calls; "
               "try again")


class InputError(OpdesignError):
    """Any other unusable input (unreadable file, not UTF-8, too large, bad argument)."""

    code = "invalid_input"
    meaning = "the request is not a JSON object, breaks the tool's input schema, or an argument is unusable"


class ConfigError(OpdesignError):
    """The ``opdesign validate`` configuration (``[tool.opdesign]`` in pyproject.toml, or opdesign.toml)
    has an unknown key, a value of the wrong type, an unknown rule id or an unknown target; the message
    names the file and the key."""

    code = "config_invalid"


class PathOutsideRootError(OpdesignError):
    """A path given to an agent tool resolves outside the allowed root."""

    code = "path_outside_root"
    meaning = "a path resolves outside the tool root (symlinks are followed before the check)"


class ToolIOError(OpdesignError):
    """A file, folder or standard stream could not be read or written."""

    code = "io_error"
    meaning = "a file, folder or standard stream (closed, full, broken pipe) could not be read or written"


class TooLargeError(OpdesignError):
    """An inline text, a file or a request is over its documented size limit."""

    code = "too_large"
    meaning = "an inline text, file or request is over its size limit"


class ExtraMissingError(OpdesignError):
    """An optional extra (e.g. ``opdesign[pypto]``: pypto, torch) is not installed; the message says how."""

    code = "extra_missing"
    meaning = "the tool needs an optional extra that is not installed (the message gives the pip command)"


class InternalError(OpdesignError):
    """A bug, or an opdesign module a tool needs is missing."""

    code = "internal_error"
    meaning = "a bug or a missing opdesign component; the message says which"
    exit_code = EXIT_INTERNAL


class CallTimeoutError(OpdesignError):
    """A tool call ran longer than the MCP server's per-call time limit."""

    code = "timeout"
    meaning = "the MCP server's per-call time limit passed before the tool answered"


#: Every error a tool can return, in the order of the agent's error table (its codes are stable;
#: documented in SKILL.md).
TOOL_ERRORS: tuple[type[OpdesignError], ...] = (
    InputError, TooLargeError, SpecError, NotFoundError, PathOutsideRootError, ToolIOError, OutputExistsError,
    BusyError, CallTimeoutError, CatalogError, ExtraMissingError, InternalError,
)
