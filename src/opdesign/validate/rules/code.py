"""Code rules (OD-KN-*): checks on kernel code, a kernel ``.py`` or the pseudocode chapter alike.

They walk the same :class:`~opdesign.validate.parse.pseudocode.Program` as the pseudocode rules, with the
facts of :mod:`opdesign.validate.analysis.codeflow` (dtypes, shapes, loop dependences, symbolic scalars), and
report at the line of the offending statement or call. Each runs on kernel files (``kernel=True``).
Sources: SK-01-R1 / C-TILE-04 (a TileShape per stage), AT-01-R1 / C-API-05 (FP32 state), C-SYM-01
(symbolic scalars), AT-20 (views per batch and head), Python's scoping (a name read before it is bound).
OD-KN-07 (SK-01's loop order) lives in :mod:`opdesign.skeletons.sk01.rules_code`.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from opdesign.validate.analysis import blockdata as bd
from opdesign.validate.analysis import codeflow
from opdesign.validate.analysis.attention_chain import has_attention_chain
from opdesign.validate.analysis.codeorder import Carried, Order, defined_names, functions, module_names
from opdesign.validate.analysis.loops import loop_role, loop_var, parsed_program
from opdesign.validate.api import Context, Hit, rule, skeletons
from opdesign.validate.parse.pseudocode import Program, call_name, dotted, keyword, unparse

#: Vector ops that open a vector stage after a matmul (the op needs a vector TileShape).
VECTOR_OPS = frozenset({"mul", "amax", "amin", "sub", "exp", "sum", "cast", "div", "maximum", "minimum", "add",
                        "where", "neg", "reciprocal"})


@rule("OD-KN-01", "error", "pseudocode", "opdesign validate (kernel source)",
      "the kernel .py is not valid Python",
      bad="import pypto\n\n\n@pypto.frontend.jit()\ndef k(q, out):\n"
          "    for b in pypto.loop(4, name='b')\n        pass",
      good="import pypto\n\n\n@pypto.frontend.jit()\ndef k(q, out):\n"
           "    for b in pypto.loop(4, name='b'):\n        pass",
      kind="kernel", kernel=True)
def check_kernel_syntax(ctx: Context) -> Iterator[Hit]:
    """A kernel ``.py`` given to ``opdesign validate`` (or found in an operator folder) parses as Python;
    otherwise this is its only finding, at the syntax error's line, and no other rule runs on it.
    (Pseudocode in DESIGN.md that does not parse is read by indentation instead: OD-PC-02.)"""
    source = ctx.kernel
    if source is not None and source.syntax_error is not None:
        line, message = source.syntax_error
        yield Hit(line, f"the kernel is not valid Python ({message}); no rule was run")


@rule("OD-KN-02", "error", "pseudocode", "SK-01-R1, C-TILE-04 (a TileShape per stage)",
      "one set_cube_tile_shapes serves matmuls of different shapes (each matmul stage sets its own TileShape)",
      bad=("pypto.set_cube_tile_shapes([128, 128], [128, 128], [128, 128])\n"
           "s = pypto.matmul(pypto.view(q, [Q_TILE, HEAD_DIM], [0, 0]), pypto.view(k, [KV_TILE, HEAD_DIM], [0, 0]),"
           " pypto.DT_FP32, b_trans=True)\n"
           "p = pypto.cast(pypto.exp(s), pypto.DT_BF16)\n"
           "o = pypto.matmul(p, pypto.view(v, [KV_TILE, HEAD_DIM], [0, 0]), pypto.DT_FP32)"),
      good=("pypto.set_cube_tile_shapes([128, 128], [128, 128], [128, 128])\n"
            "s = pypto.matmul(pypto.view(q, [Q_TILE, HEAD_DIM], [0, 0]), pypto.view(k, [KV_TILE, HEAD_DIM], [0, 0]),"
            " pypto.DT_FP32, b_trans=True)\n"
            "p = pypto.cast(pypto.exp(s), pypto.DT_BF16)\n"
            "pypto.set_cube_tile_shapes([128, 128], [128, 256], [128, 128])\n"
            "o = pypto.matmul(p, pypto.view(v, [KV_TILE, HEAD_DIM], [0, 0]), pypto.DT_FP32)"),
      kernel=True)
def check_tile_shape_per_matmul(ctx: Context) -> Iterator[Hit]:
    """Each ``set_cube_tile_shapes`` serves the matmuls that follow it up to the next one, in textual
    order. Two of them with different ``(M, K, N)`` (operand shapes from ``view`` / ``reshape`` /
    allocations and the ``a_trans`` / ``b_trans`` flags; constants compared by value) share a TileShape
    sized for one stage: C1 ``Q K^T`` and C2 ``P V`` of attention differ in K and N, so one global cube
    TileShape is wrong for one of them. Matmuls of the same shape may share one (SK-16's ``S`` and
    ``dP``). A matmul with no ``set_cube_tile_shapes`` before it at all is reported too. Matmuls whose
    operand shapes are unknown are not compared. In SK-01 code (or code of unknown skeleton) a matmul
    that runs under a vector TileShape, or none, is SK-01-R1's finding, not repeated here; for other
    skeletons this rule reports it, and a vector op right after a matmul with no
    ``set_vec_tile_shapes`` since that matmul.

    Shapes are compared by value under the kernel's int constants (module constants, and names bound to
    one int everywhere: a factory's ``q_tile = 128`` equals ``kv_tile = 128``). On a kernel file that
    names no skeleton and has no C1 -> V1 -> C2 chain (:mod:`opdesign.validate.analysis.attention_chain`), matmuls
    of different shapes may share one TileShape (a unit test of two matmuls): only a matmul with no
    TileShape at all is reported there.

    Applies to kernel files, hand-written designs (no ``opdesign:`` block) and designs whose block
    names the release they target (``pypto: 0.2.0``), as OD-PC-05: the SK-02 card's notation sets the
    TileShapes once outside the loops, which PyPTO 0.2.0 does not do (SK-02-R5)."""
    program = parsed_program(ctx)
    if program is None or (ctx.block is not None and ctx.block.get("pypto") is None):
        return
    vec_rule = bd.rules_skeleton(ctx) is not skeletons().fallback  # the fallback (SK-01) has SK-01-R1 for vector stages
    # stages of different shapes exist in attention: a kernel file without the C1 -> V1 -> C2 chain (two
    # matmuls of a unit test under one TileShape that covers both) is not judged on sharing
    stages = ctx.kernel is None or ctx.declared_skeleton is not None or has_attention_chain(program)
    group: list[tuple[tuple[str, ...] | None, int]] | None = None
    need_vec = vec_since_cube = False
    for node, _loops, state, flow in codeflow.walk(program):
        for call in node.calls():
            name = call_name(call)
            if name == "set_cube_tile_shapes":
                group = []
                need_vec = vec_since_cube = False
            elif name == "set_vec_tile_shapes":
                need_vec, vec_since_cube = False, True
            elif name == "matmul" and dotted(call.func).startswith("pypto."):
                line = program.call_line(call, node)
                vec_before = vec_since_cube
                # SK-01-R1 already reports a matmul under a vector TileShape (or none) in SK-01 code
                r1_reports = not vec_rule and (group is None or vec_before)
                mkn = flow.matmul_mkn(call, state)
                key = flow.dims_key(mkn) if mkn is not None else None
                other = next(((k, at) for k, at in group or [] if k is not None and key is not None and k != key),
                             None)
                if r1_reports:
                    pass
                elif group is None:
                    yield Hit(line, "matmul with no set_cube_tile_shapes before it")
                elif vec_rule and vec_before:
                    yield Hit(line, "matmul runs under the vector TileShape set since the last "
                                    "set_cube_tile_shapes: set one before this stage")
                elif other is not None and stages:
                    yield Hit(line, f"matmul (M, K, N) = ({', '.join(key)}) shares the set_cube_tile_shapes of the "
                                    f"matmul at line {other[1]} ({', '.join(other[0])}): set one before each stage")
                group = (group or []) + [(key, line)]
                need_vec = vec_rule
            elif need_vec and name in VECTOR_OPS and dotted(call.func).startswith("pypto."):
                need_vec = False
                yield Hit(program.call_line(call, node), f"vector op {name} after a matmul runs on the cube "
                                                         "TileShape: set_vec_tile_shapes before the vector stage")


def argument(call: ast.Call, position: int, name: str | None) -> ast.expr | None:
    """The argument at ``position``, else the keyword ``name`` (``pypto.view(input=t, shape=s, offsets=o)``),
    else None: keyword-only calls never index past the positional arguments."""
    if len(call.args) > position and not any(isinstance(a, ast.Starred) for a in call.args[:position + 1]):
        return call.args[position]
    return keyword(call, name) if name is not None else None


def _targets(stmt: ast.stmt) -> list[tuple[str, bool]]:
    """(name, through a subscript) of each assignment target."""
    out = []
    targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target] if isinstance(
        stmt, (ast.AugAssign, ast.AnnAssign)) else []
    for t in targets:
        if isinstance(t, ast.Name):
            out.append((t.id, False))
        elif isinstance(t, ast.Subscript) and isinstance(t.value, ast.Name):
            out.append((t.value.id, True))
    return out


def accumulators(program: Program) -> dict[str, set[int]]:
    """Loop-carried accumulators: name -> ids of the innermost loops that carry it and update it from
    itself (``o = pypto.add(pypto.mul(o, alpha), ...)``, ``dq_acc[:] = pypto.add(dq_acc, blk)``,
    ``acc += x``); a same-iteration rebinding (``o_fin = pypto.cast(o_fin, ...)``) is not one."""
    out: dict[str, set[int]] = {}
    carried_by: dict[int, set[str]] = {}
    summaries = Carried()
    # what each name was computed from, transitively (``m_new = pypto.maximum(m_run, m_blk)``;
    # ``o_old = pypto.view(o_run, ...)``): ``m_run[:] = m_new`` updates m_run from itself
    source: dict[str, set[str]] = {}
    for node, loops in program.walk():
        s = node.stmt
        if not isinstance(s, (ast.Assign, ast.AugAssign)):
            continue
        read = codeflow.names_in(s.value)
        read |= {n for r in read for n in source.get(r, ())}
        for t in (s.targets if isinstance(s, ast.Assign) else [s.target]):
            if isinstance(t, ast.Name):
                source[t.id] = set(read)
        if not loops:
            continue
        for name, _sub in _targets(s):
            if name not in read and not isinstance(s, ast.AugAssign):
                continue
            for loop in reversed(loops):
                if id(loop) not in carried_by:
                    carried_by[id(loop)] = summaries.of(loop.stmt)
                if name in carried_by[id(loop)]:
                    out.setdefault(name, set()).add(id(loop))
                    break
    return out


@rule("OD-KN-03", "error", "pseudocode", "AT-01-R1, C-API-05, SK-01-R6, SK-16 (FP32 gradient accumulators)",
      "a loop-carried accumulator (online-softmax state, dQ/dK/dV) holds a bf16/fp16 value",
      bad=("o_run = pypto.full([Q_TILE, HEAD_DIM], 0.0, pypto.DT_FP32)\n"
           "for kj in pypto.loop(kv_tiles, name='LOOP_kv'):\n"
           "    o_blk = pypto.matmul(p_c, v_t, pypto.DT_FP32)\n"
           "    o_run = pypto.cast(pypto.add(o_run, o_blk), pypto.DT_BF16)"),
      good=("o_run = pypto.full([Q_TILE, HEAD_DIM], 0.0, pypto.DT_FP32)\n"
            "for kj in pypto.loop(kv_tiles, name='LOOP_kv'):\n"
            "    o_blk = pypto.matmul(p_c, v_t, pypto.DT_FP32)\n"
            "    o_run = pypto.add(o_run, o_blk)\n"
            "o_out = pypto.cast(o_run, pypto.DT_BF16)"),
      kernel=True)
def check_fp32_accumulators(ctx: Context) -> Iterator[Hit]:
    """A value updated from itself inside a loop (the running max / sum / output of online softmax,
    a dQ / dK / dV accumulator) is FP32 everywhere it lives: its allocation (``pypto.tensor`` /
    ``full`` / ``zeros``), its first-tile binding (``o_run = o_blk``) and every update inside the loop
    that carries it. A bf16 / fp16 dtype there (an allocation, a ``cast``, a ``matmul`` result dtype,
    or an input of that dtype) rounds the state every tile. Reported at the assignment; the final
    cast of the normalised output after the loop is a different value and is fine. In a DESIGN.md the
    allocations of the accumulator names of the block (or the SK-01 card: oi, li, mi) are SK-01-R6's."""
    program = parsed_program(ctx)
    if program is None:
        return
    accs = accumulators(program)
    if not accs:
        return
    # in a design, SK-01-R6 reports the allocations of the block's (or card's) accumulator names
    r6_names = set(bd.accumulator_names(ctx)) if ctx.kernel is None else set()
    for node, loops, state, flow in codeflow.walk(program):
        s = node.stmt
        if not isinstance(s, (ast.Assign, ast.AnnAssign)) or s.value is None:
            continue
        for name, sub in _targets(s):
            if name not in accs or sub:
                continue
            inside = any(id(loop) in accs[name] for loop in loops)
            alloc = isinstance(s.value, ast.Call) and call_name(s.value) in codeflow.ALLOCATORS
            if not (inside or alloc) or (alloc and name in r6_names):
                continue
            value = flow.value(s.value, state)
            if value.dtype in codeflow.LOW_PRECISION:
                yield Hit(node.line, f"accumulator {name} gets a {value.dtype} value (loop-carried state is "
                                     "FP32; cast only the final output)")


