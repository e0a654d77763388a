"""The validator's shortcuts give what the long way gives: the plain-text inline shortcut of the markdown
parser (:mod:`opdesign.validate.parse.mdinline`), the listed walk of a program, the paused garbage collector."""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from markdown_it import MarkdownIt
from mdit_py_plugins.front_matter import front_matter_plugin

from opdesign.validate.analysis.codeorder import Carried, Order
from opdesign.validate.parse import mdinline
from opdesign.validate.parse.document import _parser, parse
from opdesign.validate.parse.pseudocode import read_programs

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "validate"
DESIGNS = sorted(FIXTURES.glob("*/*.md"))


def _reference() -> MarkdownIt:
    return MarkdownIt("commonmark").enable("table").use(front_matter_plugin)


def _dump(tokens) -> list:
    return [(t.type, t.tag, t.nesting, t.content, t.map, t.level, t.info, t.markup, t.attrs, t.hidden,
             None if t.children is None else _dump(t.children)) for t in tokens]


def test_the_validator_parser_uses_the_shortcut() -> None:
    rules = {r.name: r.fn for r in _parser().core.ruler.__rules__}
    assert rules["inline"] is mdinline.inline


@pytest.mark.parametrize("design", DESIGNS, ids=[f"{p.parent.name}/{p.name}" for p in DESIGNS])
def test_tokens_are_the_parser_own(design: Path) -> None:
    text = design.read_text(encoding="utf-8", errors="replace")
    assert _dump(_parser().parse(text)) == _dump(_reference().parse(text))


CELLS = ["", "plain words", "bfloat16", "a: b - c = d + e", "x # y % z ^ w", "{a} $b$ @c", "q > k", "100 %",
         "`code`", "*em*", "_em_", "a_b", "[link](x)", "![img](y)", "<b>html</b>", "<!-- opdesign: disable=X -->",
         "&amp;", "a\\*b", "line one\nline two", "trailing  \nbreak", "~~strike~~", "a ] b", "wow!", "tab\there",
         "汉字 与 English", "  spaced  ", "seq_q", "Q_TILE x KV_TILE", "_lead", "trail_", "a__b", "a_ b", "a _b",
         "é_é", "1_2", "x_*y*", "[batch, seq_q, head_dim]", "[a](b)", "[a] (b)", "[a][b]", "[ref]", "[[x]]",
         "a]b[c", "[x]_y", "q[:, 0]"]


@pytest.mark.parametrize("cell", CELLS)
def test_each_kind_of_inline_text_parses_as_markdown_it_parses_it(cell: str) -> None:
    for text in (cell, f"| a | b |\n|---|---|\n| {cell} | x |\n", f"# {cell}\n", f"para {cell} end\n"):
        assert _dump(_parser().parse(text)) == _dump(_reference().parse(text)), text


REFERENCES = "[ref]: https://example.com\n\n"


@pytest.mark.parametrize("cell", [c for c in CELLS if "[" in c or "]" in c])
def test_brackets_in_a_document_with_link_references(cell: str) -> None:
    for text in (f"{REFERENCES}| a |\n|---|\n| {cell} |\n", f"{REFERENCES}para {cell}\n", f"{cell}\n\n{REFERENCES}"):
        assert _dump(_parser().parse(text)) == _dump(_reference().parse(text)), text


def test_another_configuration_keeps_the_parser_rule() -> None:
    md = MarkdownIt("commonmark").enable(["table", "strikethrough"])
    before = {r.name: r.fn for r in md.core.ruler.__rules__}["inline"]
    mdinline.install(md)
    assert {r.name: r.fn for r in md.core.ruler.__rules__}["inline"] is before
    assert md.parse("~~x~~")[1].children[0].type == "s_open"


def test_two_texts_two_documents() -> None:
    a, b = parse("# One\n\nplain a\n"), parse("# Two\n\nplain b\n")
    assert [s.text for s in a.spans] == ["One", "plain a"] and [s.text for s in b.spans] == ["Two", "plain b"]


