"""Cross-check of an operator folder: the kernel against its DESIGN.md (issue 30, Deliver 2).

``opdesign validate DIR`` runs it when DIR/DESIGN.md carries the ``opdesign:`` front-matter block
(a folder of hand-written kernels without the block is not judged this way). Each finding names the
kernel line and the design line it disagrees with:

- OD-XC-01 constants: the kernel's module-level ``Q_TILE``, ``KV_TILE``, ``HEAD_DIM`` (and in the
  performance form ``SEQ_Q`` / ``SEQ_KV``) against the block's ``q_tile``, ``kv_tile``, ``head_dim``,
  ``seq_q``, ``seq_kv``; ``GROUP`` / ``NUM_HEADS`` / ``NUM_KV_HEADS`` against the first
  representative shape of ``eval/module_interfaces.yaml``.
- OD-XC-02 TileShapes per stage: a ``set_cube_tile_shapes`` / ``set_vec_tile_shapes`` call whose
  comment just above names a stage (``# C1 ...``, ``# V2 ...``) against that stage of the block's
  ``cube_tiles`` (m, k, n) / ``vec_tiles`` (shape); a block stage the kernel never sets is a finding.
- OD-XC-03 inputs: every ``primary_inputs`` tensor of the interface file is a parameter of the jit
  function, in the same order, and every final output too; a parameter that is neither is a finding
  unless it is one of the host-built tables of :data:`HOST_TABLES`.
- OD-XC-04 loop bounds: in the performance form (static ``range`` loops), the KV steps the kernel's
  loop nest runs per (batch, head) against the block's ``task_count * q_tiles / root_count``.
- OD-XC-05 op name: a kernel whose ``KERNEL_FUNCTION`` or jit function names another op than the
  front matter's ``op_name`` (a kernel left behind by another operator).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from opdesign.pypto_run.constants import eval_constant as _eval
from opdesign.pypto_run.constants import module_constants
from opdesign.validate.model import Finding

#: Kernel inputs that are host-built helper tables, not operator inputs: the 0/1 band of the SK-01 mask
#: (``mask_table``), SK-16's causal table and per-batch query lengths. They are not in the contract yet
#: (issue 30 item 3); listed here so that any other unlisted parameter is a finding.
HOST_TABLES = frozenset({"mask_table", "causal_table", "actual_q"})
_STAGE = re.compile(r"^#\s*([CV]\d)\b")
_SELF_CHECK = "# --- self-check"


def _jit_function(tree: ast.Module) -> ast.FunctionDef | None:
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and any("jit" in ast.unparse(d) for d in node.decorator_list):
            return node
    return None


class _Finder:
    def __init__(self, design: str, kernel: str, front_line) -> None:
        self.design, self.kernel, self.front_line = design, kernel, front_line
        self.found: list[Finding] = []

    def add(self, rule: str, kline: int, dline: int, what: str) -> None:
        self.found.append(Finding(rule=rule, level="error", file=self.kernel, line=max(kline, 1),
                                  message=f"{what} (kernel line {kline}; {self.design} line {dline})"))


def decoded_sources(kernels: Iterable[tuple[str, Any]]) -> list[tuple[str, str]]:
    """``(name, text)`` of the kernels whose bytes decode (the others are reported as unusable elsewhere)."""
    from opdesign.validate.parse.textinput import Unusable, decode_source

    out = []
    for name, data in kernels:
        if isinstance(data, bytes):
            try:
                out.append((name, decode_source(data)))
            except Unusable:
                pass
    return out


def folder_sources(folder: Path, kernel_files: list[Path],
                   read) -> tuple[list[tuple[str, str]], list[tuple[str, bytes]]]:
    """The folder's kernel sources ``(path, text)`` and the first bytes of its ``*_kernel.py`` /
    ``*_scaffold.py`` files ``(path, head)``, read with ``read(path) -> bytes``; unreadable ones are left out
    (the kernel rules report them)."""
    from opdesign.validate.parse.textinput import Unusable

    raw = []
    for k in kernel_files:
        try:
            raw.append((str(k), read(k)))
        except Unusable:
            pass
    heads = []
    for k in sorted(folder.glob("*_kernel.py")) + sorted(folder.glob("*_scaffold.py")):
        try:
            heads.append((str(k), read(k)[:4096]))
        except Unusable:
            pass
    return decoded_sources(raw), heads


def design_findings(text: str, name: str, iface_name: str, iface: tuple, kernels: list[tuple[str, str]],
                    heads: list[tuple[str, bytes]] = ()) -> list[Finding]:
    """Kernel against design for a folder whose DESIGN.md ``text`` has the block; ``iface`` is the engine's
    interface input (``("ok", text)`` when read); ``heads``: the folder's generated-looking files."""
    from opdesign.io import yamlsafe
    from opdesign.validate.parse.document import parse

    if not kernels and not heads:
        return []
    try:
        doc = parse(text)
    except Exception:  # noqa: BLE001 - the document rules report what does not parse
        return []
    front = doc.front.data if isinstance(doc.front.data, dict) else {}
    loaded = None
    if iface and iface[0] == "ok" and isinstance(iface[1], str):
        try:
            loaded = yamlsafe.load(iface[1])
        except yamlsafe.YamlProblem:
            loaded = None
    data = loaded.data if loaded is not None and isinstance(loaded.data, dict) else None

    def iface_line(*path: Any) -> int:
        return loaded.line(*path, default=1) if loaded is not None else 1

    return (cross_check(name, front, doc.front.line, data, iface_name, iface_line, kernels)
            + foreign_artifacts(name, front, doc.front.line, heads))