@rule("OD-KN-04", "error", "pseudocode", "C-SYM-01 (symbolic scalars), constraints/pypto_api.yaml",
      "Python builtin min / max on a symbolic value (use x.min(y) / x.max(y) or pypto.min / pypto.max)",
      bad=("for qi in pypto.loop(q_tiles, name='LOOP_q'):\n"
           "    q_valid = min(Q_TILE, seq_q - qi * Q_TILE)"),
      good=("for qi in pypto.loop(q_tiles, name='LOOP_q'):\n"
            "    q_valid = (seq_q - qi * Q_TILE).min(Q_TILE)"),
      kernel=True)
def check_builtin_minmax(ctx: Context) -> Iterator[Hit]:
    """Python's ``min`` / ``max`` compare their arguments with ``<`` at trace time; on a symbolic scalar
    (a ``pypto.loop`` index, ``t.shape[i]``, a ``pypto.frontend.dynamic`` size, an element of an int
    tensor, or arithmetic on one) that is not a runtime minimum. PyPTO 0.2.0 has
    ``SymbolicScalar.min(other)`` / ``.max(other)`` and ``pypto.min(a, b)`` / ``pypto.max(a, b)``.
    ``min`` over compile-time ints (a Python ``range`` index, constants) is fine."""
    program = parsed_program(ctx)
    if program is None:
        return
    for node, _loops, state, flow in codeflow.walk(program):
        for call in node.calls():
            if isinstance(call.func, ast.Name) and call.func.id in ("min", "max") and call.func.id not in state.values:
                symbolic = [a for a in call.args if flow.value(a, state).symbolic]
                if symbolic:
                    yield Hit(program.call_line(call, node),
                              f"builtin {call.func.id}() on symbolic {unparse(symbolic[0])}: use "
                              f"({unparse(symbolic[0])}).{call.func.id}(...) or pypto.{call.func.id}(a, b)")


