"""Pydantic's plugin discovery, answered without ``importlib.metadata`` when no plugin is installed.

The first time pydantic builds a validator it imports ``pydantic.plugin._loader``, which imports
``importlib.metadata`` (and with it the ``email`` package) and scans every installed distribution for
entry points of the group ``pydantic``. In a bare interpreter that import and scan cost 130 million
instructions, 0.7 times a ``python -c "import ast, json, yaml"``; in ``opdesign new`` and ``validate``,
which load part of the same standard library anyway, skipping them saves about 60 million, 4-5 % of the
run (callgrind, ``benchmarks/bench_startup.py`` for CPU time). opdesign uses no pydantic plugin.

:func:`install` puts a finder first on ``sys.meta_path`` that waits for that one import. It then reads
the same metadata directly: the ``entry_points.txt`` of each ``*.dist-info`` / ``*.egg-info`` folder in
the folders of ``sys.path``, which is where ``importlib.metadata`` finds them, read the way it reads
them (a ``[...]`` header, then entries). When none declares an entry of the group ``pydantic``,
pydantic's own ``get_plugins()`` could only return no plugin, and the finder loads a stand-in module
that says exactly that. Whenever the answer is not that plain (a zip or an ``.egg`` on the path, a
finder of distributions other than the standard one, a declared plugin, a folder or file that cannot
be read), the finder steps aside and pydantic discovers as usual, ``PYDANTIC_DISABLE_PLUGINS``
included: pydantic reads that variable on every call, and Typer sets it for a moment while it builds
its own validators, so the finder never decides by it. The finder leaves ``sys.meta_path`` after that first import, and a
command that builds no validator (``--help``, ``golden``) never pays for the scan.

Installed by the command entry points (the CLI, the MCP server and its workers), never on import of a
library module.
"""

from __future__ import annotations

import os
import sys

LOADER = "pydantic.plugin._loader"
GROUP = "pydantic"


def declares_plugins(paths: list[str] | None = None) -> bool | None:
    """True when an installed distribution declares a ``pydantic`` entry point, False when none does,
    None when the metadata on ``paths`` (default ``sys.path``) cannot be read this simply."""
    from importlib.machinery import PathFinder

    if any(hasattr(finder, "find_distributions") and finder is not PathFinder for finder in sys.meta_path):
        return None
    for entry in sys.path if paths is None else paths:
        folder = entry or "."
        if folder.lower().rstrip("/\\").endswith(".egg"):  # an egg on the path: its EGG-INFO is read too
            return None
        if not os.path.isdir(folder):
            if os.path.exists(folder):  # a zip on the path: its metadata is read through zipfile
                return None
            continue
        try:
            names = os.listdir(folder)
        except OSError:
            return None
        for name in names:
            lower = name.lower()
            if lower.endswith(".egg"):
                return None
            if not lower.endswith((".dist-info", ".egg-info")):
                continue
            found = _group_in(os.path.join(folder, name, "entry_points.txt"))
            if found is not False:
                return found
    return False


def _group_in(path: str) -> bool | None:
    try:
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
    except (FileNotFoundError, NotADirectoryError):  # no such file, or an ``.egg-info`` that is a file
        return False
    except (OSError, UnicodeDecodeError):
        return None
    section = None
    for line in map(str.strip, text.splitlines()):  # importlib.metadata's Sectioned.read, line by line
        if not line or line.startswith("#"):
            continue
        if line.startswith("[") and line.endswith("]"):
            section = line.strip("[]")
        elif section == GROUP:
            return True
    return False


def _no_plugins() -> tuple:
    return ()


class _Finder:
    """The meta-path finder of :func:`install`: it answers for ``pydantic.plugin._loader`` only."""

    @classmethod
    def find_spec(cls, fullname: str, path=None, target=None):
        if fullname != LOADER:
            return None
        uninstall()
        if declares_plugins() is not False:
            return None  # the next finders load pydantic's own module
        from importlib.machinery import ModuleSpec

        return ModuleSpec(LOADER, cls, origin="opdesign._startup.pydplugins")

    @staticmethod
    def create_module(spec):
        return None

    @staticmethod
    def exec_module(module) -> None:
        module.__doc__ = "opdesign's stand-in: no pydantic plugin is installed (opdesign._startup.pydplugins)"
        module.get_plugins = _no_plugins
        module.PYDANTIC_ENTRY_POINT_GROUP = GROUP
        module._plugins = {}
        module._loading_plugins = False


def install() -> None:
    """Wait for pydantic's plugin loader to be imported (once per process; no-op when it is loaded)."""
    if LOADER not in sys.modules and _Finder not in sys.meta_path:
        sys.meta_path.insert(0, _Finder)


def uninstall() -> None:
    if _Finder in sys.meta_path:
        sys.meta_path.remove(_Finder)
