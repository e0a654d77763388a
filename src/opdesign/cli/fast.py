"""The one fast path: plain ``golden``, ``validate`` and ``new`` lines run straight from ``sys.argv``.

Importing Typer (and through it click) costs CPU that these commands' own work does not need, so
:func:`fast_command` reads their command line itself, but only when it is plain (:func:`parse_plain`).
Measured for issue 29, fast path against the Typer tree: ``opdesign new --spec causal_gqa_tail.yaml``
1936 M against 2086 M instructions (callgrind; 7.2 % saved), 290 ms against 319 ms of CPU time (median of
10 runs); ``opdesign validate DIR`` 1720 M against 1879 M instructions (8.4 %), 215 ms against 244 ms.
Kept: over the 5 % bar.

Anything else (``--help``, ``--name=VALUE``, ``--``, ``--candidate`` / ``--tiles``, an unknown or
repeated option, a missing value or argument, an empty or unreadable path, a shell-completion request)
returns None and the Typer tree (:mod:`opdesign.cli.app`) parses the line, so help, usage errors and
their exit codes are Typer's own. Both paths run the same command bodies (:func:`golden_command`,
:func:`validate_command`, :func:`opdesign.cli.commands.new_command`), and both leave Ctrl-C to the one
run wrapper, :func:`opdesign.cli.entry.main` (exit 130).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from pathlib import Path

from opdesign.cli.output import is_quiet, pause, reset, set_quiet
from opdesign.io.streams import ascii_json, echo, say

_QUIET = ("-q", "--quiet")
_COUNT = re.compile(r"(0|[1-9][0-9]{0,8})")
#: Per command: its flags, its options that take a value (and whether the value is a count), and
#: how many positional arguments it takes (None: one or more).
_COMMANDS: dict[str, tuple[tuple[str, ...], dict[str, bool], int | None]] = {
    "golden": (("--json",), {"--function": False, "--state-groups": True, "--cross-tile-reduce": True}, 1),
    "validate": (("--exit-zero", "--statistics", "--show-settings", "--no-cache"),
                 {"--format": False, "--target-pypto": False, "-j": True, "--jobs": True}, None),
    "new": (("--force", "--uncalibrated"), {"--spec": False, "--out": False, "--lang": False}, 0),
}
#: click's shell-completion switch for the ``opdesign`` program (``_OPDESIGN_COMPLETE=bash_source``)
_COMPLETE_VAR = "_OPDESIGN_COMPLETE"


def golden_command(golden: Path, function: str | None, state_groups: int | None, cross_tile_reduce: int | None,
                   as_json: bool) -> None:
    """``opdesign golden``: the estimate as text, or as the JSON of :class:`~opdesign.golden.GoldenReport`."""
    from opdesign.golden.estimate import analyse_golden, facts_json
    from opdesign.render.golden import render_golden_text

    facts = analyse_golden(golden, function, state_groups, cross_tile_reduce)
    echo(ascii_json(facts_json(facts)) if as_json else render_golden_text(facts))


def validate_command(paths: list[str], fmt: str, *, target_pypto: str | None = None, jobs: int | None = None,
                     no_cache: bool = False, exit_zero: bool = False, statistics: bool = False,
                     show_settings: bool = False) -> int:
    """``opdesign validate``: print the report in ``fmt``; the report's exit code.

    ``--show-settings``: print the settings resolved for the first path (and the file they came from)
    and check nothing; ``--statistics``: one line per rule with its count instead of the findings (text);
    ``--exit-zero``: exit 0 even with error-level findings (unusable input still exits 2, as ruff's
    errors of its own do); ``-j N`` worker processes (default: every core); ``--no-cache``: neither
    read nor write ``.opdesign_cache/``.
    """
    from opdesign.errors import InputError
    from opdesign.validate.output import FORMATTERS

    if fmt not in FORMATTERS:
        raise InputError(f"--format: expected one of {', '.join(FORMATTERS)}, got {fmt!r}")
    if jobs is not None and jobs < 1:
        raise InputError(f"-j/--jobs: expected a count of 1 or more, got {jobs}")
    from opdesign.validate.engine.bulk import default_cache, default_jobs
    from opdesign.validate.engine.settings import discover

    if show_settings:
        echo(discover(paths[0]).with_target(target_pypto).describe(), nl=False)
        return 0
    from opdesign.validate.output import format_statistics, format_text
    from opdesign.workflows.validate import validate_paths

    pause("validate")  # a test hook (OPDESIGN_PAUSE)
    report = validate_paths(paths, target_pypto=target_pypto, jobs=default_jobs() if jobs is None else jobs,
                            use_cache=default_cache() and not no_cache)
    quiet_text = fmt == "text" and is_quiet()  # the findings without the "checked N files" line
    if statistics and fmt == "text":
        echo(format_statistics(report), nl=False)
    else:
        echo(format_text(report, summary=False) if quiet_text else FORMATTERS[fmt](report), nl=False)
    code = report.exit_code
    return 0 if exit_zero and code == 1 else code


def _plain_path(arg: str) -> bool:
    """An argument Typer would pass on unchanged: not empty, not an option, readable when it exists."""
    return bool(arg) and not arg.startswith("-") and (not os.path.exists(arg) or os.access(arg, os.R_OK))


def parse_plain(argv: list[str], commands: dict[str, tuple[tuple[str, ...], dict[str, bool], int | None]]
                ) -> tuple[str, dict[str, str], set[str], list[str], bool] | None:
    """``(command, options, flags, positionals, quiet)`` of a plain command line, else None.

    ``commands`` maps a command word to its flags, its options that take a value (True: the value is
    a count) and how many positional arguments it takes (None: one or more). Plain means: global
    ``-q`` / ``--quiet`` flags, the command word, then each flag and option at most once, every
    option as ``--name VALUE`` with a value that is not empty and does not start with ``-``, counts
    in canonical decimal, and readable positional paths (:func:`_plain_path`).
    """
    i, quiet = 0, False
    while i < len(argv) and argv[i] in _QUIET:
        i, quiet = i + 1, True
    if i >= len(argv) or argv[i] not in commands:
        return None
    command = argv[i]
    flags_known, valued, count = commands[command]
    options: dict[str, str] = {}
    flags: set[str] = set()
    positionals: list[str] = []
    rest = argv[i + 1:]
    j = 0
    while j < len(rest):
        arg = rest[j]
        if arg in _QUIET:
            quiet = True
        elif arg in flags_known and arg not in flags:
            flags.add(arg)
        elif arg in valued:
            if arg in options or j + 1 >= len(rest) or not rest[j + 1] or rest[j + 1].startswith("-"):
                return None
            value = rest[j + 1]
            if valued[arg] and not _COUNT.fullmatch(value):
                return None
            options[arg] = value
            j += 1
        elif count != 0 and _plain_path(arg):
            positionals.append(arg)
        else:
            return None
        j += 1
    if (count is None and not positionals) or (count is not None and len(positionals) != count):
        return None
    return command, options, flags, positionals, quiet


def fast_command(argv: list[str]) -> Callable[[], int] | None:
    """The run of a plain ``golden`` / ``validate`` / ``new`` command line (its exit code), or None for Typer."""
    if os.environ.get(_COMPLETE_VAR):
        return None
    parsed = parse_plain(argv, _COMMANDS)
    if parsed is None or (parsed[0] == "new" and "--spec" not in parsed[1]):
        return None
    command, options, flags, positionals, quiet = parsed

    def run() -> int:
        reset()  # --quiet is per run, as with the Typer tree
        set_quiet(quiet)
        try:
            if command == "golden":
                counts = {name: None if name not in options else int(options[name])
                          for name in ("--state-groups", "--cross-tile-reduce")}
                golden_command(Path(positionals[0]), options.get("--function"), counts["--state-groups"],
                               counts["--cross-tile-reduce"], "--json" in flags)
                return 0
            if command == "new":
                from opdesign.catalog.headings import DEFAULT_LANG
                from opdesign.cli.commands import new_command

                new_command(Path(options["--spec"]), options.get("--out"), options.get("--lang", DEFAULT_LANG),
                            "--force" in flags, None, None, "--uncalibrated" in flags)
                return 0
            jobs = options.get("--jobs", options.get("-j"))
            return validate_command(positionals, options.get("--format", "text"),
                                    target_pypto=options.get("--target-pypto"),
                                    jobs=None if jobs is None else int(jobs), no_cache="--no-cache" in flags,
                                    exit_zero="--exit-zero" in flags, statistics="--statistics" in flags,
                                    show_settings="--show-settings" in flags)
        except EOFError:  # as click: a new line, then "aborted"
            say("")
            say("error: aborted")
            return 1

    return run