def _program(code: str):
    doc = parse(f"## Pseudocode\n\n```python\n{code}```\n")
    programs, _n = read_programs(doc)
    return programs[0]


def _uncached(program) -> list:
    return [(n, loops) for n, loops in program._walk(program.nodes, ())]


def test_the_listed_walk_is_the_walk_of_its_own_program() -> None:
    one = _program("for i in range(4):\n    x = f(i)\n")
    two = _program("y = g()\nfor j in pypto.loop(n):\n    for k in range(2):\n        z = h(j, k)\n")
    for program in (one, two, one, two):
        assert list(program.walk()) == _uncached(program)
    assert [n.line for n, _l in one.walk()] != [n.line for n, _l in two.walk()]
    assert [[loop.loop_kind for loop in loops] for _n, loops in two.walk()] == [[], [], ["pypto.loop"],
                                                                              ["pypto.loop", "range"]]
    other = dataclasses.replace(one, nodes=two.nodes)  # a replaced program walks its own nodes
    assert list(other.walk()) == _uncached(two)


_PIECES = list("ab_Z09 [](){}!*`\\<>&~:#|-=+@^$%\"'.,;中é\t") + ["_a_", "a_b", "](", "[x]", "__", "**", "&amp;", "\n"]


@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from(_PIECES), max_size=25).map("".join), st.booleans(),
       st.sampled_from(["para", "cell", "head"]))
def test_any_inline_text_parses_as_markdown_it_parses_it(text: str, references: bool, where: str) -> None:
    body = {"para": f"{text}\n", "cell": f"| a | b |\n|---|---|\n| {text} | x |\n", "head": f"# {text}\n"}[where]
    doc = (REFERENCES if references else "") + body
    assert _dump(_parser().parse(doc)) == _dump(_reference().parse(doc)), doc


def _carried_by_one_pass(loop: ast.For | ast.While) -> set[str]:
    """The loop-carried names the long way: one binding-order pass over the body."""
    order = Order(set(), branches=True)
    for stmt in loop.body:
        order.visit(stmt)
    return {name for name, _line in order.reads} & (set(order.first_bind) | order.written)


_NAMES = st.sampled_from(["a", "b", "m", "o"])
_EXPRS = st.one_of(_NAMES, st.just("1"), _NAMES.map(lambda n: f"f({n}, a)"), _NAMES.map(lambda n: f"(b := {n} + 1)"),
                   _NAMES.map(lambda n: f"[x for x in {n}]"), _NAMES.map(lambda n: f"{n}[0]"))


_LEAVES = st.one_of(
    st.tuples(_NAMES, _EXPRS).map(lambda p: f"{p[0]} = {p[1]}"),
    st.tuples(_NAMES, _EXPRS).map(lambda p: f"{p[0]} += {p[1]}"),
    st.tuples(_NAMES, _EXPRS).map(lambda p: f"{p[0]}[:] = {p[1]}"),
    _EXPRS.map(lambda e: f"g({e})"),
    st.tuples(_NAMES, _EXPRS).map(lambda p: f"with h({p[1]}) as {p[0]}:\n    pass"),
)


def _indent(lines: list[str]) -> list[str]:
    return ["    " + line for line in lines]


def _block(depth: int) -> st.SearchStrategy[list[str]]:
    leaf = _LEAVES.map(lambda s: s.split("\n"))
    if depth == 0:
        return st.lists(leaf, min_size=1, max_size=3).map(lambda parts: [line for p in parts for line in p])
    inner = _block(depth - 1)
    compound = st.one_of(
        st.tuples(_NAMES, inner).map(lambda p: [f"for {p[0]} in range(n):", *_indent(p[1])]),
        st.tuples(_EXPRS, inner, inner).map(lambda p: [f"if {p[0]}:", *_indent(p[1]), "else:", *_indent(p[2])]),
        st.tuples(_EXPRS, inner).map(lambda p: [f"if {p[0]}:", *_indent(p[1])]),
        st.tuples(_EXPRS, inner).map(lambda p: [f"while {p[0]}:", *_indent(p[1])]),
        st.tuples(_NAMES, inner, inner).map(lambda p: [f"for {p[0]} in range(n):", *_indent(p[1]), "else:",
                                                       *_indent(p[2])]),
    )
    return st.lists(st.one_of(leaf, compound), min_size=1, max_size=4).map(
        lambda parts: [line for p in parts for line in p])


