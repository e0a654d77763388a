"""The static / dynamic / unknown reading of kernel values (opdesign.validate.analysis.values)."""

from __future__ import annotations

import ast

import pytest

from opdesign.validate.analysis.values import DYNAMIC, STATIC, UNKNOWN, declared_axes, is_dynamic, read_values
from opdesign.validate.parse.document import Fence
from opdesign.validate.parse.pseudocode import _read

KERNEL = '''\
import pypto

Q_TILE = 128
S = pypto.frontend.dynamic("S")


@pypto.frontend.jit()
def kernel(q: pypto.Tensor((S, 128), pypto.DT_BF16), k: pypto.Tensor([pypto.DYNAMIC, pypto.STATIC, ...], pypto.DT_BF16),
           lens: pypto.Tensor([pypto.DYNAMIC], pypto.DT_INT32), topk, s2_tile: int, cmp_r=1):
    m_tile = 128
    c1_tile = [[m_tile, m_tile], [2 * m_tile, 2 * m_tile]]
    g_tile, d_tile = 16, 64
    rows, dim = q.shape
    blk = k.shape[1]
    heads = k.shape[2]
    k_2d = pypto.reshape(k, [k.shape[0] * blk, 512])
    for b_idx in pypto.loop(batch, name="batch"):
        cur = lens[b_idx]
        valid = (cur - b_idx * m_tile).min(m_tile)
        for i in range(s2_tile // m_tile):
            page = i * blk
        for base, factor in pypto.loop_unroll(rows, unroll_list=[4, 1]):
            step = factor * 2
'''


def _kinds() -> dict[str, str]:
    program = _read(Fence("python", KERNEL, 1, "pseudocode"))
    values = read_values(program, frozenset({"batch"})).functions["kernel"]
    names = ["Q_TILE", "m_tile", "c1_tile", "g_tile", "d_tile", "s2_tile", "cmp_r", "topk", "rows", "dim", "blk",
             "heads", "b_idx", "cur", "valid", "i", "page", "base", "factor", "step", "batch", "S"]
    return {n: values.name_kind(n) for n in names}


@pytest.mark.parametrize("name,kind", [
    ("Q_TILE", STATIC), ("m_tile", STATIC), ("c1_tile", STATIC), ("g_tile", STATIC), ("d_tile", STATIC),
    ("s2_tile", STATIC), ("cmp_r", STATIC), ("dim", STATIC), ("blk", STATIC), ("i", STATIC), ("page", STATIC),
    ("factor", STATIC), ("step", STATIC),
    ("rows", DYNAMIC), ("b_idx", DYNAMIC), ("cur", DYNAMIC), ("valid", DYNAMIC), ("base", DYNAMIC),
    ("batch", DYNAMIC), ("S", DYNAMIC),
    ("topk", UNKNOWN), ("heads", UNKNOWN),  # a plain Python parameter; an axis ``...`` covers
])
def test_name_kind(name: str, kind: str) -> None:
    assert _kinds()[name] == kind


def test_indexed_items_and_reshape_axes() -> None:
    program = _read(Fence("python", KERNEL, 1, "pseudocode"))
    values = read_values(program).functions["kernel"]
    expr = lambda text: ast.parse(text, mode="eval").body  # noqa: E731
    assert values.kind(expr("c1_tile[1][0]")) == STATIC
    assert values.kind(expr("k_2d.shape[1]")) == STATIC  # the reshape's literal 512
    assert values.kind(expr("k_2d.shape[0]")) == DYNAMIC  # k's first axis is pypto.DYNAMIC
    assert values.kind(expr("lens[0]")) == DYNAMIC  # an element of a runtime tensor
    assert values.kind(expr("min(m_tile, 64)")) == STATIC


def test_names_are_read_per_function() -> None:
    # a torch golden's ``idx`` (a Python list item) is not the kernel's ``idx`` (a pypto.loop index)
    text = (
        "def golden(block_num_per_batch):\n"
        "    for idx in block_num_per_batch:\n"
        "        for j in range(idx):\n"
        "            pass\n"
        "\n"
        "@pypto.frontend.jit()\n"
        "def kernel(q, k):\n"
        "    for idx in pypto.loop(batch, name='batch'):\n"
        "        kj = pypto.view(k, [idx, 64], [0, 0])\n"
    )
    program = _read(Fence("python", text, 1, "pseudocode"))
    scoped = read_values(program)
    assert scoped.functions["golden"].name_kind("idx") == UNKNOWN
    assert scoped.functions["kernel"].name_kind("idx") == DYNAMIC
    loops = [n for n, _l in program.walk() if n.loop_kind == "range"]
    assert not is_dynamic(program, loops[0].stmt.iter.args[0], node=loops[0])


def test_declared_axes_and_deep_chains() -> None:
    assert declared_axes({"dynamic_axes": [{"name": "batch"}, {"name": "seq_kv", "range": [1, 8]}, 3]}) \
        == frozenset({"batch", "seq_kv"})
    assert declared_axes({"dynamic_axes": ["batch", "seq_q"]}) == frozenset({"batch", "seq_q"})  # CANNBot names
    assert declared_axes({"dynamic_axes": "batch"}) == frozenset()
    chain = "x0 = seq_kv\n" + "".join(f"x{i + 1} = x{i} + 1\n" for i in range(3000))
    program = _read(Fence("python", chain, 1, "pseudocode"))
    assert is_dynamic(program, ast.parse("x5", mode="eval").body)
    assert is_dynamic(program, ast.parse("x3000", mode="eval").body) is False  # too deep to follow: not reported
