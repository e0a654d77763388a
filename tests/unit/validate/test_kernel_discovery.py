"""Issue 33: the linter finds every kernel of a ``.py`` (or says why not), binds names as Python does,
applies the attention rules to attention kernels only, and never crashes on keyword-only calls.

Every kernel here is a small reproduction written for this test (no public code).
"""

from __future__ import annotations

import dataclasses
import textwrap

import pytest
from conftest import run_cli

from opdesign.validate import all_rules, validate_kernel_text, validate_paths
from opdesign.validate.analysis import astnodes
from opdesign.validate.engine.collect import all_rules as cached_rules
from opdesign.validate.parse.kernel_source import find_kernels, read_kernel

# A kernel body with five seeded defects, written once and placed at module level or inside a factory.
BODY = '''\
@pypto.frontend.jit()
def attn(q: pypto.Tensor((B, N, S, 64), pypto.DT_BF16), k: pypto.Tensor((B, N, S, 64), pypto.DT_BF16),
         out: pypto.Tensor((B, N, S, 64), pypto.DT_BF16)):
    pypto.experimental.set_operation_options(combine_axis=True)
    seq = q.shape[2]
    for b in pypto.loop(B, name="LOOP_b"):
        for h in pypto.loop(N, name="LOOP_h"):
            q_t = pypto.view(q, [1, 1, 64, 64], [b, 0, 0, 0])
            rows = min(64, seq - b)
            for kj in range(b + 1):
                k_t = pypto.view(k, [1, 1, 64, 64], [b, h, kj * 64, 0])
                pypto.set_cube_tile_shapes([64, 64], [64, 64], [64, 64])
                s = pypto.matmul(q_t, k_t, pypto.DT_FP32, b_trans=True)
                pypto.set_vec_tile_shapes(16, 64)
                p = pypto.exp(s)
                pypto.set_cube_tile_shapes([64, 64], [64, 64], [64, 64])
                o_blk = pypto.matmul(pypto.cast(p, pypto.DT_BF16), k_t, pypto.DT_FP32)
                o_run = pypto.cast(pypto.add(o_run, o_blk), pypto.DT_BF16)
            pypto.assemble(o_run, [b, h, 0, 0], out)
'''
FIVE = {"OD-KN-05", "OD-KN-04", "C-SYM-06", "OD-KN-06", "OD-KN-03"}


def _errors(text: str) -> list[tuple[str, str]]:
    """(rule, source line text) of each error finding: comparable between placements of one body."""
    lines = text.splitlines()
    return sorted((f.rule, lines[f.line - 1].strip()) for f in validate_kernel_text(text).findings
                  if f.level == "error")


def test_a_factory_nested_kernel_gets_the_findings_of_the_same_body_at_module_level() -> None:
    module = "import pypto\n\nB, N, S = 2, 4, 256\n\n\n" + BODY
    factory = ("import pypto\n\nB, N, S = 2, 4, 256\n\n\ndef get_kernel(scale):\n" + textwrap.indent(BODY, "    ")
               + "\n    return attn\n")
    at_module, in_factory = _errors(module), _errors(factory)
    assert {rule for rule, _line in at_module} >= FIVE
    assert in_factory == at_module