@settings(max_examples=300, deadline=None)
@given(_block(3))
def test_carried_composed_from_statements_is_one_pass_over_the_body(lines: list[str]) -> None:
    """:class:`~opdesign.validate.analysis.codeorder.Carried` (each statement summarised once, shared between
    the loops of the tree) names what one :class:`Order` pass over each loop body names."""
    tree = ast.parse("\n".join(lines))
    summaries = Carried()
    loops = [n for n in ast.walk(tree) if isinstance(n, (ast.For, ast.While))]
    for loop in reversed(loops):  # inner loops first, so outer ones reuse their summaries
        assert summaries.of(loop) == _carried_by_one_pass(loop), ast.unparse(loop)


def test_carried_counts_a_name_only_both_branches_bind() -> None:
    loop = ast.parse("for kj in range(n):\n    if kj == 0:\n        m = m_blk\n    else:\n        m = f(m)\n"
                     "    if kj == 0:\n        o = 1\n    o = g(o)\n"
                     "    if kj == 0:\n        p = 1\n    else:\n        p = 2\n    p = g(p)\n").body[0]
    assert Carried().of(loop) == {"m", "o"} == _carried_by_one_pass(loop)


_KERNEL = ("import pypto\n\n\n@pypto.frontend.jit()\ndef k(q: pypto.Tensor((S, D), pypto.DT_BF16)):\n"
           "    o = pypto.full([S, D], 0.0, pypto.DT_FP32)\n"
           "    for kj in pypto.loop(4, name='LOOP_kv'):\n"
           "        o = pypto.cast(pypto.add(o, q), pypto.DT_BF16)\n")


def test_the_kept_flow_walk_gives_each_node_the_state_before_it() -> None:
    """The walk is listed once per program; each node keeps the state before it (a later binding does
    not show through), and a second reader gets the same steps."""
    from opdesign.validate.analysis import codeflow
    from opdesign.validate.parse.kernel_source import read_kernel

    program = read_kernel(_KERNEL).program
    steps = list(codeflow.walk(program))
    dtypes = [(node.line, None if state.get("o") is None else state.get("o").dtype) for node, _l, state, _f in steps]
    assert dtypes == [(1, None), (5, None), (6, None), (7, "DT_FP32"), (8, "DT_FP32")]
    node, _loops, state, flow = steps[4]
    assert flow.value(node.stmt.value, state).dtype == "DT_BF16"  # the cast, evaluated in the state before it
    assert list(codeflow.walk(program)) == steps
    assert all(a is b for a, b in zip(codeflow.walk(program), steps, strict=True))


def test_a_long_program_is_walked_afresh_not_kept() -> None:
    """Past KEEP_NODES nodes the walk keeps no state copies (they grow as nodes x names), and the rules
    still see each node's facts: the bf16 accumulator at the end of a long kernel is found."""
    from opdesign.validate.analysis import codeflow
    from opdesign.validate.engine import validate_kernel_text
    from opdesign.validate.parse.kernel_source import read_kernel

    filler = "".join(f"    x{i} = pypto.full([S, D], 0.0, pypto.DT_FP32)\n" for i in range(codeflow.KEEP_NODES))
    text = _KERNEL.replace("    o = pypto.full", filler + "    o = pypto.full")
    program = read_kernel(text).program
    assert sum(1 for _ in program.walk()) > codeflow.KEEP_NODES
    for _step in codeflow.walk(program):
        pass
    assert program._flowed is None
    line = text.splitlines().index("        o = pypto.cast(pypto.add(o, q), pypto.DT_BF16)") + 1
    found = [(f.rule, f.line) for f in validate_kernel_text(text).findings if f.rule == "OD-KN-03"]
    assert found == [("OD-KN-03", line)]
