"""The kernel corpus (tests/fixtures/kernel_corpus/) compiles and simulates with the real PyPTO 0.2.0.

The lint tests (tests/unit/validate/test_kernel_lint.py) say the corpus is clean by opdesign's rules; this says the
release accepts the same files. Each kernel's ``case()`` builds one small config; the run is compile +
SIM in a child process (6-21 s each on the 2-core machine), no verification. Needs the
``opdesign[pypto]`` extra; without it every test here is skipped with the reason.
"""

from __future__ import annotations

import ast
import importlib.util
from pathlib import Path

import pytest

MISSING = [m for m in ("pypto", "torch") if importlib.util.find_spec(m) is None]
if MISSING:
    pytest.skip(f"the opdesign[pypto] extra is not installed ({', '.join(MISSING)} missing): "
                "pip install '.[pypto]'", allow_module_level=True)

from opdesign.pypto_run.runner import run_isolated  # noqa: E402

pytestmark = pytest.mark.pypto

CORPUS = Path(__file__).resolve().parents[2] / "fixtures" / "kernel_corpus"
FILES = sorted(CORPUS.glob("*_kernel.py"))


def _jit_function(path: Path) -> str:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return next(n.name for n in tree.body if isinstance(n, ast.FunctionDef)
                and any("jit" in ast.unparse(d) for d in n.decorator_list))


@pytest.mark.parametrize("path", FILES, ids=[p.stem for p in FILES])
def test_corpus_kernel_compiles_and_simulates(path: Path, tmp_path: Path) -> None:
    result = run_isolated(path, _jit_function(path), f"{path}:case", mode="sim", work_dir=tmp_path, timeout=900)
    assert result.compiled and result.errors == [], [(e.stage, e.message[:300]) for e in result.errors]
    assert result.sim_us is not None and result.sim_us > 0
