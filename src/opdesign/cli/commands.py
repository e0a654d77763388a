"""``opdesign new`` without Typer: a plain ``new --spec FILE [--out DIR] [--lang L] [--force]`` line.

Importing Typer costs more CPU than planning and rendering a design, so :func:`fast_new` reads a
plain ``new`` command line itself (:func:`opdesign.cli.fast.parse_plain`): global ``-q`` / ``--quiet``
flags, the word ``new``, then ``--spec``, ``--out`` and ``--lang`` each given once as ``--name VALUE``
(a value that is not empty and does not start with ``-``), the flags ``--force``, ``--uncalibrated``
and ``-q`` / ``--quiet``.
Anything else (``--help``, ``--name=VALUE``, ``--candidate``, ``--tiles``, a repeated or unknown
option, a missing value, a positional argument, a shell-completion request) returns None and the
Typer tree (:mod:`opdesign.cli.app`) parses the line, so help, usage errors and their exit codes
stay Typer's. Both paths run :func:`new_command`.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from opdesign.cli.fast import parse_plain
from opdesign.cli.output import is_quiet, note, reset, set_quiet
from opdesign.io.streams import StreamError, echo, say

_FLAGS = ("--force", "--uncalibrated")
_VALUED = ("--spec", "--out", "--lang")
#: click's shell-completion switch for the ``opdesign`` program (``_OPDESIGN_COMPLETE=bash_source``)
_COMPLETE_VAR = "_OPDESIGN_COMPLETE"


def new_command(spec: Path, out: str | None, lang: str, force: bool, candidate: int | None, tiles: str | None,
                uncalibrated: bool, within_form: bool = False) -> None:
    """``opdesign new``: write the design, print ``wrote PATH`` per file and the plan's summary line."""
    from opdesign.errors import InputError, ToolIOError
    from opdesign._startup.npthreads import import_numpy

    import_numpy()
    from opdesign.workflows.new import new_design

    if lang not in ("en", "zh"):
        raise InputError(f"--lang: expected 'en' or 'zh', got {lang!r}")
    if out is not None and not out.strip():
        raise InputError("--out: empty folder name (omit --out for ./<op_name>)")

    def announce(paths: list[Path]) -> None:  # printed (and flushed) before publishing: a broken stdout writes nothing
        if is_quiet():
            return
        try:
            echo("".join(f"wrote {path}\n" for path in paths), nl=False)
        except StreamError as err:
            raise ToolIOError(f"stdout: {err} (nothing written)") from None

    from opdesign.tuning.model.calibration import load_params

    if within_form and candidate is None:
        raise InputError("--within-form: it sets how --candidate N counts (give --candidate N)")
    params, pinned = load_params(not uncalibrated), None
    if candidate is not None or tiles is not None:
        from opdesign.workflows.pin import pinned_plan
        from opdesign.spec import load_spec

        if candidate is not None and tiles is not None:
            raise InputError("--candidate and --tiles are mutually exclusive (give one)")
        pinned = pinned_plan(load_spec(spec), spec, candidate=candidate, tiles=tiles, params=params,
                             within_form=within_form)
    result = new_design(spec, out, lang=lang, force=force, before_publish=announce, plan=pinned, params=params)
    p = result.plan
    form = f"{p.form} form" if p.form_checks else p.variant  # a skeleton with a form choice shows it
    note(f"{p.skeleton.id} {form}: q_tile={p.q_tile} kv_tile={p.kv_tile} root_count={p.root_count} "
         f"ub={p.ub_budget.total_bytes}/{p.ub_budget.capacity_bytes} B")


def fast_new(argv: list[str]) -> Callable[[], int] | None:
    """The run of a plain ``new`` command line (its exit code), or None for the Typer tree."""
    if os.environ.get(_COMPLETE_VAR):
        return None
    parsed = parse_plain(argv, {"new": (_FLAGS, dict.fromkeys(_VALUED, False), 0)})
    if parsed is None or "--spec" not in parsed[1]:
        return None
    _, options, flags, _, quiet = parsed

    def run() -> int:
        from opdesign.catalog.headings import DEFAULT_LANG

        reset()  # --quiet is per run, as with the Typer tree
        set_quiet(quiet)
        try:
            new_command(Path(options["--spec"]), options.get("--out"), options.get("--lang", DEFAULT_LANG),
                        "--force" in flags, None, None, "--uncalibrated" in flags)
            return 0
        except (EOFError, KeyboardInterrupt):  # as click: a new line, then "aborted"
            say("")
            say("error: aborted")
            return 1

    return run
