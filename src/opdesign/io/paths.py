"""Locate the data folders (patterns, constraints, templates, skills).

In an installed wheel they live in ``opdesign/_data/<name>`` (see the
``force-include`` table of ``pyproject.toml``); in a source checkout or an
editable install they are the top-level folders of the repository.
"""

from __future__ import annotations

import os
from functools import cache
from pathlib import Path

DATA_NAMES = ("patterns", "constraints", "templates", "skills")
ENV_CACHE_DIR = "OPDESIGN_CACHE_DIR"


def cache_root() -> Path:
    """The opdesign cache folder: ``$OPDESIGN_CACHE_DIR``, else ``$XDG_CACHE_HOME/opdesign``.

    ``XDG_CACHE_HOME`` defaults to ``~/.cache``. The folder is not created here.
    """
    env = os.environ.get(ENV_CACHE_DIR)
    if env:
        return Path(env).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(xdg).expanduser() / "opdesign"


@cache
def data_dir(name: str) -> Path:
    """Return the folder holding data set ``name`` (one of :data:`DATA_NAMES`).

    Raises:
        FileNotFoundError: neither the wheel copy nor the checkout copy exists.
    """
    if name not in DATA_NAMES:
        raise ValueError(f"unknown data folder {name!r}; expected one of {DATA_NAMES}")
    package = Path(__file__).resolve().parents[1]  # src/opdesign (this module is opdesign/io/paths.py)
    for candidate in (package / "_data" / name, package.parents[1] / name):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError(f"opdesign data folder {name!r} not found (broken install?)")
