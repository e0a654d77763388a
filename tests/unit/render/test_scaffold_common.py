"""The shared scaffold frame (templates/common/scaffold_base.py.j2, issue 13).

Every skeleton's scaffold reports an exception raised by its kernel as a
failure of that config only: the other configs still run and are reported, and
the scaffold exits 1.
"""

from __future__ import annotations

import subprocess
import sys

import pytest
from conftest import EXAMPLES, spec_variant

from opdesign.render.design import render_scaffold
from opdesign.skeletons.registry import estimate
from opdesign.spec import load_spec

# causal_gqa_tail's own configs take a minute on the CPU: three small ones that keep Q and KV tails
SMALL_SK01_CONFIGS = [
    {"name": "func_s200_tail", "type": "functional", "priority": "P0", "shape": {"seq_q": 200, "seq_kv": 200}},
    {"name": "func_s100_kv300", "type": "functional", "priority": "P1", "shape": {"seq_q": 100, "seq_kv": 300},
     "seed": 3},
    {"name": "perf_s384", "type": "performance", "priority": "P1",
     "shape": {"batch": 1, "num_heads": 4, "num_kv_heads": 1, "seq_q": 384, "seq_kv": 384}, "seed": 7},
]

CASES = {  # skeleton: (example SPEC, field changes that keep the run short)
    "SK-01": ("causal_gqa_tail", {"typical_configs": SMALL_SK01_CONFIGS}),
    "SK-02": ("sparse_topk_2048", {}),
    "SK-16": ("sk16_backward_lm", {}),
}

INJECTED = '''

_kernel_calls = []


def kernel(*args):
    """Test double: the second call (the second config) raises, the others run the designed kernel."""
    _kernel_calls.append(args)
    if len(_kernel_calls) == 2:
        raise RuntimeError("injected kernel failure")
    return designed_kernel(*args)
'''


def _scaffold(skeleton: str) -> tuple[str, list[str]]:
    example, changes = CASES[skeleton]
    plan = estimate(spec_variant(load_spec(EXAMPLES / f"{example}.yaml"), **changes))
    assert plan.skeleton.id == skeleton
    return render_scaffold(plan), [c["name"] for c in plan.typical_configs]


def _run(script: str, tmp_path) -> subprocess.CompletedProcess:
    path = tmp_path / "op_scaffold.py"
    path.write_text(script, encoding="utf-8")
    return subprocess.run([sys.executable, str(path)], capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("skeleton", sorted(CASES))
@pytest.mark.slow
def test_kernel_error_fails_its_config_and_the_others_still_run(skeleton, tmp_path):
    script, names = _scaffold(skeleton)
    assert len(names) == 3
    assert script.count("\ndef kernel(") == 1 and script.count('\nif __name__ == "__main__":') == 1
    script = script.replace("\ndef kernel(", "\ndef designed_kernel(", 1)
    script = script.replace('\n\nif __name__ == "__main__":', INJECTED + '\n\nif __name__ == "__main__":', 1)
    res = _run(script, tmp_path)
    assert res.returncode == 1, res.stdout + res.stderr
    lines = res.stdout.splitlines()
    assert len(lines) == 4, res.stdout + res.stderr
    good, bad = names[0::2], names[1]
    for line, name in zip(lines, names, strict=False):
        assert line.startswith(f"{name}: ")
        assert line.endswith(" FAIL" if name == bad else " PASS"), line
    assert lines[1] == f"{bad}: kernel error: RuntimeError: injected kernel failure (rtol=0.02, atol=0.02) FAIL"
    assert all("max_abs_err=" in lines[names.index(name)] for name in good)
    assert lines[-1] == "self-check: 2 of 3 configs within tolerance"
    assert "Traceback" in res.stderr and "RuntimeError: injected kernel failure" in res.stderr


@pytest.mark.parametrize("skeleton", sorted(CASES))
def test_shared_frame_is_rendered_once(skeleton):
    script, names = _scaffold(skeleton)
    for text in ("def round_to_input(", "def to_bnsd(", "def compare(", "def check(", "def main(", "CONFIGS = [",
                 "def run_kernel(", "def run_golden(", "def notes(", "OUTPUTS = ("):
        assert script.count(text) == 1, text
    compile(script, "scaffold.py", "exec")
    for name in names:
        assert f'"name": {name!r}' in script