@pytest.mark.parametrize("text,kinds", [
    ("import pypto\n\n\nclass Ops:\n    @pypto.frontend.jit()\n"
     "    def run(self, x, out):\n        out[:] = pypto.exp(x)\n",
     ["FunctionDef"]),
    ("import pypto\nfrom pypto.frontend import jit as pjit\n\n\ndef outer():\n    def inner():\n"
     "        @pjit()\n        def k(x, out):\n            out[:] = pypto.exp(x)\n        return k\n    return inner\n",
     ["FunctionDef"]),
    ("import pypto\n\n\ndef test_add():\n    a = pypto.tensor([8, 8], pypto.DT_FP32, 'a')\n"
     "    with pypto.function('main', a):\n        b = pypto.add(a, a)\n", ["With"]),
    ("import pypto as pp\n\n\ndef body(x, out, n):\n    for i in pp.loop(n, name='LOOP_i'):\n"
     "        pp.assemble(pp.exp(x), [i, 0], out)\n", ["FunctionDef"]),
    ("import pypto\n\n\ndef add(x, out):\n    out[:] = pypto.add(x, x)\n\n\n"
     "fast = pypto.frontend.jit(runtime_options={'run_mode': 1})(add)\n", ["FunctionDef"]),
    ("import pypto\n\nSHARED = pypto.frontend.jit(runtime_options={'run_mode': 1})\n\n\n@SHARED\n"
     "def add(x, out):\n    out[:] = pypto.add(x, x)\n", ["FunctionDef"]),
])
def test_kernels_are_found_in_all_three_shapes_at_any_depth(text: str, kinds: list[str]) -> None:
    assert [type(k).__name__ for k in find_kernels(astnodes.parse(text))] == kinds
    source = read_kernel(text)
    assert source.program.kernel is not None
    assert [f.rule for f in validate_kernel_text(text).findings if f.rule in ("OD-KN-08", "OD-PC-04")] == []


def test_a_file_without_a_kernel_says_so_once_and_names_the_rules_not_run() -> None:
    text = "import pypto\n\n\ndef scale(x, f):\n    return pypto.mul(x, f)\n"
    findings = validate_kernel_text(text, "helpers.py").findings
    assert [(f.rule, f.level, f.line) for f in findings] == [("OD-KN-08", "info", 1)]
    message = findings[0].message
    assert "no PyPTO kernel found" in message and "OD-KN-06" in message and "SK-01-R2" in message
    assert "OD-PC-05" not in message  # it ran: the names the file uses are still checked


def test_another_packages_jit_is_named_in_the_no_kernel_finding() -> None:
    text = "import pypto\nimport otherdsl as od\n\n\n@od.jit()\ndef k(x):\n    return x\n"
    [finding] = validate_kernel_text(text).findings
    assert finding.rule == "OD-KN-08" and "@od.jit" in finding.message


def test_the_api_check_still_runs_on_a_file_without_a_kernel() -> None:
    text = "import pypto\n\n\ndef f(x):\n    return pypto.no_such_op(x)\n"
    assert sorted(f.rule for f in validate_kernel_text(text).findings) == ["OD-KN-08", "OD-PC-05"]


# --- binding (OD-KN-06) ---------------------------------------------------------------------------------

def test_def_class_import_except_global_and_module_dunders_bind_names() -> None:
    text = '''\
import pypto


class Cfg:
    rows = 8


@pypto.frontend.jit()
def k(x, out):
    import math
    from os import path as p

    def helper(t):
        return pypto.exp(t)

    class Local:
        pass

    global COUNTER
    try:
        y = helper(x)
    except ValueError as err:
        y = err
    here = p.dirname(__file__) + __name__
    for i in pypto.loop(Cfg.rows, name="LOOP_i"):
        out[:] = pypto.mul(y, math.pi)
    return Local, here, COUNTER
'''
    assert [f for f in validate_kernel_text(text).findings if f.rule == "OD-KN-06"] == []


def test_a_name_read_before_its_binding_in_a_factory_kernel_is_still_found() -> None:
    text = '''\
import pypto


def make(n):
    tile = 64

    @pypto.frontend.jit()
    def k(x, out):
        for i in pypto.loop(n, name="LOOP_i"):
            acc = pypto.add(acc, x)
            out[:] = pypto.mul(acc, tile)
    return k
'''
    found = [(f.rule, f.line) for f in validate_kernel_text(text).findings if f.rule == "OD-KN-06"]
    assert found == [("OD-KN-06", 10)]


# --- symbolic rebinding (C-SYM-06), Tensor([]) rank, keyword-only view ------------------------------------

def test_rebinding_a_name_to_a_static_value_clears_its_symbolic_mark() -> None:
    text = '''\
import pypto


@pypto.frontend.jit()
def k(x, out):
    for i in pypto.loop(4, name="LOOP_i"):
        n = i + 1
        n = 4
        for j in range(n):
            pypto.assemble(pypto.exp(x), [i, j], out)
        m = i + 1
        for j in range(m):
            pypto.assemble(pypto.exp(x), [i, j], out)
'''
    found = [(f.rule, f.line) for f in validate_kernel_text(text).findings if f.rule == "C-SYM-06"]
    assert found == [("C-SYM-06", 12)]


