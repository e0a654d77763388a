"""Command-line interface: the entry point over the Typer command tree (:mod:`opdesign.cli.app`).

Plain ``golden``, ``validate`` and ``new`` lines take :mod:`opdesign.cli.fast`, which skips Typer.
Any other command line (help, a usage error, other commands) goes through the Typer tree.

Exit codes (stable, see ``opdesign.errors``): 0 success; 1 error-level
findings or a failed check; 2 unusable input (bad SPEC, missing file, refused
overwrite, bad arguments). Human output goes to stdout, diagnostics to stderr.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

from opdesign.errors import EXIT_INTERNAL, EXIT_INTERRUPTED, OpdesignError
from opdesign.io import streams

#: Names of the Typer command tree, kept importable from here (``from opdesign.cli.entry import app``).
_TREE = ("app", "cards_app", "schema_app", "tool_app", "click_app", "run_typer")


def __getattr__(name: str) -> Any:
    """The Typer tree (:mod:`opdesign.cli.app`) loads on first use, so a fast-path run never imports Typer."""
    if name in _TREE:
        from opdesign.cli import app as cliapp

        return getattr(cliapp, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def main() -> None:
    """Console-script entry point.

    ``OpdesignError`` -> ``error: <code>: <message>`` on stderr and its exit code
    (2 for bad input); any other exception is a bug: ``error: internal_error: ...``
    and exit 3 (set ``OPDESIGN_DEBUG=1`` for the traceback). A closed, full or broken
    stdout / stderr is ``io_error``, exit 2 (:mod:`opdesign.io.streams`); text the terminal's
    encoding cannot show is escaped (``\\u4f2a``), JSON is ASCII.
    """
    gone = streams.closed()
    if gone:
        sys.exit(_closed(gone))
    streams.guard()
    try:
        code = _main()
    except KeyboardInterrupt:  # Ctrl-C while the command tree loads (Typer's own commands exit 130 too)
        code = EXIT_INTERRUPTED
    sys.exit(streams.finish(code))


def _closed(gone: list[str]) -> int:
    """Refuse to run without stdout or stderr; say so on the other stream (a tool call answers in JSON)."""
    from opdesign.errors import ToolIOError

    error = ToolIOError(f"{' and '.join(gone)} closed: opdesign writes results to stdout and diagnostics to "
                        "stderr", {"streams": gone})
    tool = sys.argv[1:3] == ["tool", "call"]
    said = json.dumps(error.to_json()) if tool else f"error: {error.code}: {error.message}"
    if gone == ["stderr"]:
        streams.say(said, err=False)
    elif gone == ["stdout"]:
        streams.say(said)
    return error.exit_code


def _main() -> int:
    from opdesign.cli.fast import fast_command

    run = fast_command(sys.argv[1:])  # None: anything but a plain `golden` / `validate` / `new` line
    if run is None:
        from opdesign.cli.app import run_typer

        run = run_typer
    try:
        return run()
    except KeyboardInterrupt:  # Ctrl-C in any command, fast path or Typer tree: 130, never 1 (findings)
        return EXIT_INTERRUPTED
    except streams.StreamError as err:  # stdout or stderr failed: streams.finish says it
        return err.exit_code
    except OpdesignError as err:
        streams.say(f"error: {err.code}: {err.message}")
        return err.exit_code
    except OSError as err:  # the file system refused a path we were given (too long, permissions, ...)
        streams.say(f"error: io_error: {err.filename or ''}: {err.strerror or err}")
        return 2
    except Exception as err:  # noqa: BLE001 - last line of defence: no traceback for users
        if os.environ.get("OPDESIGN_DEBUG"):
            raise
        streams.say(f"error: internal_error: {type(err).__name__}: {err} (a bug in opdesign; "
                    "rerun with OPDESIGN_DEBUG=1 for the traceback)")
        return EXIT_INTERNAL
