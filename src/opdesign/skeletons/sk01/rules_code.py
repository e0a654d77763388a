"""SK-01's loop order on kernel code (OD-KN-07): the KV-tile loop runs inside the Q-tile loop.

Loops are told apart by :func:`opdesign.validate.analysis.loops.loop_role` (their ``name=``, index or
bound). Source: the SK-01 card's loop nest (batch -> head -> Q tile -> KV tile) and SK-01-R2.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from opdesign.skeletons.sk01 import ID
from opdesign.validate.analysis import blockdata as bd
from opdesign.validate.analysis.loops import loop_role, parsed_program
from opdesign.validate.api import Context, Hit, rule
from opdesign.validate.parse.pseudocode import Program


def _backward(program: Program) -> bool:
    """A kernel with dq / dk / dv parameters is a backward pass (its loop nest is KV-outer)."""
    fn = program.kernel.stmt if program.kernel is not None else None
    names = {a.arg.lower() for a in fn.args.args} if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) else set()
    return bool(names & {"dq", "dk", "dv"})


@rule("OD-KN-07", "error", "pseudocode", "SK-01 loop nest (batch -> head -> Q tile -> KV tile), SK-01-R2",
      "SK-01: a Q-tile loop is nested inside a KV-tile loop (the KV loop must be the inner one)",
      bad=("for kj in pypto.loop(kv_tiles, name='LOOP_kv'):\n"
           "    for qi in pypto.loop(q_tiles, name='LOOP_q'):\n"
           "        s = pypto.matmul(q_t, k_t, pypto.DT_FP32, b_trans=True)"),
      good=("for qi in pypto.loop(q_tiles, name='LOOP_q'):\n"
            "    for kj in pypto.loop(kv_tiles, name='LOOP_kv'):\n"
            "        s = pypto.matmul(q_t, k_t, pypto.DT_FP32, b_trans=True)"),
      kernel=True)
def check_sk01_loop_order(ctx: Context) -> Iterator[Hit]:
    """Online softmax carries its state (m, l, O) per Q tile across the KV tiles, so the KV-tile loop
    runs inside the Q-tile loop. A loop is a Q-tile / KV-tile loop when its ``name=``, index or bound
    says so (``LOOP_q`` / ``qi`` / ``q_tiles``; ``LOOP_kv`` / ``kj`` / ``kv_tiles``). Applies to SK-01
    and to kernels of unknown skeleton, not to backward kernels (dq / dk / dv parameters, or SK-16:
    their dK/dV pass is KV-outer by design). Reported at the inner Q-tile loop."""
    program = parsed_program(ctx)
    if program is None or bd.skeleton(ctx) not in (None, ID) or _backward(program):
        return
    for node, loops in program.walk():
        if node.loop_kind is None or loop_role(node) != "q":
            continue
        outer_kv = next((loop for loop in loops if loop_role(loop) == "kv"), None)
        if outer_kv is not None:
            yield Hit(node.line, f"Q-tile loop inside the KV-tile loop at line {outer_kv.line}: the KV loop must "
                                 "be the inner one (state is carried per Q tile)")