def test_a_tensor_with_an_empty_shape_has_an_unknown_rank() -> None:
    text = '''\
import pypto


@pypto.frontend.jit()
def k(x: pypto.Tensor([], pypto.DT_FP32), out: pypto.Tensor([], pypto.DT_FP32)):
    for i in pypto.loop(4, name="LOOP_i"):
        t = pypto.view(x, [1, 8, 64], [i, 0, 0])
        pypto.assemble(pypto.exp(t), [i, 0, 0], out)
'''
    assert [f.message for f in validate_kernel_text(text).findings if f.rule == "OD-PC-05"] == []
    ranked = text.replace("pypto.Tensor([], pypto.DT_FP32), out", "pypto.Tensor([4, 64], pypto.DT_FP32), out")
    assert [f.line for f in validate_kernel_text(ranked).findings if f.rule == "OD-PC-05"] == [7]


KEYWORD_VIEW = '''\
import pypto


@pypto.frontend.jit()
def k(q: pypto.Tensor((B, N, S, 64), pypto.DT_BF16), out: pypto.Tensor((B, N, S, 64), pypto.DT_BF16)):
    for b in pypto.loop(B, name="LOOP_b"):
        t = pypto.view(input=q, shape=[1, 1, 64, 64], offsets=[0, 0, 0, 0])
        pypto.assemble(pypto.exp(t), [b, 0, 0, 0], out)
'''


def test_a_keyword_only_view_is_read_and_never_crashes_a_rule() -> None:
    findings = validate_kernel_text(KEYWORD_VIEW).findings
    assert [f for f in findings if f.rule == "OD-DOC-10"] == []
    assert [(f.rule, f.line) for f in findings if f.rule == "OD-KN-05"] == [("OD-KN-05", 7)]


def test_a_rule_crash_is_an_od_doc_10_finding_and_exit_1_never_3(tmp_path, monkeypatch) -> None:
    rules = cached_rules()

    def boom(ctx):
        raise IndexError("list index out of range")

    monkeypatch.setitem(rules, "OD-KN-05", dataclasses.replace(rules["OD-KN-05"], check=boom))
    path = tmp_path / "k_kernel.py"
    path.write_text(KEYWORD_VIEW, encoding="utf-8")
    report = validate_paths([path])
    assert [(f.rule, f.line) for f in report.findings if f.rule == "OD-DOC-10"] == [("OD-DOC-10", 1)]
    assert "OD-KN-05 could not be evaluated: IndexError" in next(f.message for f in report.findings
                                                                  if f.rule == "OD-DOC-10")
    assert report.exit_code == 1
    monkeypatch.undo()
    assert all_rules()["OD-KN-05"].check is not boom
    res = run_cli("validate", str(path))
    assert res.returncode == 1, res.stdout + res.stderr  # the real rule finds the offsets; no crash, no exit 3
    assert "OD-KN-05" in res.stdout and "OD-DOC-10" not in res.stdout


# --- where rules apply ------------------------------------------------------------------------------------

HELLO = '''\
import pypto


@pypto.frontend.jit()
def add(x: pypto.Tensor((64, 64), pypto.DT_FP32), y: pypto.Tensor((64, 64), pypto.DT_FP32),
        out: pypto.Tensor((64, 64), pypto.DT_FP32)):
    pypto.set_vec_tile_shapes(32, 64)
    out[:] = pypto.add(x, y)
'''


def test_attention_rules_skip_a_kernel_without_the_c1_v1_c2_chain() -> None:
    assert validate_kernel_text(HELLO).findings == []
    chain = HELLO.replace("    out[:] = pypto.add(x, y)\n", (
        "    pypto.set_cube_tile_shapes([64, 64], [64, 64], [64, 64])\n"
        "    s = pypto.matmul(x, y, pypto.DT_FP32, b_trans=True)\n"
        "    pypto.set_vec_tile_shapes(32, 64)\n"
        "    p = pypto.exp(pypto.sub(s, pypto.amax(s, -1, keepdim=True)))\n"
        "    pypto.set_cube_tile_shapes([64, 64], [64, 64], [64, 64])\n"
        "    out[:] = pypto.matmul(p, y, pypto.DT_FP32)\n"))
    assert [(f.rule, f.level) for f in validate_kernel_text(chain).findings] == [("OD-PC-04", "warning")]


