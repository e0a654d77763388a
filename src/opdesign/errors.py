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

    def __init__(self, message: str, details: Any = None) -> None:
        super().__init__(message)
        self.message = message
        self.details = details

    def to_json(self) -> dict[str, Any]:
        return {"error": {"code": self.code, "message": self.message, "details": self.details}}


class SpecError(OpdesignError):
    """The SPEC is missing, unreadable or breaks the SPEC schema (field path in the message)."""

    code = "spec_invalid"


class CatalogError(OpdesignError):
    """A card, constraint table or device profile shipped with opdesign is malformed."""

    code = "catalog_invalid"


class NotFoundError(OpdesignError):
    """A named card, rule, device, tool or file does not exist."""

    code = "not_found"


class OutputExistsError(OpdesignError):
    """An output file exists and ``--force`` was not given."""

    code = "output_exists"


class BusyError(OpdesignError):
    """Another opdesign run is writing the same output folder and kept its lock too long."""

    code = "busy"


class InputError(OpdesignError):
    """Any other unusable input (unreadable file, not UTF-8, too large, bad argument)."""

    code = "invalid_input"


class ConfigError(OpdesignError):
    """The ``opdesign validate`` configuration (``[tool.opdesign]`` in pyproject.toml, or opdesign.toml)
    has an unknown key, a value of the wrong type, an unknown rule id or an unknown target; the message
    names the file and the key."""

    code = "config_invalid"


class PathOutsideRootError(OpdesignError):
    """A path given to an agent tool resolves outside the allowed root."""

    code = "path_outside_root"


class ToolIOError(OpdesignError):
    """A file, folder or standard stream could not be read or written."""

    code = "io_error"


class TooLargeError(OpdesignError):
    """An inline text, a file or a request is over its documented size limit."""

    code = "too_large"


class ExtraMissingError(OpdesignError):
    """An optional extra (e.g. ``opdesign[pypto]``: pypto, torch) is not installed; the message says how."""

    code = "extra_missing"


class InternalError(OpdesignError):
    """A bug, or an opdesign module a tool needs is missing."""

    code = "internal_error"
    exit_code = EXIT_INTERNAL
