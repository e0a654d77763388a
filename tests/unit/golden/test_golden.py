"""Tests of the golden decomposition estimator (issue 7).

Parity numbers come from anchors.md (CANNBot estimator and deriver); the
attention goldens under tests/goldens/ are parsed, never run.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from opdesign.errors import InputError, NotFoundError
from opdesign.golden.estimate import (
    GoldenReport,
    GoldenSignals,
    derive_design_params,
    estimate_golden,
    parity_module_count,
)

GOLDENS = Path(__file__).resolve().parents[2] / "goldens"
CANNBOT_KEYS = {"function", "signals", "suggested_module_count", "limitations"}
SIGNAL_KEYS = {"statements", "loops", "matmul_calls", "einsum_calls", "reduction_calls"}


def write(tmp_path: Path, source: str, name: str = "g.py") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(source), encoding="utf-8")
    return path


def run_cli(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "opdesign", "golden", *map(str, args)],
                          capture_output=True, text=True, check=False)


# --- parity with the CANNBot estimator -------------------------------------------------


def test_worked_example_from_anchors_is_estimated_without_running(tmp_path: Path) -> None:
    sentinel = tmp_path / "ran.txt"
    path = write(tmp_path, f'''
        open({str(sentinel)!r}, "w").write("executed")
        raise RuntimeError("this golden must never be imported")

        def op_golden(x):
            """doc"""
            def unused():
                ...
            for i in range(2):
                x = x @ x
            return x.sum()
        ''')
    report = estimate_golden(path)
    assert report.function == "op_golden"
    assert report.signals == GoldenSignals(statements=3, loops=1, matmul_calls=1, einsum_calls=0, reduction_calls=1)
    assert report.suggested_module_count == 1
    assert not sentinel.exists()


def test_nested_scopes_and_bare_strings_count_zero(tmp_path: Path) -> None:
    path = write(tmp_path, '''
        def op_golden(a, b):
            "first string"
            class Helper:
                def method(self):
                    return a @ b
            f = lambda t: t.sum() + (t @ t)
            "a string used as a comment"
            y = [r.mean() for r in a for _ in b]
            z = torch.einsum("ij,jk->ik", a, b)
            a @= b
            w = torch.bmm(a, b) + mm(a, b) + np.matmul(a, b)
            return softmax(z) + logsumexp(w) + amax(y) + y.amin() + prod(y)
        ''')
    signals = estimate_golden(path).signals
    # f=, y=, z=, a@=, w=, return: class and lambda bodies count zero, strings are skipped
    assert signals.statements == 6
    assert signals.loops == 2  # one per comprehension generator
    assert signals.einsum_calls == 1
    assert signals.matmul_calls == 4  # @=, bmm, mm, np.matmul; the lambda's and method's @ count zero
    assert signals.reduction_calls == 6  # mean, softmax, logsumexp, amax, amin, prod; the lambda's sum does not


def test_parity_formula_rounds_half_up_unlike_the_deriver() -> None:
    # operations = 6/3 = 2, score = max(min(75/30, 3), 2) = 2.5 -> floor(3.0) = 3, ceil(75/12) = 7
    half = GoldenSignals(statements=75, loops=0, matmul_calls=6, einsum_calls=0, reduction_calls=0)
    assert parity_module_count(half) == 3
    # score = max(min(60/30, 4), 3) = 3 -> floor(3.5) = 3
    assert parity_module_count(half.model_copy(update={"statements": 60, "reduction_calls": 3})) == 3
    # score 36/30 = 1.2 < 1.3 -> 1
    assert parity_module_count(half.model_copy(update={"statements": 36, "matmul_calls": 0})) == 1
    # statement cap: score = operations = 4, ceil(14/12) = 2
    assert parity_module_count(half.model_copy(update={"statements": 14, "matmul_calls": 12})) == 2


# --- the deriver's table ----------------------------------------------------------------

DERIVER_TABLE = [
    # name, effective_lines, S, matmuls, cross-tile reductions, modules (anchors.md)
    ("GELU", 4, 0, 0, 0, 1),
    ("Softmax", 6, 0, 0, 2, 1),
    ("LayerNorm", 7, 0, 0, 2, 1),
    ("attention_fwd", 5, 0, 2, 2, 1),
    ("attention_bwd", 17, 0, 6, 4, 2),
    ("FA_fwd", 28, 1, 2, 1, 1),
    ("FA_bwd", 45, 2, 4, 2, 2),
    ("gated_delta_rule", 40, 2, 4, 2, 2),
    ("mamba_ssm", 55, 2, 6, 2, 3),
    ("short golden", 80, 1, 3, 3, 3),
    ("long golden", 150, 1, 3, 3, 3),
    ("line-only", 300, 1, 1, 2, 2),
    ("structural zero", 60, 0, 0, 0, 2),
    ("structural >= 3", 100, 4, 3, 3, 4),
    # half-to-even: total = L = 2.5 and 4.5 round down (round-half-up would give 3 and 5)
    ("half-to-even 2.5", 75, 0, 0, 0, 2),
    ("half-to-even 4.5", 135, 0, 0, 0, 4),
]


@pytest.mark.parametrize(("name", "lines", "state", "matmuls", "reduce", "modules"), DERIVER_TABLE,
                         ids=[row[0] for row in DERIVER_TABLE])
def test_deriver_table(name: str, lines: int, state: int, matmuls: int, reduce: int, modules: int) -> None:
    params = derive_design_params(effective_lines=lines, state_groups=state, matmul_count=matmuls,
                                  cross_tile_reduce=reduce)
    assert params.module_count == modules
    assert params.path == ("L0" if modules == 1 else "L1")


def test_deriver_structural_cap() -> None:
    capped = derive_design_params(effective_lines=150, state_groups=1, matmul_count=3, cross_tile_reduce=3)
    assert (capped.L, capped.O, capped.structural, capped.total) == (5.0, 2.0, 2.0, 3.0)
    uncapped = derive_design_params(effective_lines=60, state_groups=0, matmul_count=0, cross_tile_reduce=0)
    assert (uncapped.structural, uncapped.total) == (0, 2.0)  # no structure: lines alone decide


def test_effective_lines_include_nested_functions_and_skip_docstrings(tmp_path: Path) -> None:
    path = write(tmp_path, '''
        def op_golden(x):
            """doc"""
            def helper(y):
                """helper doc"""
                return y * 2
            "not a docstring"
            return helper(x)
        ''')
    report = estimate_golden(path)
    assert report.design_params.effective_lines == 4  # def helper, its return, the mid-body string, return
    assert report.signals.statements == 1  # parity: only `return helper(x)`


def test_options_override_detection_but_not_parity() -> None:
    path = GOLDENS / "backward_lm_golden.py"
    detected = estimate_golden(path)
    forced = estimate_golden(path, state_groups=4, cross_tile_reduce=4)
    assert (forced.design_params.state_groups, forced.design_params.state_source) == (4, "option")
    assert (forced.design_params.cross_tile_reduce, forced.design_params.cross_tile_source) == (4, "option")
    assert forced.design_params.module_count == 2  # O = 3, S = 4 -> 4, capped by ceil(24 / 12) = 2
    assert forced.signals == detected.signals
    assert forced.suggested_module_count == detected.suggested_module_count == 2


# --- function selection and input errors -----------------------------------------------


def test_ambiguous_golden_functions_list_candidates(tmp_path: Path) -> None:
    path = write(tmp_path, "def a_golden(x):\n    return x\n\ndef b_golden(x):\n    return x\n")
    with pytest.raises(InputError) as info:
        estimate_golden(path)
    assert "a_golden, b_golden" in info.value.message
    assert info.value.details["candidates"] == ["a_golden", "b_golden"]
    assert estimate_golden(path, function="b_golden").function == "b_golden"


def test_missing_golden_function_lists_candidates(tmp_path: Path) -> None:
    path = write(tmp_path, "def reference(x):\n    return x\n\ndef helper(x):\n    return x\n")
    with pytest.raises(NotFoundError) as info:
        estimate_golden(path)
    assert info.value.details["candidates"] == ["reference", "helper"]
    with pytest.raises(NotFoundError, match="no top-level function named 'nope'; candidates: reference, helper"):
        estimate_golden(path, function="nope")


def test_syntax_error_reports_its_line(tmp_path: Path) -> None:
    path = write(tmp_path, "def op_golden(x):\n    y = x +\n    return y\n")
    with pytest.raises(InputError, match="line 2: syntax error") as info:
        estimate_golden(path)
    assert info.value.details["line"] == 2


def test_non_utf8_and_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "latin.py"
    path.write_bytes(b"def op_golden(x):\n    return '\xe9'\n")
    with pytest.raises(InputError, match="line 2: not UTF-8"):
        estimate_golden(path)
    with pytest.raises(NotFoundError, match="golden file not found"):
        estimate_golden(tmp_path / "absent.py")
    with pytest.raises(InputError, match="--state-groups must be >= 0"):
        estimate_golden(GOLDENS / "dense_forward_golden.py", state_groups=-1)


def test_a_pep263_coding_line_is_read_as_python_reads_it(tmp_path: Path) -> None:
    """A golden that Python runs (a latin-1 coding line) is estimated like its UTF-8 twin; a coding Python
    refuses (unknown, or contradicting the BOM) is refused, and bytes the declared coding cannot read name it."""
    body = (GOLDENS / "dense_forward_golden.py").read_bytes()
    latin = tmp_path / "latin.py"
    latin.write_bytes(b"# -*- coding: latin-1 -*-\n" + body + b"# caf\xe9\n")
    assert estimate_golden(latin) == estimate_golden(GOLDENS / "dense_forward_golden.py")
    for name, head, message in [("bogus.py", b"# coding: bogus\n",
                                 "encoding declaration: unknown encoding: bogus"),
                                ("bom.py", b"\xef\xbb\xbf# coding: latin-1\n",
                                 "encoding declaration: encoding problem")]:
        (tmp_path / name).write_bytes(head + body)
        with pytest.raises(InputError, match=message):
            estimate_golden(tmp_path / name)
    cp = tmp_path / "cp.py"
    cp.write_bytes(b"# coding: ascii\n" + body + b"# caf\xe9\n")
    with pytest.raises(InputError, match=r"line \d+: not ascii as its coding line declares"):
        estimate_golden(cp)


def test_cli_errors_exit_2_with_candidates_and_line(tmp_path: Path) -> None:
    ambiguous = write(tmp_path, "def a_golden(x):\n    return x\n\ndef b_golden(x):\n    return x\n", "amb.py")
    result = run_cli(ambiguous)
    assert result.returncode == 2
    assert result.stderr.startswith("error: invalid_input: ")
    assert "a_golden, b_golden" in result.stderr
    broken = write(tmp_path, "def op_golden(x):\n\n    return (x\n", "broken.py")
    result = run_cli(broken, "--json")
    assert result.returncode == 2
    assert "line 3" in result.stderr
    assert result.stdout == ""


# --- attention-aware decision on realistic goldens --------------------------------------

ATTENTION_GOLDENS = [
    # file, function, (statements, loops, matmul, einsum, reduction), parity, (S, cross-tile, design count),
    # state names, backward, sk16, module_count, rule, reason fragment
    ("dense_forward_golden.py", "dense_attention_fwd_golden", (26, 3, 2, 0, 1), 1, (1, 2, 1),
     ["m", "l", "acc"], False, False, 1, "SK-01", "online-softmax state (m, l, acc)"),
    ("paged_forward_golden.py", "paged_fp8_decode_attention_golden", (24, 3, 1, 0, 0), 1, (1, 3, 2),
     ["m", "l", "acc"], False, False, 1, "SK-01", "design-parameter count (2) is not used"),
    ("backward_lm_golden.py", "attention_bwd_golden", (24, 4, 5, 0, 1), 2, (2, 1, 2),
     ["dv", "dk", "dq"], True, True, 1, "SK-16", "forward statistics inputs (m, l) and 5 matmuls"),
]


@pytest.mark.parametrize(
    ("file", "function", "signals", "parity", "design", "state", "backward", "sk16", "modules", "rule", "reason"),
    ATTENTION_GOLDENS, ids=[row[0] for row in ATTENTION_GOLDENS])
def test_attention_goldens(file: str, function: str, signals: tuple[int, ...], parity: int,
                           design: tuple[int, int, int], state: list[str], backward: bool, sk16: bool,
                           modules: int, rule: str, reason: str) -> None:
    report = estimate_golden(GOLDENS / file)
    assert report.function == function
    assert tuple(report.signals.model_dump().values()) == signals
    assert report.suggested_module_count == parity == parity_module_count(report.signals)
    dp = report.design_params
    assert (dp.state_groups, dp.cross_tile_reduce, dp.module_count) == design
    assert (dp.state_source, dp.cross_tile_source) == ("detected", "detected")
    att = report.attention
    assert att.state_names == state
    assert att.online_softmax_state is (rule == "SK-01")
    assert att.softmax_chain is (rule == "SK-01")
    assert (att.backward, att.sk16_applicable) == (backward, sk16)
    assert (report.module_count, report.rule) == (modules, rule)
    assert reason in report.reason


def test_online_softmax_roles_in_the_paged_golden() -> None:
    att = estimate_golden(GOLDENS / "paged_forward_golden.py").attention
    # `m, l, acc = _page_update(...)`: roles come from the names, the exp from the helper
    assert att.state_roles == {"m": "max", "l": "sum", "acc": "weighted_sum"}
    assert att.matmul_count == 2  # q_row @ k_page^T here, torch.matmul(p8, v_page) in the helper


def test_backward_signals() -> None:
    att = estimate_golden(GOLDENS / "backward_lm_golden.py").attention
    assert att.grad_outputs == ["dq", "dk", "dv"]
    assert att.stats_inputs == ["m", "l"]
    assert att.matmul_count == 5


def test_backward_without_stats_keeps_the_design_count(tmp_path: Path) -> None:
    path = write(tmp_path, '''
        def attn_bwd_golden(q, k, v, dout, scale):
            s = (q @ k.T) * scale
            p = np.exp(s - s.max(-1, keepdims=True))
            p = p / p.sum(-1, keepdims=True)
            dp = dout @ v.T
            dv = p.T @ dout
            ds = p * (dp - (dp * p).sum(-1, keepdims=True))
            dq = ds @ k * scale
            dk = ds.T @ q * scale
            return dq, dk, dv
        ''')
    report = estimate_golden(path)
    assert report.attention.backward and not report.attention.sk16_applicable
    assert report.attention.stats_inputs == []
    assert report.rule == "design-params"
    assert report.module_count == report.design_params.module_count == 1
    assert "no forward l/m input" in report.reason


def test_forward_with_projections_adds_modules(tmp_path: Path) -> None:
    path = write(tmp_path, '''
        def mha_golden(x, wq, wk, wv, wo):
            q = x @ wq
            k = x @ wk
            v = x @ wv
            p = torch.softmax(q @ k.transpose(-1, -2) / 8.0, dim=-1)
            return (p @ v) @ wo
        ''')
    report = estimate_golden(path)
    assert not report.attention.online_softmax_state
    assert report.attention.softmax_chain
    assert (report.module_count, report.rule) == (3, "SK-01")  # 1 + ceil((6 - 2) / 3)
    assert "4 matmul(s) beyond QK^T and PV add 2 module(s)" in report.reason


def test_three_way_branch_state_and_counters(tmp_path: Path) -> None:
    path = write(tmp_path, '''
        def fa_golden(q, k, v, tile):
            pos = 0
            for j in range(k.shape[0] // tile):
                s = q @ k[pos:pos + tile].T
                mij = s.max(-1)
                if j == 0:
                    mi = mij
                    li = np.exp(s - mij[:, None]).sum(-1)
                    oi = np.exp(s - mij[:, None]) @ v[pos:pos + tile]
                else:
                    mnew = np.maximum(mi, mij)
                    li = np.exp(mi - mnew) * li + np.exp(s - mnew[:, None]).sum(-1)
                    oi = np.exp(mi - mnew)[:, None] * oi + np.exp(s - mnew[:, None]) @ v[pos:pos + tile]
                    mi = mnew
                pos += tile
            return oi / li[:, None]
        ''')
    report = estimate_golden(path)
    assert report.attention.state_roles == {"mi": "max", "li": "sum", "oi": "weighted_sum"}
    assert report.attention.online_softmax_state
    assert report.design_params.state_groups == 1  # `pos += tile` is a counter, not state


def test_plain_operator_keeps_the_design_count(tmp_path: Path) -> None:
    path = write(tmp_path, '''
        def gelu_golden(x):
            inner = 0.7978845608 * (x + 0.044715 * x ** 3)
            return 0.5 * x * (1.0 + np.tanh(inner))
        ''')
    report = estimate_golden(path)
    assert (report.module_count, report.rule) == (1, "design-params")
    assert report.attention.model_dump(exclude={"state_names", "state_roles", "stats_inputs", "grad_outputs",
                                                "matmul_count"}) == {
        "online_softmax_state": False, "softmax_chain": False, "backward": False, "sk16_applicable": False}
    assert report.reason.startswith("No attention structure")


# --- output shapes ------------------------------------------------------------------------


def test_cannbot_json_has_exactly_the_estimator_keys() -> None:
    report = estimate_golden(GOLDENS / "dense_forward_golden.py")
    data = report.to_cannbot_json()
    assert set(data) == CANNBOT_KEYS
    assert set(data["signals"]) == SIGNAL_KEYS
    assert isinstance(report, GoldenReport)


def test_cli_json_and_text() -> None:
    golden = GOLDENS / "backward_lm_golden.py"
    result = run_cli(golden, "--json")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert set(data) == CANNBOT_KEYS | {"design_params", "attention", "module_count", "rule", "reason"}
    assert data["suggested_module_count"] == 2
    assert data["module_count"] == 1
    assert data["attention"]["sk16_applicable"] is True
    text = run_cli(golden, "--state-groups", "0")
    assert text.returncode == 0, text.stderr
    assert "suggested_module_count (CANNBot parity; an input, not the decision): 2" in text.stdout
    assert "S 0 (option)" in text.stdout
    assert "module_count: 1 (SK-16; the decision)" in text.stdout
    # issue 30 item 8: three module counts, one decision: the other two say they are inputs
    assert "-> design-parameter count 2, path L1 (an input, not the decision)" in text.stdout
    assert [ln for ln in text.stdout.splitlines()
            if ln.startswith("module_count:")] == ["module_count: 1 (SK-16; the decision)"]
    assert "reason: Backward attention with forward statistics inputs (m, l)" in text.stdout


def test_a_spec_given_as_golden_says_where_a_spec_goes(tmp_path: Path) -> None:
    """`opdesign golden SPEC.yaml` said only "line 11: syntax error"; a .py golden keeps the plain message."""
    spec = tmp_path / "op.yaml"
    spec.write_text("schema_version: 1\ndynamic_axes:\n  - {name: seq_q, range: [1, 4096]}\n")
    with pytest.raises(InputError, match=r"op.yaml: line \d+: syntax error: .*; this is YAML: a SPEC goes to "
                                         r"`opdesign estimate --spec FILE`"):
        estimate_golden(spec)
    golden = tmp_path / "g.py"
    golden.write_text("schema_version: 1\ndynamic_axes:\n  - {name: seq_q, range: [1, 4096]}\n")
    with pytest.raises(InputError, match=r"syntax error") as err:
        estimate_golden(golden)
    assert "YAML" not in str(err.value)
