"""Shared fixtures: repository paths and a helper to run the CLI as a user would."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import opdesign.workflows.validate  # noqa: F401 - hands the validator the registered skeletons, as the CLI does

REPO = Path(__file__).resolve().parents[1]
EXAMPLES = REPO / "examples" / "specs"


def spec_variant(spec, **changes):
    """A copy of ``spec`` with fields changed; ``shape__head_dim=64`` sets ``shape.head_dim``."""
    import copy

    from opdesign.spec import parse_spec

    data = copy.deepcopy(spec.model_dump(mode="json", exclude_none=True))
    for dotted, value in changes.items():
        node = data
        *head, last = dotted.split("__")
        for key in head:
            node = node[key]
        node[last] = value
    return parse_spec(data)


def run_cli(*args: str, cwd: Path | None = None, input: str | None = None,
            timeout: float = 120) -> subprocess.CompletedProcess:
    """Run ``python -m opdesign ARGS`` in a subprocess (the installed package)."""
    env = dict(os.environ, PYTHONWARNINGS="error::UserWarning")
    return subprocess.run([sys.executable, "-m", "opdesign", *args], cwd=cwd, input=input,
                          capture_output=True, text=True, timeout=timeout, env=env)


@pytest.fixture
def cli():
    return run_cli
