"""SK-16 rules: the prohibitions of the single-pass attention backward, checked on the pseudocode.

They apply when the design is an SK-16 one (:func:`blockdata.skeleton`: the
``opdesign:`` block says ``skeleton: SK-16``, or without a block the selection
table of the decisions chapter lists SK-16). Source: the SK-16 card (``patterns/skeletons/
SK-16-attention-backward.md``, rules R2-R6) and domain.md §4.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from opdesign.golden.names import STATS_INPUT
from opdesign.skeletons.sk16 import ID
from opdesign.validate.analysis import astnodes
from opdesign.validate.analysis import blockdata as bd
from opdesign.validate.api import Context, Hit, condition, rule
from opdesign.validate.parse.pseudocode import Node, call_name, dotted, keyword

ZEROING = frozenset({"zeros", "zeros_like", "zero_"})
RUNTIME_MODULES = ("pypto.", "torch.", "np.", "numpy.")


def _kernel(ctx: Context) -> Node | None:
    if ctx.program is None or ctx.program.kernel is None or bd.skeleton(ctx) != ID:
        return None
    return ctx.program.kernel


def _kernel_calls(ctx: Context, kernel: Node) -> Iterator[tuple[ast.Call, Node, tuple[Node, ...]]]:
    for node, loops in ctx.program.walk(kernel.body):
        for call in node.calls():
            yield call, node, loops


def _params(kernel: Node) -> list[str]:
    stmt = kernel.stmt
    return [a.arg for a in stmt.args.args] if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)) else []


for _n, _text in enumerate((
        "attention backward producing dQ, dK and dV",
        "the forward softmax statistics l and m are kernel inputs",
        "matmul_count (C1 + C2 matmuls per block pair) >= the card's min_matmul_count",
), start=1):
    condition(f"SK-16-WHEN-{_n}", f"SK-16 applies when: {_text}", f"SK-16 card, applicability {_n}")


@rule("SK-16-R3", "error", "pseudocode", "SK-16-R3",
      "a batch, head, s1 or s2 loop of the SK-16 kernel is a Python for loop (or a pypto.loop without a name)",
      bad=('# opdesign: {skeleton: SK-16}\n@pypto.frontend.jit()\ndef bwd_kernel(q, k, v, o, do, l, m, dq, dk, dv):\n'
           '    for b_idx in pypto.loop(batch, name="batch"):\n'
           '        for h_idx in range(NUM_HEADS):   # unrolled while tracing\n'
           '            qi = pypto.view(q, [Q_TILE, HEAD_DIM], [b_idx, h_idx, 0, 0])'),
      good=('# opdesign: {skeleton: SK-16}\n@pypto.frontend.jit()\ndef bwd_kernel(q, k, v, o, do, l, m, dq, dk, dv):\n'
            '    for b_idx in pypto.loop(batch, name="batch"):\n'
            '        for h_idx in pypto.loop(NUM_HEADS, name="head"):\n'
            '            qi = pypto.view(q, [Q_TILE, HEAD_DIM], [b_idx, h_idx, 0, 0])'), attention_only=True)
def check_named_loops(ctx: Context) -> Iterator[Hit]:
    """Every loop of the SK-16 kernel (batch, head, s1, s2) is a ``pypto.loop`` with a ``name``.
    A Python ``for`` unrolls statically while tracing: it blocks whole-graph scheduling (a P0 case with
    256 roots hung profiling post-processing) and grows the graph with every batch and head."""
    kernel = _kernel(ctx)
    if kernel is None:
        return
    for node, _loops in ctx.program.walk(kernel.body):
        kind = node.loop_kind
        if kind is None:
            continue
        header = ast.unparse(node.stmt.iter) if node.stmt is not None else node.text
        if kind != "pypto.loop":
            yield Hit(node.line, f"Python for loop over {header}: write it as a named pypto.loop")
        elif keyword(node.stmt.iter, "name") is None:
            yield Hit(node.line, f"{header} has no name=")


@rule("SK-16-R5", "error", "pseudocode", "SK-16-R5 (AT-20)",
      "the SK-16 kernel masks with where; tails use view + valid_shape",
      bad=('# opdesign: {skeleton: SK-16}\n@pypto.frontend.jit()\ndef bwd_kernel(q, k, v, o, do, l, m, dq, dk, dv):\n'
           '    sij = pypto.where(kv_cols < kv_valid, sij, -3.4e38)'),
      good=('# opdesign: {skeleton: SK-16}\n@pypto.frontend.jit()\ndef bwd_kernel(q, k, v, o, do, l, m, dq, dk, dv):\n'
            '    kj = pypto.view(k, [KV_TILE, HEAD_DIM], [b_idx, kv_h, kv_off, 0], valid_shape=[kv_valid, HEAD_DIM])'),
      attention_only=True)
def check_no_where(ctx: Context) -> Iterator[Hit]:
    """No ``where`` in the SK-16 kernel: it forces the vector path and breaks the matmul -> atomic_add
    fusion. Tails are bounded by ``view(..., valid_shape=...)``; a causal mask uses a fill op."""
    kernel = _kernel(ctx)
    if kernel is None:
        return
    for call, node, _loops in _kernel_calls(ctx, kernel):
        if call_name(call) == "where":
            yield Hit(ctx.program.call_line(call, node),
                      "where mask in the SK-16 kernel: bound tails with view + valid_shape")


def _exp_names(ctx: Context, kernel: Node) -> set[str]:
    """Names assigned from an expression that contains an ``exp`` call."""
    out = set()
    for node, _loops in ctx.program.walk(kernel.body):
        s = node.stmt
        if isinstance(s, ast.Assign) and any(isinstance(n, ast.Call) and call_name(n) == "exp"
                                             for n in astnodes.walk(s.value)):
            out |= {t.id for t in s.targets if isinstance(t, ast.Name)}
    return out


@rule("SK-16-R2", "error", "pseudocode", "SK-16-R2",
      "the SK-16 kernel recomputes the softmax statistics l / m that its signature already carries",
      bad=('# opdesign: {skeleton: SK-16}\n@pypto.frontend.jit()\ndef bwd_kernel(q, k, v, o, do, l, m, dq, dk, dv):\n'
           '    mij = pypto.amax(sij, dim=-1, keepdim=True)   # m is an input: rebuilt'),
      good=('# opdesign: {skeleton: SK-16}\n@pypto.frontend.jit()\ndef bwd_kernel(q, k, v, o, do, l, m, dq, dk, dv):\n'
            '    mi = pypto.view(m, [Q_TILE, 1], [b_idx, h_idx, q_off, 0], valid_shape=[q_valid, 1])'),
      attention_only=True)
def check_stats_not_recomputed(ctx: Context) -> Iterator[Hit]:
    """When the kernel takes the forward row max / row sum (``l``, ``m``, ``lse``, ``softmax_max`` ...)
    it reads them: a row max (``amax``) or a row sum of exponentials (``sum`` of an ``exp``) in the
    kernel recomputes them, which costs an extra Q K^T pass per Q tile and can drift from the forward."""
    kernel = _kernel(ctx)
    if kernel is None:
        return
    stats = [p for p in _params(kernel) if STATS_INPUT.match(p.lower())]
    if not stats:
        return
    exps = _exp_names(ctx, kernel)
    for call, node, _loops in _kernel_calls(ctx, kernel):
        name = call_name(call)
        arg = call.args[0] if call.args else None
        if name in ("amax", "rowmax", "reduce_max"):
            what = "the row max m"
        elif name in ("sum", "rowsum", "reduce_sum") and arg is not None and (
                (isinstance(arg, ast.Name) and arg.id in exps)
                or any(isinstance(n, ast.Call) and call_name(n) == "exp" for n in astnodes.walk(arg))):
            what = "the row sum l"
        else:
            continue
        yield Hit(ctx.program.call_line(call, node),
                  f"{name}(...) recomputes {what}, but the kernel takes {', '.join(stats)} as inputs: "
                  "read them with view")


def _runtime_call(expr: ast.AST) -> str | None:
    for n in astnodes.walk(expr):
        if isinstance(n, ast.Call) and dotted(n.func).startswith(RUNTIME_MODULES):
            return dotted(n.func)
    return None


@rule("SK-16-R6", "error", "pseudocode", "SK-16-R6",
      "the softmax scale is a runtime tensor or kernel argument, not a compile-time Python float",
      bad=('# opdesign: {skeleton: SK-16}\n@pypto.frontend.jit()\n'
           'def bwd_kernel(q, k, v, o, do, l, m, dq, dk, dv, scale):\n'
           '    sij = pypto.mul(sij, scale)   # scale passed at run time'),
      good=('# opdesign: {skeleton: SK-16}\nSCALE = 0.125   # 1 / sqrt(head_dim)\n\n@pypto.frontend.jit()\n'
            'def bwd_kernel(q, k, v, o, do, l, m, dq, dk, dv):\n    sij = pypto.mul(sij, SCALE)'), attention_only=True)
def check_scale_constant(ctx: Context) -> Iterator[Hit]:
    """``scale = 1/sqrt(head_dim)`` is a Python float known when the kernel is traced. A kernel
    parameter named ``*scale*`` or a scale built by a ``pypto`` / ``torch`` / ``numpy`` call becomes a
    runtime tensor operation instead of a constant folded at compile time."""
    kernel = _kernel(ctx)
    if kernel is None:
        return
    for p in _params(kernel):
        if "scale" in p.lower():
            yield Hit(kernel.line, f"kernel parameter {p!r} passes the scale at run time: use a compile-time float")
    for node, _loops in ctx.program.walk():
        s = node.stmt
        if not isinstance(s, ast.Assign):
            continue
        names = [t.id for t in s.targets if isinstance(t, ast.Name) and "scale" in t.id.lower()]
        func = _runtime_call(s.value) if names else None
        if func:
            yield Hit(node.line, f"{names[0]} is built by {func}(...): a runtime tensor, not a compile-time float")


def _zeroed_outside(ctx: Context, kernel: Node) -> set[str]:
    """Names zero-initialised outside the kernel (``x = torch.zeros(...)``, ``x.zero_()``, ``x.fill_(0)``)."""
    inside = {id(n) for n, _ in ctx.program.walk(kernel.body)}
    out = set()
    for node, _loops in ctx.program.walk():
        s = node.stmt
        if id(node) in inside or s is None:
            continue
        if isinstance(s, ast.Assign) and isinstance(s.value, ast.Call) and call_name(s.value) in ZEROING:
            out |= {t.id for t in s.targets if isinstance(t, ast.Name)}
        for call in node.calls():
            owner = call.func.value if isinstance(call.func, ast.Attribute) else None
            zero_fill = (call_name(call) == "fill_" and call.args and isinstance(call.args[0], ast.Constant)
                         and call.args[0].value == 0)
            if isinstance(owner, ast.Name) and (call_name(call) == "zero_" or zero_fill):
                out.add(owner.id)
    return out


def _zeroed_params(ctx: Context, kernel: Node) -> set[str]:
    """Kernel parameters bound to a zero-initialised name at a launch of the kernel (or of the same name)."""
    zeroed = _zeroed_outside(ctx, kernel)
    params = _params(kernel)
    out = zeroed & set(params)
    for call, _node, _loops in ctx.program.calls():
        if call_name(call) == kernel.stmt.name:
            out |= {p for p, a in zip(params, call.args, strict=False) if isinstance(a, ast.Name) and a.id in zeroed}
            out |= {k.arg for k in call.keywords if isinstance(k.value, ast.Name) and k.value.id in zeroed}
    return out


@rule("SK-16-R4", "error", "pseudocode", "SK-16-R4",
      "an atomic_add target is not zero-initialised on the host before the launch "
      "(or is zeroed by assemble in the kernel)",
      bad=('# opdesign: {skeleton: SK-16}\n@pypto.frontend.jit()\ndef bwd_kernel(q, k, v, o, do, l, m, dq, dk, dv):\n'
           '    pypto.atomic_add(dqi, [b_idx, h_idx, q_off, 0], dq)\n\ndef bwd(q, k, v, o, do, l, m):   # host side\n'
           '    dq = torch.empty(q.shape, dtype=torch.float32)\n    bwd_kernel(q, k, v, o, do, l, m, dq, dk, dv)'),
      good=('# opdesign: {skeleton: SK-16}\n@pypto.frontend.jit()\ndef bwd_kernel(q, k, v, o, do, l, m, dq, dk, dv):\n'
            '    pypto.atomic_add(dqi, [b_idx, h_idx, q_off, 0], dq)\n\ndef bwd(q, k, v, o, do, l, m):   # host side\n'
            '    dq = torch.zeros(q.shape, dtype=torch.float32)\n    bwd_kernel(q, k, v, o, do, l, m, dq, dk, dv)'),
      attention_only=True)
def check_zero_init(ctx: Context) -> Iterator[Hit]:
    """``atomic_add`` adds the block products of many loop steps into GM: the target must hold zeros
    before the kernel starts, written by the host (``torch.zeros`` passed to the kernel). Zeroing it
    inside the kernel with ``assemble`` races with the atomic adds of other roots. When the pseudocode
    shows no host code at all (no launch of the kernel, nothing zeroed outside it), the zeroing cannot
    be seen, and the finding is a warning: real backward kernels keep the host setup in their test
    harness (hicann/pypto ``flash_attention_mha_grad_impl.py`` says its outputs are ``torch.zeros``
    from the host)."""
    kernel = _kernel(ctx)
    if kernel is None or not isinstance(kernel.stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return
    calls = list(_kernel_calls(ctx, kernel))
    targets = {}
    for call, node, _loops in calls:
        if call_name(call) == "atomic_add" and len(call.args) >= 3 and isinstance(call.args[-1], ast.Name):
            targets.setdefault(call.args[-1].id, (call, node))
    if not targets:
        return
    zeroed = _zeroed_params(ctx, kernel)
    launched = any(call_name(c) == kernel.stmt.name for c, _n, _l in ctx.program.calls())
    for name, (call, node) in targets.items():
        if name in zeroed:
            continue
        if not launched and not _zeroed_outside(ctx, kernel):
            yield Hit(ctx.program.call_line(call, node),
                      f"atomic_add into {name}: the pseudocode shows no launch of the kernel, so the host's zeroing "
                      f"of {name} is not visible; show it (torch.zeros passed to the kernel)", level="warning")
        else:
            yield Hit(ctx.program.call_line(call, node),
                      f"atomic_add into {name}, but {name} is not zero-initialised on the host before the launch "
                      "(torch.zeros passed to the kernel)")
    for call, node, _loops in calls:
        if (call_name(call) == "assemble" and call.args and isinstance(call.args[-1], ast.Name)
                and call.args[-1].id in targets):
            yield Hit(ctx.program.call_line(call, node),
                      f"assemble into the atomic_add target {call.args[-1].id}: zero it on the host, not in the kernel")
