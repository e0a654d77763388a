"""What every CLI command shares: ``--quiet``, ``--version`` and the help metavars.

``--quiet`` (``-q``, on every command and before the command) keeps the findings, the results and
the errors and drops what only reports progress: the "wrote ..." lines, summary lines, hints and
progress messages. Commands print those through :func:`note`, so the flag is one switch here.
"""

from __future__ import annotations

_STATE = {"quiet": False}

QUIET_HELP = 'only findings, results and errors: no summary, progress or "wrote ..." lines'
#: Metavars shown by ``--help`` (Typer would print ``<str>``, ``<bool>``, ``<list[str]>``).
FLAG = ""  # a flag takes no value


def set_quiet(value: bool) -> bool:
    """Option callback of ``--quiet``: once set (before or after the command), it stays set."""
    if value:
        _STATE["quiet"] = True
    return value


def reset() -> None:
    """Back to the default (tests that run several commands in one process)."""
    _STATE["quiet"] = False


def is_quiet() -> bool:
    return _STATE["quiet"]


def quiet_option() -> bool:
    """The ``-q/--quiet`` option (a fresh OptionInfo per command)."""
    import typer  # here, not at the top: the fast path (opdesign.cli.fast) reads is_quiet without Typer

    return typer.Option(False, "--quiet", "-q", help=QUIET_HELP, callback=set_quiet, metavar=FLAG)


def note(message: str, err: bool = False) -> None:
    """Print a summary, hint or progress line unless ``--quiet`` was given."""
    if not _STATE["quiet"]:
        from opdesign.io.streams import echo

        echo(message, err=err)


#: Test hook: ``OPDESIGN_PAUSE=<point>:<fifo>`` makes a command block at :func:`pause` ``(point)`` until
#: the FIFO's writer closes it, so that a test sends a real SIGINT at a known point (never after a sleep).
PAUSE_VAR = "OPDESIGN_PAUSE"


def pause(point: str) -> None:
    """Block reading the FIFO named by ``$OPDESIGN_PAUSE`` when it names this point (``new``, ``validate``,
    ``rank``, ``verify``); a no-op otherwise."""
    import os

    want, _, fifo = os.environ.get(PAUSE_VAR, "").partition(":")
    if want == point and fifo:
        with open(fifo, "rb") as pipe:
            pipe.read()


def package_version() -> str:
    """The installed distribution's version (package metadata), else the source tree's ``__version__``."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("opdesign")
    except PackageNotFoundError:
        from opdesign import __version__

        return __version__


def print_version(value: bool) -> None:
    """Eager callback of ``--version``: ``opdesign X.Y.Z`` on stdout, exit 0."""
    if value:
        import typer

        typer.echo(f"opdesign {package_version()}")
        raise typer.Exit(0)


def _no_type_label(ctx: object = None) -> None:
    return None


def tidy_help(command):  # noqa: ANN001, ANN201 - a click command tree, returned as given
    """Arguments show their metavar (``PATH...``, ``FILE``) without Typer's ``<list[str]>`` / ``<path>``
    label (Typer >= 0.16 prints one next to every argument); options set their metavar in the CLI."""
    stack = [command]
    while stack:
        cmd = stack.pop()
        for param in cmd.params:
            if param.param_type_name == "argument" and param.metavar:
                param.display_type_rich = _no_type_label  # read by Typer's help record; absent in older Typer
                # the usage line in click's own notation (PATH... required, [ID] optional), not Typer's {PATH}...
                usage = ((param.metavar if param.required else f"[{param.metavar}]")
                         + ("..." if param.nargs != 1 else ""))
                param._usage_display_name = lambda usage=usage: usage
        if hasattr(cmd, "commands"):
            cmd.format_commands = _full_sentences(cmd)
        stack.extend(getattr(cmd, "commands", {}).values())
    return command


def _full_sentences(group):  # noqa: ANN001, ANN202 - a click group
    """``format_commands`` of ``group`` with each command's first sentence whole (click cuts it at about
    45 characters with ``...``); the help formatter wraps it."""

    def format_commands(ctx, formatter) -> None:  # noqa: ANN001
        rows = []
        for name in group.list_commands(ctx):
            cmd = group.get_command(ctx, name)
            if cmd is not None and not cmd.hidden:
                rows.append((name, cmd.get_short_help_str(limit=10_000)))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)

    return format_commands
