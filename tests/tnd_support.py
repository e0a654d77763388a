"""Shared steps of the TND tests: a generated design folder, its scaffold's self-check, and its kernel
verified with PyPTO (``--quick``)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import run_cli

MISSING = [m for m in ("pypto", "torch") if importlib.util.find_spec(m) is None]
#: marks a test that needs the opdesign[pypto] extra (it skips with the reason without it)
needs_pypto = pytest.mark.skipif(bool(MISSING), reason=f"the opdesign[pypto] extra is not installed "
                                 f"({', '.join(MISSING)} missing): pip install '.[pypto]'")


def new_folder(factory: pytest.TempPathFactory, spec: Path, name: str) -> Path:
    """``opdesign new --spec spec`` into a fresh folder ``name`` (asserts exit 0)."""
    out = factory.mktemp(name) / name
    res = run_cli("new", "--spec", str(spec), "--out", str(out))
    assert res.returncode == 0, res.stderr
    return out


def scaffold_lines(folder: Path, op: str, configs: int, quick: bool) -> list[str]:
    """stdout lines of ``<op>_scaffold.py [--quick]``; asserts exit 0 and every one of ``configs`` within tolerance."""
    res = subprocess.run([sys.executable, str(folder / f"{op}_scaffold.py"), *(["--quick"] if quick else [])],
                         capture_output=True, text=True, timeout=600 if quick else 3000)
    assert res.returncode == 0, res.stdout + res.stderr
    lines = res.stdout.splitlines()
    assert lines[-1] == f"self-check: {configs} of {configs} configs within tolerance", lines
    return lines


def assert_verifies(folder: Path, names: list[str], max_abs: float = 0.05) -> None:
    """``opdesign verify --quick``: every config compiles, simulates and verifies PASS within ``max_abs``."""
    from opdesign.pypto_run.design import verify_dir

    report = verify_dir(folder, quick=True)
    assert report.errors == [], report.errors
    assert [c.name for c in report.configs] == names
    for config in report.configs:
        assert config.compiled and config.sim_us > 0
        assert config.verify.status == "PASS" and config.verify.failed_passes == [], config
        assert config.verify.max_abs_diff is not None and config.verify.max_abs_diff <= max_abs
    assert report.passed
