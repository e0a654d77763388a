"""Pseudocode rules: the fenced code of the pseudocode chapter, read as a statement tree.

Sources: SK-01's configuration (combine_axis), AT-21
(sub-graph scopes), C-LOOP-05 (unroll), C-SYM-06 / C-LOOP-02 (range bounds),
C-SYM-07 (view shapes); the skeletons' own rules live in their packages. The KV-tile loop is the
innermost loop around the first matmul, the Q-tile loop the loop directly around it.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from opdesign.plan import checks
from opdesign.validate.analysis import astnodes
from opdesign.validate.analysis import blockdata as bd
from opdesign.validate.analysis.scopes import scopes
from opdesign.validate.analysis.values import DYNAMIC, Values, declared_axes, is_dynamic, read_values
from opdesign.validate.api import Context, Hit, rule
from opdesign.validate.parse.pseudocode import (
    Node,
    Program,
    dotted,
    int_value,
    keyword,
    unparse,
)


def _stores(stmt: ast.AST | None) -> set[str]:
    """Names a statement stores (its own header only for a compound statement)."""
    if stmt is None:
        return set()
    if isinstance(stmt, (ast.For, ast.AsyncFor)):
        parts = [stmt.target]
    elif isinstance(stmt, (ast.With, ast.AsyncWith)):
        parts = [i.optional_vars for i in stmt.items if i.optional_vars is not None]
    elif isinstance(stmt, (ast.If, ast.While)):
        parts = [stmt.test]
    elif isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return {stmt.name}
    else:
        parts = [stmt]
    return {n.id for p in parts for n in astnodes.walk(p) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}


def _stored_below(nodes: list[Node]) -> set[str]:
    out: set[str] = set()
    stack = list(nodes)
    while stack:
        node = stack.pop()
        out |= _stores(node.stmt)
        stack += node.body
    return out


def reaching_bindings(program: Program) -> dict[int, dict[str, ast.expr]]:
    """For each Python ``range`` loop node: the names whose one binding in force there is known (a plain
    ``name = value`` earlier in the same block or an enclosing one, not rebound in a branch or a loop body
    since), with that value. A name rebound to a static value after a dynamic one (``n = seq // T`` ...
    ``n = 4``) is then read by the binding in force (C-SYM-06: rebinding clears the symbolic mark)."""
    out: dict[int, dict[str, ast.expr]] = {}

    def visit(nodes: list[Node], env: dict[str, ast.expr]) -> None:
        for node in nodes:
            if node.loop_kind == "range" and env:
                out[id(node)] = dict(env)
            s = node.stmt
            for name in _stores(s):
                env.pop(name, None)
            if isinstance(s, ast.Assign) and all(isinstance(t, ast.Name) for t in s.targets):
                for t in s.targets:
                    env[t.id] = s.value
            if node.body:
                below = _stored_below(node.body)
                inner = {} if node.kind == "def" else {k: v for k, v in env.items()
                                                       if not (node.loop_kind or node.kind == "while")
                                                       or k not in below}
                visit(node.body, inner)
                for name in below:
                    env.pop(name, None)

    visit(program.nodes, {})
    return out

@rule("OD-PC-01", "error", "pseudocode", "CANNBot DESIGN.md template (pseudocode chapter)",
      "the pseudocode chapter is empty: no code block and no text",
      bad='## Pseudocode',
      good=('## Pseudocode\n\n```python\n@pypto.frontend.jit()\ndef my_kernel(q, k, v, attn_out):\n'
            '    pypto.experimental.set_operation_options(combine_axis=True)\n```'), kind='markdown')
def check_fence(ctx: Context) -> Iterator[Hit]:
    """The pseudocode chapter holds the kernel as fenced code (```python), so that the loop nest,
    TileShape calls, scopes and state can be checked. Among several fences the one defining a
    ``jit``-decorated function is used, else the longest. A chapter of plain text (a ```text block
    or paragraphs, as the CANNBot template writes it) is not an error: the code rules are skipped
    and OD-PC-06 says so. Only an empty chapter is reported."""
    heading = ctx.doc.chapter_heading("pseudocode")
    if heading is not None and ctx.program is None:
        yield Hit(heading.line, "the pseudocode chapter is empty: write the kernel as ```python (or the steps as text)")


@rule("OD-PC-06", "info", "pseudocode", "CANNBot DESIGN.md template (plain-text pseudocode)",
      "the pseudocode chapter holds no Python code: the code rules were skipped",
      bad='## Pseudocode\n\n```text\nfor each KV tile: C1, online softmax, C2, rescale\n```',
      good=('## Pseudocode\n\n```python\n@pypto.frontend.jit()\ndef my_kernel(q, k, v, attn_out):\n'
            '    pypto.experimental.set_operation_options(combine_axis=True)\n```'), kind='markdown')
def check_prose(ctx: Context) -> Iterator[Hit]:
    """The CANNBot template writes the pseudocode as plain text (a ```` ```text ```` block); a design
    may also write it as paragraphs. Such a chapter is valid, but there is no loop nest, TileShape
    call or scope to check: no rule of the pseudocode family runs, and this info lists them, so that
    skipped never reads as passed. Python code in any fence of the chapter (```` ```python ````, or an
    untagged / text block that parses as Python statements) makes the chapter code again.
    Emitted by the engine (:mod:`opdesign.validate.parse.prose`)."""
    return iter(())


@rule("OD-PC-02", "info", "pseudocode", "opdesign validate (pseudocode reading)",
      "the pseudocode is not valid Python; it was checked line by line by indentation",
      bad="for kv_idx in pypto.loop(kv_tiles, name='kv_tile'):\n    oi = <update>",
      good=("for kv_idx in pypto.loop(kv_tiles, name='kv_tile'):\n"
            '    oi = pypto.add(pypto.mul(alpha, oi), pypto.mul(beta, oij))'))
def check_syntax(ctx: Context) -> Iterator[Hit]:
    """Pseudocode that Python's ``ast`` cannot parse is read by indentation: each line is parsed on its
    own where it can be. The rules still run, but a statement that does not parse is invisible to them."""
    if ctx.program is not None and ctx.program.syntax_error:
        line, message = ctx.program.syntax_error
        yield Hit(line, f"pseudocode is not valid Python ({message}); read by indentation instead")


@rule("OD-PC-03", "error", "pseudocode", "AT-21-R1, AT-21-R3, AT-21-R4",
      "sg_set_scope(n) is not closed with sg_set_scope(-1) before another scope, a pypto.loop boundary or "
      "the end of the function (a matmul inside the scope: a warning)",
      bad=('pypto.set_pass_options(sg_set_scope=2)\nlij = pypto.sum(pij, dim=-1, keepdim=True)\n'
           "for kv_idx in pypto.loop(kv_tiles, name='kv_tile'):\n    oij = pypto.matmul(pij_c, vj, pypto.DT_FP32)"),
      good=('pypto.set_pass_options(sg_set_scope=2)\nlij = pypto.sum(pij, dim=-1, keepdim=True)\n'
            'pypto.set_pass_options(sg_set_scope=-1)\n'
            "for kv_idx in pypto.loop(kv_tiles, name='kv_tile'):\n    oij = pypto.matmul(pij_c, vj, pypto.DT_FP32)"))
def check_scopes(ctx: Context) -> Iterator[Hit]:
    """Every scope opened with ``pypto.set_pass_options(sg_set_scope=n)`` (or the card notation
    ``sg_set_scope(n)``) is closed by scope ``-1`` before another scope opens, before a ``pypto.loop``
    boundary is crossed (AT-21-R4) and by the end of the function; reported as an error at the line
    that opened it. A Python ``range`` loop inside a scope (the page gather) is unrolled while tracing
    and crosses no boundary.

    A matmul inside an open scope is a warning, not an error: the card (AT-21-R1) keeps matmuls outside
    any scope (a cube op in a vector scope failed with F41007 OP_SCOPE_ERROR), while real kernels for
    the Ascend 950 open one mixed scope around C1, V1 and C2 (hicann/pypto
    ``flash_attention_mha_impl.py`` scope 5001, ``sparse_flash_attention_quant_impl.py`` scope 20001,
    under ``if pypto.platform.npuarch == 'DAV_3510'``).

    A function whose only scope is set in its own body outside any loop and closed there after the
    loops (or never) keeps that scope over its whole body on purpose: hicann/pypto's own system tests of cube-vector fusion
    (``python/tests/st/operation/matmul/test_matmul_l0c2ub.py``, ``test_matmul_ub2l1.py``, added after
    0.2.0) open ``sg_set_scope(10000)`` at the top of the kernel around a ``pypto.loop`` of matmul + add
    and close it after the loop. AT-21-R4's consequence is that such a scope is ignored or merges unrelated
    work, not a failure to compile, so this is a warning; a scope among others, or one opened inside a
    loop, that crosses a boundary is an error. SK-02 keeps C1 + V1 + C2 in one
    ``sg_set_scope(2)`` sub-graph by design (SK-02 configuration), so its matmuls are not reported."""  # noqa: E501 (the rule's explanation, printed as written)
    if ctx.program is None:
        return
    sk = bd.rules_skeleton(ctx)
    info = scopes(ctx.program, cube_in_scope=sk is not None and sk.cube_in_vector_scope)
    for line, value, why in info.unclosed:
        if line in info.whole_function:
            yield Hit(line, f"sg_set_scope({value}) is not closed with sg_set_scope(-1) {why}; it is the function's "
                            "only scope, opened in its body and closed there after the loops (or never): kept over "
                            "the whole function on purpose, as framework tests of cube-vector fusion do; AT-21-R4: "
                            "a scope across a pypto.loop is ignored or merges unrelated work", level="warning")
            continue
        yield Hit(line, f"sg_set_scope({value}) is not closed with sg_set_scope(-1) {why}")
    for line, value, opened in info.cube_in_scope:
        yield Hit(line, f"matmul inside sg_set_scope({value}) opened at line {opened}: AT-21-R1 keeps cube ops outside "
                        "any scope (F41007), real Ascend 950 kernels (DAV_3510) use one mixed scope; check the target",
                  level="warning")


@rule("OD-PC-04", "error", "pseudocode", "SK-01 configuration (combine_axis, required)",
      "set_operation_options(combine_axis=True) is set after the kernel's first PyPTO operation (never set: a warning)",
      bad=('@pypto.frontend.jit()\ndef my_kernel(q, k, v, attn_out):\n'
           '    q_s = pypto.mul(q, SCALE)\n'
           '    pypto.experimental.set_operation_options(combine_axis=True)\n'
           "    for b_idx in pypto.loop(batch, name='batch'):\n        pypto.set_vec_tile_shapes(16, 128)"),
      good=('@pypto.frontend.jit()\ndef my_kernel(q, k, v, attn_out):\n'
            '    head_dim = q.shape[-1]\n'
            '    pypto.experimental.set_operation_options(combine_axis=True)\n'
            '    q_2d = pypto.reshape(q, [ROWS, HEAD_DIM])\n'
            "    for b_idx in pypto.loop(batch, name='batch'):\n        pypto.set_vec_tile_shapes(16, 128)"),
      attention_only=True)
def check_combine_axis(ctx: Context) -> Iterator[Hit]:
    """``pypto.experimental.set_operation_options(combine_axis=True)`` is set before the kernel's first
    PyPTO operation (it inlines tail-axis broadcasts such as ``[M, N] * [M, 1]``). The kernel is the
    ``jit``-decorated function, else the first function with a loop. The option is part of the
    attention skeletons' configuration (SK-01, SK-02, SK-16 cards); real layernorm, softmax and matmul
    kernels do without it (hicann/pypto ``examples/``), so the rule is skipped on a design that is not
    attention.

    The card says "first statement"; real kernels compute Python values first (``head_dim =
    q.shape[2]``, tile constants, 2-D ``reshape`` of the inputs) and set the option after them
    (hicann/pypto ``flash_attention_mha_impl.py``), which changes nothing, so statements without a
    computing PyPTO operation (assignments, TileShape and pass options, ``reshape`` / ``view``, bare buffer
    allocations such as ``pypto.tensor([d, d], pypto.DT_FP32)``, not a filling ``full``) may come before it. Set after an operation: an error.
    Not set at all: a warning, since the card requires it but real attention kernels run without it
    (hicann/pypto ``flash_attention_mha_grad_impl.py``, ``examples/.../attention.py``)."""  # noqa: E501 (the rule's explanation, printed as written)
    program = ctx.program
    if program is None:
        return
    if program.kernel is None:
        yield Hit(program.fence.first_line, "no kernel function: combine_axis=True must open the jit body")
        return
    body = [n for n in program.kernel.body
            if not (isinstance(n.stmt, ast.Expr) and isinstance(n.stmt.value, ast.Constant)
                    and isinstance(n.stmt.value.value, str))]
    calls = [(c, n) for n, _loops in program.walk(body) for c in n.calls()]
    first_op = next((program.call_line(c, n) for c, n in calls if _is_operation(c)), None)
    where = next((program.call_line(c, n) for c, n in calls if _sets_combine_axis(c)), None)
    if where is None:
        line = body[0].line if body else program.kernel.line
        yield Hit(line, "the kernel never sets set_operation_options(combine_axis=True): the SK card requires it "
                        "(real kernels without tail-axis broadcasts run without it)", level="warning")
    elif first_op is not None and first_op < where:
        yield Hit(where, f"combine_axis=True is set after the first PyPTO operation (line {first_op}): "
                         "set it before any operation of the kernel body")


#: pypto calls that configure or steer instead of compute: they may come before ``combine_axis``.
_CONFIG_PREFIXES = ("set_", "get_", "is_")
#: + layout-only ops, and bare allocations (a buffer allocated, not filled, before the option holds no
#: broadcast; ``full`` / ``zeros`` compute their fill and count as operations)
_CONTROL = frozenset({"loop", "loop_unroll", "cond", "dynamic", "jit", "reshape", "view", "tensor", "empty"})


def _sets_combine_axis(call: ast.Call) -> bool:
    value = keyword(call, "combine_axis")
    return isinstance(value, ast.Constant) and value.value is True


def _is_operation(call: ast.Call) -> bool:
    """A ``pypto.*`` call that computes: not a setting, a loop, a condition or a layout-only ``reshape`` /
    ``view`` (no broadcast; real kernels reshape their inputs to 2-D before setting the option)."""
    name = dotted(call.func)
    if not name.startswith(("pypto.", "pp.")) or _sets_combine_axis(call):
        return False
    last = name.rpartition(".")[2]
    return not last.startswith(_CONFIG_PREFIXES) and last not in _CONTROL


@rule("C-LOOP-05", "warning", "pseudocode", "C-LOOP-05",
      "unroll_list has several factors but no 1 (not every iteration count is covered), or sits on a loop that "
      "is not the innermost",
      bad=("for kv_idx in pypto.loop(kv_tiles, name='kv_tile', unroll_list=[4, 2]):\n"
           '    kj = pypto.view(k, [KV_TILE, HEAD_DIM], [kv_idx * KV_TILE, 0])'),
      good=("for kv_idx in pypto.loop(kv_tiles, name='kv_tile', unroll_list=[1]):\n"
            '    kj = pypto.view(k, [KV_TILE, HEAD_DIM], [kv_idx * KV_TILE, 0])'))
def check_unroll(ctx: Context) -> Iterator[Hit]:
    """Start from one unroll factor (the block's ``unroll_list`` holds one value, or none when the design
    unrolls no loop, e.g. SK-02) and put ``unroll_list`` on the innermost ``pypto.loop`` only (a static
    Python ``range`` inside, e.g. the AT-17 page gather, is unrolled at trace time and does not count).
    In the pseudocode a list with several factors is what tuning leaves (real kernels ship
    ``unroll_list=[8, 4, 2, 1]``, hicann/pypto ``glm_attention.py``); C-LOOP-05 asks such a list to
    cover every iteration count, which it does when it holds the factor 1, so only a multi-value list
    without 1 (``[4, 2]``), an empty list or a bare number is reported. A list passed in a name (a
    kernel parameter) is not judged."""
    if ctx.block is not None:
        yield from bd.hits(ctx, checks.single_unroll(ctx.block))
    if ctx.program is None:
        return
    for node, _loops in ctx.program.walk():
        it = getattr(node.stmt, "iter", None)
        value = keyword(it, "unroll_list") if isinstance(it, ast.Call) else None
        if value is None:
            continue
        if isinstance(value, (ast.List, ast.Tuple, ast.Set)):
            factors = [int_value(e, ctx.program.constants) for e in value.elts]
            if not factors:
                yield Hit(node.line, f"unroll_list={ast.unparse(value)} is empty: give one factor")
            elif len(factors) > 1 and 1 not in factors:
                yield Hit(node.line, f"unroll_list={ast.unparse(value)} has several factors but no 1, so some "
                                     "iteration counts have no matching factor: start from one factor")
        elif isinstance(value, ast.Constant):
            yield Hit(node.line, f"unroll_list={ast.unparse(value)} is not a list: give one factor, e.g. [1]")
        inner = [c for c, _l in ctx.program.walk(node.body) if c.loop_kind in ("pypto.loop", "loop_unroll")]
        if inner:
            yield Hit(node.line, f"unroll_list on a loop that is not the innermost pypto.loop (line {inner[0].line})")


@rule("C-SYM-06", "error", "pseudocode", "C-SYM-06, C-LOOP-02",
      "Python range over a symbolic bound",
      bad=('kv_tiles = (seq_kv + KV_TILE - 1) // KV_TILE   # depends on seq_kv\nfor kv_idx in range(kv_tiles):\n'
           '    kj = pypto.view(k, [KV_TILE, HEAD_DIM], [kv_idx * KV_TILE, 0])'),
      good=('kv_tiles = (seq_kv + KV_TILE - 1) // KV_TILE\n'
            "for kv_idx in pypto.loop(kv_tiles, name='kv_tile'):   # or range(KV_TILES), a constant\n"
            '    kj = pypto.view(k, [KV_TILE, HEAD_DIM], [kv_idx * KV_TILE, 0])'))
def check_range_bounds(ctx: Context) -> Iterator[Hit]:
    """A Python ``range`` unrolls while the kernel is traced, so its bound is a compile-time int. A bound
    that is dynamic (a ``pypto.loop`` index, a runtime length or argument, a value read out of a
    tensor, a ``pypto.DYNAMIC`` axis: see :mod:`opdesign.validate.analysis.values`) needs ``pypto.loop``. Int
    literals, constants of any case (``kv_tiles = 4``, ``block_num = s2_tile // 128``), and the factor
    that ``for idx, factor in pypto.loop_unroll(...)`` yields (fixed within its path, C-LOOP-05) are
    static; a bound the code cannot decide (the ``.shape`` of a tensor whose signature does not say
    whether the axis is dynamic) is not reported."""
    if ctx.program is None:
        return
    reaching = reaching_bindings(ctx.program)
    declared = declared_axes(ctx.front)
    for node, _loops in ctx.program.walk():
        if node.loop_kind == "range":
            over = reaching.get(id(node), {})
            if over:  # a name rebound before the loop (``n = 4``): the binding in force decides, not every one
                try:
                    scope = read_values(ctx.program, declared).at(node)
                    here = Values(bindings={k: [v] for k, v in over.items()}, dynamic_dims=scope.dynamic_dims,
                                  parent=scope)
                    bad = [a for a in node.stmt.iter.args if here.kind(a) == DYNAMIC]
                except RecursionError:
                    bad = []
            else:
                bad = [a for a in node.stmt.iter.args if is_dynamic(ctx.program, a, declared, node)]
            if bad:
                yield Hit(node.line, f"range over symbolic bound {', '.join(unparse(a) for a in bad)}: use pypto.loop")


@rule("C-SYM-07", "error", "pseudocode", "C-SYM-07 (AT-20-R5)",
      "pypto.view shape is not a list of integer literals or constants",
      bad='kj = pypto.view(k, [kv_valid, HEAD_DIM], [b_idx, kv_h, kv_off, 0])',
      good='kj = pypto.view(k, [KV_TILE, HEAD_DIM], [b_idx, kv_h, kv_off, 0], valid_shape=[kv_valid, HEAD_DIM])')
def check_view_shapes(ctx: Context) -> Iterator[Hit]:
    """The ``shape`` of ``pypto.view`` (second argument or ``shape=``) is ``List[int]``: int literals and
    constants (``Q_TILE``, or a lower-case ``q_tile = 128``; static values as
    :mod:`opdesign.validate.analysis.values` reads them, static axes of the signature included). Symbols (valid
    lengths, offsets, loop indices) go into the offsets and ``valid_shape``. Only values known to be
    dynamic are reported: a ``.shape`` item of an axis the code does not declare is a Python int in
    PyPTO 0.2.0 when the axis is static."""
    if ctx.program is None:
        return
    for call, node, _loops in ctx.program.calls():
        if dotted(call.func) not in ("pypto.view", "view"):
            continue
        shape = call.args[1] if len(call.args) > 1 else keyword(call, "shape")
        if shape is None:
            continue
        elts = shape.elts if isinstance(shape, (ast.List, ast.Tuple)) else [shape]
        bad = [e for e in elts if is_dynamic(ctx.program, e, declared_axes(ctx.front), node)]
        if bad:
            yield Hit(ctx.program.call_line(call, node),
                      f"pypto.view shape uses {', '.join(unparse(e) for e in bad)}: shapes are compile-time ints")