@rule("OD-KN-05", "error", "pseudocode", "AT-20 (views per batch and head), C-SYM-07",
      "a view / assemble of a batched kernel input ignores the enclosing batch or head loop index",
      bad=("@pypto.frontend.jit()\n"
           "def k(q: pypto.Tensor((B, NH, SQ, HEAD_DIM), pypto.DT_BF16)):\n"
           "    for b in pypto.loop(batch, name='LOOP_b'):\n"
           "        for h in pypto.loop(NUM_HEADS, name='LOOP_h'):\n"
           "            q_t = pypto.view(q, [1, 1, Q_TILE, HEAD_DIM], [0, h, 0, 0])"),
      good=("@pypto.frontend.jit()\n"
            "def k(q: pypto.Tensor((B, NH, SQ, HEAD_DIM), pypto.DT_BF16)):\n"
            "    for b in pypto.loop(batch, name='LOOP_b'):\n"
            "        for h in pypto.loop(NUM_HEADS, name='LOOP_h'):\n"
            "            q_t = pypto.view(q, [1, 1, Q_TILE, HEAD_DIM], [b, h, 0, 0])"),
      kernel=True)
def check_batch_head_offsets(ctx: Context) -> Iterator[Hit]:
    """Inside a batch loop or a head loop (a ``pypto.loop`` whose ``name=``, index or bound says batch
    / head: ``LOOP_b``, ``b_idx``, ``LOOP_h``, ``kv_h`` ...), a ``view`` or ``assemble`` of a kernel
    input of rank >= 3 (from its ``pypto.Tensor((...), dtype)`` annotation) or of a ``reshape`` of one
    has offsets that depend on that loop's index, directly or through assignments (``page =
    block_table[b, i]``, ``kv_h = h // GROUP``). Offsets that never depend on it read or write the
    same slice for every batch / head. Rank-2 inputs (masks, tables shared by all batches) are not
    judged; offset-list lengths are checked by OD-PC-05."""
    program = parsed_program(ctx)
    if program is None:
        return
    roles: dict[int, str | None] = {}
    for node, loops, state, flow in codeflow.walk(program):
        for loop in loops:
            if id(loop) not in roles:
                roles[id(loop)] = loop_role(loop) if loop.loop_kind in ("pypto.loop", "loop_unroll") else None
        wanted = [(loop, roles[id(loop)]) for loop in loops if roles[id(loop)] in ("batch", "head")]
        if not wanted:
            continue
        for call in node.calls():
            name = call_name(call)
            if not dotted(call.func).startswith("pypto.") or name not in ("view", "assemble"):
                continue
            tensor, offsets = ((argument(call, 0, "input"), argument(call, 2, "offsets")) if name == "view" else
                               (argument(call, 2, None), argument(call, 1, None)))  # assemble(src, offsets, dst)
            if tensor is None or offsets is None or not flow.value(tensor, state).batched:
                continue
            deps = flow.value(offsets, state).deps
            for loop, role in wanted:
                var = loop_var(loop)
                if var is not None and var not in deps:
                    yield Hit(program.call_line(call, node),
                              f"{name} of {unparse(tensor)}: offsets {unparse(offsets)} do not depend on the "
                              f"{role} index {var} (loop at line {loop.line})")


