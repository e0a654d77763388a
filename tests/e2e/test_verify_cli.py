"""`opdesign verify` input handling, with or without the pypto extra (fast: nothing is compiled)."""

from __future__ import annotations

import importlib.util
import json

from conftest import EXAMPLES, run_cli

HAVE_PYPTO = all(importlib.util.find_spec(m) is not None for m in ("pypto", "torch"))


def test_verify_needs_a_design_folder_with_one_kernel(tmp_path):
    res = run_cli("verify", str(tmp_path / "nowhere"))
    assert res.returncode == 2 and "error: not_found:" in res.stderr and "no such design folder" in res.stderr
    res = run_cli("verify", str(tmp_path))
    assert res.returncode == 2 and "expected exactly one *_kernel.py (found: none)" in res.stderr


def test_a_file_that_is_not_an_opdesign_kernel_is_invalid_input(tmp_path):
    (tmp_path / "x_kernel.py").write_text("import pypto\n")
    res = run_cli("verify", str(tmp_path))
    assert res.returncode == 2
    assert "not an opdesign kernel file (missing KERNEL_FUNCTION, TOLERANCE, CONFIGS)" in res.stderr


def test_without_the_extra_verify_says_how_to_install_it(tmp_path):
    out = tmp_path / "op"
    assert run_cli("new", "--spec", str(EXAMPLES / "causal_gqa_tail.yaml"), "--out", str(out)).returncode == 0
    if HAVE_PYPTO:  # the marked pypto tests cover the real run; here only the unknown-config refusal
        res = run_cli("verify", str(out), "--config", "nope")
        assert res.returncode == 2 and "unknown config nope" in res.stderr
        return
    res = run_cli("verify", str(out))
    assert res.returncode == 2 and res.stderr.startswith("error: extra_missing:")
    assert "pip install 'opdesign[pypto]'" in res.stderr
    res = run_cli("tool", "call", "verify_design", input=json.dumps({"design_path": "op"}), cwd=tmp_path)
    assert res.returncode == 2 and json.loads(res.stdout)["error"]["code"] == "extra_missing"