def cross_check(design_name: str, front: dict[str, Any], front_line, iface: dict[str, Any] | None,
                iface_name: str, iface_line, kernels: Iterable[tuple[str, str]]) -> list[Finding]:
    """Findings of the kernels ``(name, text)`` against the front matter ``front`` (with ``front_line(*path)``
    giving a key's line in the design) and the interface data ``iface``. Nothing without the block."""
    block = front.get("opdesign") if isinstance(front, dict) else None
    if not isinstance(block, dict):
        return []
    op_name = front.get("op_name")
    found: list[Finding] = []
    for name, text in kernels:
        proper = text.split(_SELF_CHECK)[0]
        try:
            tree = ast.parse(proper)
        except SyntaxError:
            continue  # OD-KN-01 reports it
        if _jit_function(tree) is None:
            continue  # no PyPTO kernel in it (a helper module): nothing to compare
        f = _Finder(design_name, name, front_line)
        consts = module_constants(tree)
        _op_name(f, tree, text, op_name)
        _constants(f, consts, block, iface, iface_name, iface_line)
        _tiles(f, proper, consts, block)
        _inputs(f, tree, iface, iface_name, iface_line)
        _loops(f, tree, consts, block)
        found += f.found
    return found


def foreign_artifacts(design_name: str, front: dict[str, Any], front_line,
                      files: Iterable[tuple[str, bytes]]) -> list[Finding]:
    """OD-XC-05 for the folder's kernels and scaffolds ``(path, first bytes)`` that opdesign wrote for
    another op than the front matter's ``op_name`` (their header marker names that op)."""
    from opdesign.io.publish import owner

    op_name = front.get("op_name") if isinstance(front, dict) else None
    if not isinstance(front.get("opdesign") if isinstance(front, dict) else None, dict) or not isinstance(op_name, str):
        return []
    out = []
    for path, head in files:
        other = owner(path.rsplit("/", 1)[-1], head)
        if other is not None and other != op_name:
            out.append(Finding(rule="OD-XC-05", level="error", file=path, line=1,
                               message=f"an artifact of operator {other} in the folder of {op_name} (kernel line 1; "
                                       f"{design_name} line {front_line('op_name')}): remove it, or write the "
                                       f"design with `opdesign new --force`, which removes it"))
    return out


def _op_name(f: _Finder, tree: ast.Module, text: str, op_name: Any) -> None:
    if not isinstance(op_name, str):
        return
    fn = _jit_function(tree)
    if fn is not None and fn.name != f"{op_name}_kernel":
        f.add("OD-XC-05", fn.lineno, f.front_line("op_name"),
              f"kernel function {fn.name} belongs to another operator than op_name {op_name} "
              f"(a kernel left in the folder by another design?)")


_BLOCK_CONSTS = (("Q_TILE", "q_tile"), ("KV_TILE", "kv_tile"), ("HEAD_DIM", "head_dim"), ("SEQ_Q", "seq_q"),
                 ("SEQ_KV", "seq_kv"))