@rule("OD-KN-06", "error", "pseudocode", "Python scoping; SK-01-R2 (state initialised per Q tile)",
      "a value (e.g. loop-carried state oi / m_run) is read before its first assignment",
      bad=("for kj in pypto.loop(kv_tiles, name='LOOP_kv'):\n"
           "    o_blk = pypto.matmul(p_c, v_t, pypto.DT_FP32)\n"
           "    o_run = pypto.add(o_run, o_blk)"),
      good=("o_run = pypto.full([Q_TILE, HEAD_DIM], 0.0, pypto.DT_FP32)\n"
            "for kj in pypto.loop(kv_tiles, name='LOOP_kv'):\n"
            "    o_blk = pypto.matmul(p_c, v_t, pypto.DT_FP32)\n"
            "    o_run = pypto.add(o_run, o_blk)"),
      kernel=True)
def check_read_before_assignment(ctx: Context) -> Iterator[Hit]:
    """In evaluation order (the right-hand side before the target, a loop's bound before its body, an
    ``if`` branch before its ``else``), every name a function reads is bound before: a parameter, an
    earlier assignment or loop index, a module-level name or a builtin. Loop-carried state read in the
    KV loop but initialised only later, or never (``o_run = pypto.add(o_run, o_blk)`` as its first
    binding), fails on the first tile. ``oi[:] = x`` writes into an existing ``oi``, so it reads it.
    In DESIGN.md pseudocode (which may use names of the surrounding prose: ``batch``, ``seq_kv``)
    only names the function assigns later are reported; in a kernel ``.py`` a name bound nowhere is
    reported too. Reported at the first read of each name."""
    program = parsed_program(ctx)
    if program is None:
        return
    module = module_names(program)
    top = [n.stmt for n in program.nodes if n.stmt is not None
           and not isinstance(n.stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))]
    scopes: list[tuple[list[ast.stmt], set[str]]] = [(top, defined_names(program))]
    for fn, enclosing in functions(program):  # at any depth: a factory's kernel reads the factory's names
        args = fn.args
        params = {a.arg for a in args.posonlyargs + args.args + args.kwonlyargs}
        params |= {a.arg for a in (args.vararg, args.kwarg) if a is not None}
        scopes.append((fn.body, module | enclosing | params))
    star = "*" in program.module_bound  # ``from x import *``: a name bound nowhere may come from it
    for body, bound in scopes:
        order = Order(bound)
        for stmt in body:
            order.visit(stmt)
        seen: set[str] = set()
        for name, lineno in order.reads:
            if name in seen:
                continue
            later = order.first_bind.get(name)
            if later is None and (ctx.kernel is None or star):
                continue
            seen.add(name)
            line = program.fence.first_line + lineno - 1
            where = (f"its first assignment is at line {program.fence.first_line + later - 1}" if later is not None
                     else "it is never assigned")
            yield Hit(line, f"{name} is read before it is bound ({where})")

