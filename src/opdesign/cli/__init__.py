"""Command-line interface: :mod:`.entry` (the console script, one run wrapper), :mod:`.fast` (plain
lines without Typer), :mod:`.app` (the Typer tree), :mod:`.commands` (the command bodies both call),
:mod:`.output`, :mod:`.rank`, :mod:`.text`.
"""

from __future__ import annotations


def main() -> None:
    """Console-script entry point (``opdesign = opdesign.cli:main``): :func:`opdesign.cli.entry.main`."""
    from opdesign.cli.entry import main as run

    run()
