"""Shared helpers of the validator tests: fixture paths, mutation loading, running a fixture."""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path
from typing import Any

from opdesign.validate import Report, validate_paths, validate_text

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "validate"
IFACE = Path("eval") / "module_interfaces.yaml"


def make_fixtures_module() -> Any:
    spec = importlib.util.spec_from_file_location("make_fixtures", FIXTURES / "make_fixtures.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def run_case(design: bytes, iface: str | None, tmp: Path, mode: str = "paths") -> Report:
    """Validate a design the way a user would: a folder with DESIGN.md (+ eval/...), or inline text."""
    if mode == "text":
        return validate_text(design.decode("utf-8"))
    folder = tmp / "op"
    if folder.exists():
        shutil.rmtree(folder)
    (folder / "eval").mkdir(parents=True)
    (folder / "DESIGN.md").write_bytes(design)
    if iface is not None:
        (folder / IFACE).write_text(iface, encoding="utf-8")
    return validate_paths([folder])


def errors_except(report: Report, rule: str) -> list[tuple[str, int, str]]:
    return [(f.rule, f.line, f.message) for f in report.findings if f.level == "error" and f.rule != rule]