def test_two_matmuls_of_a_unit_test_may_share_a_tile_shape_but_attention_stages_may_not() -> None:
    plain = '''\
import pypto


def test_mm():
    a = pypto.tensor((32, 64), pypto.DT_FP32, "A")
    b = pypto.tensor((64, 32), pypto.DT_FP32, "B")
    with pypto.function("MM", a, b):
        pypto.set_cube_tile_shapes([64, 64], [64, 64], [64, 64])
        c = pypto.matmul(a, b, pypto.DT_FP32)
        d = pypto.matmul(a, b, pypto.DT_FP32, a_trans=True, b_trans=True)
'''
    assert [f for f in validate_kernel_text(plain).findings if f.rule == "OD-KN-02"] == []


FACTORY_TILES = '''\
import pypto


def make(heads, q_tile=128, kv_tile=128):
    d = 128

    @pypto.frontend.jit()
    def k(q, kk, v, out):
        pypto.experimental.set_operation_options(combine_axis=True)
        for h in pypto.loop(heads, name="LOOP_h"):
            q_t = pypto.view(q, [q_tile, d], [h * q_tile, 0])
            k_t = pypto.view(kk, [kv_tile, d], [h * kv_tile, 0])
            v_t = pypto.view(v, [kv_tile, d], [h * kv_tile, 0])
            pypto.set_cube_tile_shapes([128, 128], [128, 128], [128, 128])
            s = pypto.matmul(q_t, k_t, pypto.DT_FP32, b_trans=True)
            p = pypto.cast(pypto.exp(s), pypto.DT_BF16)
            o = pypto.matmul(p, v_t, pypto.DT_FP32)
            pypto.assemble(o, [h * q_tile, 0], out)
    return k
'''


def test_matmul_shapes_are_compared_under_the_kernels_tile_constants() -> None:
    assert [f for f in validate_kernel_text(FACTORY_TILES).findings if f.rule == "OD-KN-02"] == []
    wider = FACTORY_TILES.replace("kv_tile=128", "kv_tile=256")
    assert [(f.rule, f.line) for f in validate_kernel_text(wider).findings if f.rule == "OD-KN-02"] == [
        ("OD-KN-02", 17)]


def test_the_one_scope_of_a_function_around_its_loops_is_a_warning_one_among_others_is_an_error() -> None:
    whole = '''\
import pypto


@pypto.frontend.jit()
def k(a, b, c, out):
    pypto.set_pass_options(sg_set_scope=10000)
    pypto.set_cube_tile_shapes([64, 64], [64, 64], [64, 64])
    for i in pypto.loop(4, name="LOOP_i"):
        r = pypto.matmul(a, b, pypto.DT_FP32)
        pypto.set_vec_tile_shapes(16, 64)
        out[:] = pypto.add(r, c)
'''
    assert [(f.rule, f.level, f.line) for f in validate_kernel_text(whole).findings if f.rule == "OD-PC-03"] == [
        ("OD-PC-03", "warning", 6)]
    closed_after = whole + "    pypto.set_pass_options(sg_set_scope=-1)\n"
    assert [(f.rule, f.level, f.line) for f in validate_kernel_text(closed_after).findings
            if f.rule == "OD-PC-03"] == [("OD-PC-03", "warning", 6)]
    partial = whole.replace("    pypto.set_cube_tile_shapes", "    pypto.set_pass_options(sg_set_scope=-1)\n"
                            "    pypto.set_pass_options(sg_set_scope=3)\n    pypto.set_cube_tile_shapes")
    assert [(f.rule, f.level, f.line) for f in validate_kernel_text(partial).findings if f.rule == "OD-PC-03"] == [
        ("OD-PC-03", "error", 8)]