def _constants(f: _Finder, consts, block, iface, iface_name, iface_line) -> None:
    for const, key in _BLOCK_CONSTS:
        if const in consts and key in block and consts[const][0] != block[key]:
            f.add("OD-XC-01", consts[const][1], f.front_line("opdesign", key),
                  f"{const} = {consts[const][0]} in the kernel, {key}: {block[key]} in the design")
    shapes = ((iface or {}).get("composition_verification", {}).get("representative_shapes")
              if isinstance(iface, dict) else None)
    if not (isinstance(shapes, list) and shapes and isinstance(shapes[0], dict)):
        return
    first = shapes[0]
    heads, kv_heads = first.get("num_heads"), first.get("num_kv_heads")
    want = {"NUM_HEADS": heads, "NUM_KV_HEADS": kv_heads,
            "GROUP": heads // kv_heads if isinstance(heads, int) and isinstance(kv_heads, int) and kv_heads else None}
    for const, value in want.items():
        if const in consts and value is not None and consts[const][0] != value:
            line = iface_line("composition_verification", "representative_shapes", 0)
            f.found.append(Finding(rule="OD-XC-01", level="error", file=f.kernel, line=consts[const][1],
                                   message=f"{const} = {consts[const][0]} in the kernel, {value} in the first "
                                           f"representative shape (kernel line {consts[const][1]}; "
                                           f"{iface_name} line {line})"))


def _tiles(f: _Finder, proper: str, consts, block) -> None:
    env = {k: v for k, (v, _line) in consts.items()}
    lines = proper.splitlines()
    seen: set[str] = set()
    cube, vec = block.get("cube_tiles") or {}, block.get("vec_tiles") or {}
    for i, line in enumerate(lines):
        stripped = line.strip()
        kind = "cube" if "set_cube_tile_shapes(" in stripped else "vec" if "set_vec_tile_shapes(" in stripped else None
        if kind is None:
            continue
        stage = None
        for back in range(i - 1, max(i - 4, -1), -1):
            m = _STAGE.match(lines[back].strip())
            if m:
                stage = m.group(1)
                break
            if not lines[back].strip().startswith("#"):
                continue
        table = cube if kind == "cube" else vec
        if stage is None or not isinstance(table.get(stage), dict):
            continue
        try:
            call = ast.parse(stripped).body[0].value
        except (SyntaxError, IndexError, AttributeError):
            continue
        args = [_eval(a, env) for a in getattr(call, "args", [])]
        if any(a is None for a in args):
            continue
        seen.add(stage)
        want = table[stage]
        if kind == "cube":
            expect = [list(want.get("m", [])), list(want.get("k", [])), list(want.get("n", []))]
            got = [list(a) for a in args]
            if got != expect:
                f.add("OD-XC-02", i + 1, f.front_line("opdesign", "cube_tiles", stage),
                      f"{stage} cube TileShape m/k/n {got} in the kernel, {expect} in the design")
        else:
            expect = list(want.get("shape", []))
            if list(args) != expect:
                f.add("OD-XC-02", i + 1, f.front_line("opdesign", "vec_tiles", stage),
                      f"{stage} vector TileShape {list(args)} in the kernel, {expect} in the design")
    for stage in list(cube) + list(vec):
        if stage not in seen and any(_STAGE.match(x.strip()) and _STAGE.match(x.strip()).group(1) == stage
                                     for x in lines):
            continue
        if stage not in seen:
            table_key = "cube_tiles" if stage in cube else "vec_tiles"
            f.add("OD-XC-02", 1, f.front_line("opdesign", table_key, stage),
                  f"the design's {stage} TileShape is never set in the kernel "
                  f"(no set_*_tile_shapes under a `# {stage}` comment)")


def _inputs(f: _Finder, tree: ast.Module, iface, iface_name, iface_line) -> None:
    fn = _jit_function(tree)
    if fn is None or not isinstance(iface, dict):
        return
    params = [a.arg for a in fn.args.args]
    primary = [t.get("name") for t in iface.get("primary_inputs") or [] if isinstance(t, dict)]
    outputs = [t.get("name") for t in iface.get("final_outputs") or [] if isinstance(t, dict)]
    where = {p: a.lineno for p, a in zip(params, fn.args.args, strict=True)}
    for i, name in enumerate(primary):
        if name not in params:
            line = iface_line("primary_inputs", i)
            f.found.append(Finding(rule="OD-XC-03", level="error", file=f.kernel, line=fn.lineno,
                                   message=f"primary input {name} is not a parameter of {fn.name} "
                                           f"(kernel line {fn.lineno}; {iface_name} line {line})"))
    order = [p for p in params if p in primary]
    if order != [p for p in primary if p in params]:
        f.found.append(Finding(rule="OD-XC-03", level="error", file=f.kernel, line=fn.lineno,
                               message=f"{fn.name} takes the primary inputs in the order {order}, the contract lists "
                                       f"{primary} (kernel line {fn.lineno}; {iface_name} line "
                                       f"{iface_line('primary_inputs')})"))
    for name in params:
        if name in primary or name in outputs or name in HOST_TABLES:
            continue
        f.found.append(Finding(rule="OD-XC-03", level="error", file=f.kernel, line=where[name],
                               message=f"kernel input {name} is neither in primary_inputs nor a final output of the "
                                       f"contract (kernel line {where[name]}; {iface_name} line "
                                       f"{iface_line('primary_inputs')})"))


def _loop_count(node: ast.For, env: dict[str, Any]) -> int | None:
    """Iterations of ``for _ in range(...)`` / ``pypto.loop(...)`` with constant bounds, else None."""
    call = node.iter
    if not isinstance(call, ast.Call):
        return None
    fname = ast.unparse(call.func)
    if fname not in ("range", "pypto.loop"):
        return None
    args = [_eval(a, env) for a in call.args if not isinstance(a, ast.Starred)]
    if any(not isinstance(a, int) for a in args) or not args:
        return None
    lo, hi, step = (0, args[0], 1) if len(args) == 1 else (args[0], args[1], args[2] if len(args) > 2 else 1)
    return len(range(lo, hi, step))


def _bind(node: ast.Assign, env: dict[str, Any]) -> None:
    """``name = expr`` into ``env`` when expr is a constant expression of known names (else the name is
    dropped: a later symbolic re-binding must not keep an older constant)."""
    if len(node.targets) != 1 or not isinstance(node.targets[0], ast.Name):
        return
    value = _eval(node.value, env)
    if value is None:
        env.pop(node.targets[0].id, None)
    else:
        env[node.targets[0].id] = value


def _loops(f: _Finder, tree: ast.Module, consts, block) -> None:
    """Performance form: KV steps per (batch, head) of the static loop nest against the plan's count."""
    from opdesign.validate.api import skeletons

    skeleton = skeletons().find(block.get("skeleton"))
    if block.get("form") != "performance" or skeleton is None or not skeleton.static_kv_loop:
        return
    fn = _jit_function(tree)
    need = ("task_count", "root_count", "seq_q", "q_tile")
    if fn is None or any(not isinstance(block.get(k), int) or not block.get(k) for k in need):
        return
    q_tiles = -(-block["seq_q"] // block["q_tile"])
    plan_steps = block["task_count"] * q_tiles / block["root_count"]
    env: dict[str, Any] = {k: v for k, (v, _line) in consts.items()}
    env.update(min=min, max=max)
    q_loop = next((n for n in ast.walk(fn) if isinstance(n, ast.For) and ast.unparse(n.target) == "qi"), None)
    if q_loop is None:
        return
    kv_loop = next((n for n in ast.walk(q_loop) if isinstance(n, ast.For) and ast.unparse(n.target) == "kj"), None)
    n_q = _loop_count(q_loop, env)
    if kv_loop is None or n_q is None:
        return
    # names the loop bounds read: assignments above the Q loop (q_len = SEQ_Q, diag = ...) and, per Q tile,
    # those of the Q loop's body above the KV loop (kv_begin, kv_end); symbolic ones stay unknown
    for node in sorted((n for n in ast.walk(fn) if isinstance(n, ast.Assign) and n.lineno < q_loop.lineno),
                       key=lambda n: n.lineno):
        _bind(node, env)
    steps = 0
    for qi in range(n_q):
        local = dict(env, qi=qi)
        for node in q_loop.body:
            if node is kv_loop or node.lineno >= kv_loop.lineno:
                break
            if isinstance(node, ast.Assign):
                _bind(node, local)
        n_kv = _loop_count(kv_loop, local)
        if n_kv is None:
            return
        steps += n_kv
    if steps != plan_steps:
        f.add("OD-XC-04", kv_loop.lineno, f.front_line("opdesign", "task_count"),
              f"the kernel's loop nest runs {steps} KV steps per (batch, head); the design's task_count "
              f"{block['task_count']} over root_count {block['root_count']} with {q_tiles} Q tiles is {plan_steps:g}")
