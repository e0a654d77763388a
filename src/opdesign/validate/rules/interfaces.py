"""Interface rules (OD-IF): ``eval/module_interfaces.yaml`` next to the DESIGN.md.

Source: the CANNBot interface format and its six wiring rules (domain.md §9,
pypto-op-design ``validate_yaml.py``). Unlike that script, which stops at the
first structural failure, every problem is reported, each with its YAML line.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from typing import Any

from opdesign.validate.analysis import astnodes
from opdesign.validate.api import Context, Hit, rule

REQUIRED_KEYS = ("schema_version", "op", "primary_inputs", "modules", "final_outputs", "composition_verification")
DTYPES = frozenset({"float32", "float16", "bfloat16", "int32", "int64", "bool", "int", "int8"})
MODULE_SOURCE = re.compile(r"module_([1-9][0-9]*)", re.ASCII)  # fullmatch: ASCII, no leading zero
SHAPE_OPS = (ast.Add, ast.Sub, ast.Mult, ast.FloorDiv)


def _data(ctx: Context) -> dict[str, Any]:
    data = ctx.interfaces.data if ctx.interfaces else None
    return data if isinstance(data, dict) else {}


def _mappings(ctx: Context, key: str) -> list[tuple[int, dict[str, Any]]]:
    value = _data(ctx).get(key)
    return [(i, item) for i, item in enumerate(value) if isinstance(item, dict)] if isinstance(value, list) else []


def _modules(ctx: Context) -> list[tuple[int, dict[str, Any]]]:
    return _mappings(ctx, "modules")


def _module_id(module: dict[str, Any]) -> int | None:
    mid = module.get("id")
    return mid if isinstance(mid, int) and not isinstance(mid, bool) else None


def _entries(module: dict[str, Any], key: str) -> list[tuple[int, dict[str, Any]]]:
    value = module.get(key)
    return [(i, item) for i, item in enumerate(value) if isinstance(item, dict)] if isinstance(value, list) else []


def _hit(ctx: Context, message: str, *path: Any) -> Hit:
    return Hit(ctx.iface_line(*path), message, interfaces=True)


@rule("OD-IF-01", "error", "interfaces", "CANNBot workflow outputs (eval/module_interfaces.yaml)",
      "eval/module_interfaces.yaml is missing, unreadable or not a YAML mapping",
      bad='schema_version: 1\nop: [my_op',
      good='schema_version: 1\nop: my_op')
def check_interface_file(ctx: Context) -> Iterator[Hit]:
    """The design hands off two files: DESIGN.md and ``eval/module_interfaces.yaml`` beside it.
    The interface file is UTF-8 YAML (safe load, bounded aliases and nesting) holding a mapping."""
    if ctx.interfaces_state == "missing":
        yield Hit(1, f"interface file missing: {ctx.interfaces_problem}")
    elif ctx.interfaces_state == "invalid":
        yield Hit(ctx.interfaces_problem_line, ctx.interfaces_problem, interfaces=True)
    elif ctx.interfaces_state == "ok" and not isinstance(ctx.interfaces.data if ctx.interfaces else None, dict):
        yield Hit(1, "interface file is not a YAML mapping", interfaces=True)


@rule("OD-IF-02", "info", "interfaces", "opdesign validate (validate_text without interfaces)",
      "interface rules skipped: no interface text was given",
      bad='validate_text(design_text)',
      good='validate_text(design_text, interfaces_text=yaml_text)', kind='api')
def check_interfaces_given(ctx: Context) -> Iterator[Hit]:
    """``validate_text`` was called without ``interfaces_text``: the OD-IF rules and the interface half of
    OD-DOC-08 did not run. Said as info so that skipped never reads as passed."""
    if ctx.interfaces_state == "not_given":
        yield Hit(1, "interface rules skipped: no interface text given")


@rule("OD-IF-03", "error", "interfaces", "CANNBot module_interfaces.yaml (required keys)",
      "interface file lacks a required key, or a top-level key has the wrong type",
      bad=('schema_version: 1\nop: my_op\nprimary_inputs: [{name: q, dtype: bfloat16}]\nmodules:\n'
           '- {id: 1, inputs: [{name: q, source: primary}], outputs: [{name: attn_out}]}'),
      good=('schema_version: 1\nop: my_op\nprimary_inputs: [{name: q, dtype: bfloat16}]\nmodules:\n'
            '- {id: 1, inputs: [{name: q, source: primary}], outputs: [{name: attn_out}]}\n'
            'final_outputs: [{name: attn_out, source: module_1}]\ncomposition_verification: {rtol: 0.02, atol: 0.02}'))
def check_required_keys(ctx: Context) -> Iterator[Hit]:
    """Keys ``schema_version``, ``op``, ``primary_inputs``, ``modules``, ``final_outputs`` and
    ``composition_verification`` are all present (``numerical_notes`` is optional); ``schema_version``
    is a positive integer, ``op`` a non-empty string and ``composition_verification`` a mapping (the
    lists are OD-IF-04's)."""
    data = ctx.interfaces.data if ctx.interfaces else None
    if isinstance(data, dict):
        for key in REQUIRED_KEYS:
            if key not in data:
                yield Hit(1, f"interface file has no '{key}'", interfaces=True)
        version, op, comp = data.get("schema_version"), data.get("op"), data.get("composition_verification")
        if "schema_version" in data and (not isinstance(version, int) or isinstance(version, bool) or version < 1):
            yield _hit(ctx, f"schema_version must be a positive integer, got {version!r}", "schema_version")
        if "op" in data and (not isinstance(op, str) or not op.strip()):
            yield _hit(ctx, f"op must be a non-empty string, got {op!r}", "op")
        if "composition_verification" in data and not isinstance(comp, dict):
            yield _hit(ctx, f"composition_verification must be a mapping, got {comp!r}", "composition_verification")


@rule("OD-IF-04", "error", "interfaces", "CANNBot module_interfaces.yaml (structure)",
      "interface lists malformed: empty lists, non-mapping entries, module ids not 1..N, empty inputs/outputs",
      bad='modules:\n- id: 2\n  inputs: []\n  outputs: [{name: attn_out}]',
      good='modules:\n- id: 1\n  inputs: [{name: q, source: primary}]\n  outputs: [{name: attn_out}]')
def check_structure(ctx: Context) -> Iterator[Hit]:
    """``primary_inputs``, ``modules`` and ``final_outputs`` are non-empty lists of mappings; module
    ids are the consecutive integers 1, 2, ...; every module has non-empty ``inputs`` (each with
    ``name`` and ``source``) and ``outputs`` (each with ``name``)."""
    data = _data(ctx)
    for key in ("primary_inputs", "modules", "final_outputs"):
        value = data.get(key)
        if key not in data:
            continue
        if not isinstance(value, list) or not value:
            yield _hit(ctx, f"'{key}' must be a non-empty list", key)
            continue
        for i, item in enumerate(value):
            if not isinstance(item, dict):
                yield _hit(ctx, f"{key}[{i}] must be a mapping, got {type(item).__name__}", key, i)
            elif key != "modules" and not isinstance(item.get("name"), str):
                yield _hit(ctx, f"{key}[{i}] has no name", key, i)
    for pos, (i, module) in enumerate(_modules(ctx), start=1):
        if _module_id(module) != pos:
            yield _hit(ctx, f"module id {module.get('id')!r} should be {pos} (ids are consecutive from 1)",
                       "modules", i, "id")
        for key, needed in (("inputs", ("name", "source")), ("outputs", ("name",))):
            value = module.get(key)
            if not isinstance(value, list) or not value:
                yield _hit(ctx, f"module {module.get('id')!r} needs a non-empty '{key}' list", "modules", i, key)
                continue
            for j, entry in enumerate(value):
                missing = [n for n in needed if not isinstance(entry, dict) or not isinstance(entry.get(n), str)]
                if missing:
                    yield _hit(ctx, f"module {module.get('id')!r} {key}[{j}] needs {', '.join(missing)}",
                               "modules", i, key, j)


def _outputs_by_module(ctx: Context) -> dict[int, set[str]]:
    out: dict[int, set[str]] = {}
    for _i, module in _modules(ctx):
        mid = _module_id(module)
        if mid is not None:
            out.setdefault(mid, set()).update(str(e.get("name")) for _j, e in _entries(module, "outputs"))
    return out


@rule("OD-IF-05", "error", "interfaces", "CANNBot wiring rule 1",
      "a 'primary' source names no primary input",
      bad=('modules:\n- id: 1\n  inputs: [{name: qq, source: primary}]   # primary_inputs: q\n'
           '  outputs: [{name: attn_out}]'),
      good='modules:\n- id: 1\n  inputs: [{name: q, source: primary}]\n  outputs: [{name: attn_out}]')
def check_primary_sources(ctx: Context) -> Iterator[Hit]:
    """Wiring rule 1: an input with ``source: primary`` names one of ``primary_inputs``."""
    primaries = {str(p.get("name")) for _i, p in _mappings(ctx, "primary_inputs")}
    for i, module in _modules(ctx):
        for j, entry in _entries(module, "inputs"):
            if entry.get("source") == "primary" and str(entry.get("name")) not in primaries:
                yield _hit(ctx, f"module {module.get('id')!r} input '{entry.get('name')}' is not a primary input",
                           "modules", i, "inputs", j)


@rule("OD-IF-06", "error", "interfaces", "CANNBot wiring rule 2",
      "a 'module_j' source is not an output of an earlier module j",
      bad=('modules:\n- id: 1\n  inputs: [{name: s, source: module_2}]\n  outputs: [{name: attn_out}]\n- id: 2\n'
           '  inputs: [{name: q, source: primary}]\n  outputs: [{name: s}]'),
      good=('modules:\n- id: 1\n  inputs: [{name: q, source: primary}]\n  outputs: [{name: s}]\n- id: 2\n'
            '  inputs: [{name: s, source: module_1}]\n  outputs: [{name: attn_out}]\n'
            'final_outputs: [{name: attn_out, source: module_2}]'))
def check_module_sources(ctx: Context) -> Iterator[Hit]:
    """Wiring rule 2: a source ``module_j`` has ``j`` smaller than the current module id and names an
    output of module ``j``; a source that is neither ``primary`` nor ``module_<j>`` is reported too."""
    outputs = _outputs_by_module(ctx)
    for i, module in _modules(ctx):
        mid = _module_id(module)
        for j, entry in _entries(module, "inputs"):
            source, name = entry.get("source"), str(entry.get("name"))
            path = ("modules", i, "inputs", j)
            match = MODULE_SOURCE.fullmatch(source) if isinstance(source, str) else None
            if source == "primary":
                continue
            if match is None:
                yield _hit(ctx, f"input '{name}' has source {source!r}: expected 'primary' or 'module_<j>'", *path)
                continue
            src = int(match.group(1))
            if mid is not None and src >= mid:
                yield _hit(ctx, f"module {mid} input '{name}' comes from module {src}, which is not earlier", *path)
            elif name not in outputs.get(src, set()):
                yield _hit(ctx, f"module {mid} input '{name}': module {src} has no output '{name}'", *path)


@rule("OD-IF-07", "error", "interfaces", "CANNBot wiring rule 3",
      "a final output does not reference an existing module output",
      bad='final_outputs: [{name: attn_out, source: module_3}]   # one module',
      good='final_outputs: [{name: attn_out, source: module_1}]')
def check_final_outputs(ctx: Context) -> Iterator[Hit]:
    """Wiring rule 3: each final output's ``source`` is ``module_j`` of an existing module with an
    output of the same name."""
    outputs = _outputs_by_module(ctx)
    for i, entry in _mappings(ctx, "final_outputs"):
        source, name = entry.get("source"), str(entry.get("name"))
        match = MODULE_SOURCE.fullmatch(source) if isinstance(source, str) else None
        if match is None or int(match.group(1)) not in outputs:
            yield _hit(ctx, f"final output '{name}' has source {source!r}, not an existing module", "final_outputs", i)
        elif name not in outputs[int(match.group(1))]:
            yield _hit(ctx, f"final output '{name}': {source} has no output '{name}'", "final_outputs", i)


@rule("OD-IF-08", "error", "interfaces", "CANNBot wiring rule 4",
      "a module declares the same output twice",
      bad='modules:\n- id: 1\n  inputs: [{name: q, source: primary}]\n  outputs: [{name: attn_out}, {name: attn_out}]',
      good='modules:\n- id: 1\n  inputs: [{name: q, source: primary}]\n  outputs: [{name: attn_out}, {name: lse}]')
def check_duplicate_outputs(ctx: Context) -> Iterator[Hit]:
    """Wiring rule 4: no duplicate (module, output name) pairs."""
    seen: set[tuple[Any, str]] = set()
    for i, module in _modules(ctx):
        for j, entry in _entries(module, "outputs"):
            mid = module.get("id")
            key = (mid if isinstance(mid, (str, int, float, bool)) or mid is None else repr(mid),
                   str(entry.get("name")))
            if key in seen:
                yield _hit(ctx, f"module {key[0]!r} declares output '{key[1]}' twice", "modules", i, "outputs", j)
            seen.add(key)


def _dimension_ok(dim: Any) -> bool:
    if isinstance(dim, bool):
        return False
    if isinstance(dim, int):
        return True
    if not isinstance(dim, str) or not dim.strip() or len(dim) > 200:
        return False
    try:
        tree = ast.parse(dim.strip(), mode="eval").body
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return False
    for node in astnodes.walk(tree):
        ok = (isinstance(node, ast.Name)
              or (isinstance(node, ast.Constant) and isinstance(node.value, int) and not isinstance(node.value, bool))
              or (isinstance(node, ast.BinOp) and isinstance(node.op, SHAPE_OPS))
              or (isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.UAdd, ast.USub)))
              or isinstance(node, (ast.Load, *SHAPE_OPS, ast.UAdd, ast.USub)))
        if not ok:
            return False
    return True


def _tensors(ctx: Context) -> Iterator[tuple[dict[str, Any], tuple[Any, ...]]]:
    for i, entry in _mappings(ctx, "primary_inputs"):
        yield entry, ("primary_inputs", i)
    for i, module in _modules(ctx):
        for j, entry in _entries(module, "outputs"):
            yield entry, ("modules", i, "outputs", j)


def shape_dimensions(shape: Any) -> list[Any] | None:
    """The dimensions of a shape written as a YAML list (``[batch, seq_q]``) or as the string form both
    CANNBot templates use (``"[B, T]"``, one pair of outer brackets optional): the list itself, or the
    comma-separated parts of the string (``"[]"`` is a scalar: no dimension). None for anything else,
    and for a string with an empty part (``"[B, , T]"``) or an unbalanced outer bracket."""
    if isinstance(shape, list):
        return shape
    if not isinstance(shape, str):
        return None
    text = shape.strip()
    if text.startswith("[") != text.endswith("]"):
        return None
    if text.startswith("["):
        text = text[1:-1].strip()
    if not text:
        return []
    parts = [part.strip() for part in text.split(",")]
    return None if any(not part for part in parts) else parts


@rule("OD-IF-09", "error", "interfaces", "CANNBot wiring rule 5",
      "a shape dimension is not a name, an integer or + - * // of those",
      bad='primary_inputs:\n- {name: q, shape: [batch, seq_q / 2, "head_dim ** 2"], dtype: bfloat16}',
      good='primary_inputs:\n- {name: q, shape: [batch, seq_q // 2, head_dim * 2], dtype: bfloat16}')
def check_shapes(ctx: Context) -> Iterator[Hit]:
    """Wiring rule 5: each dimension of a primary input or module output shape is an integer or an
    expression of names and integers with ``+ - * //`` (unary ``+``/``-`` allowed). The shape is a list
    or a string ``"[B, T // 2]"`` (as CANNBot's templates and its ``validate_yaml.py`` write it); the
    string's dimensions are checked the same way."""
    for entry, path in _tensors(ctx):
        if "shape" not in entry:
            continue
        shape = entry["shape"]
        dims = shape_dimensions(shape)
        if dims is None:
            yield _hit(ctx, f"'{entry.get('name')}' shape must be a list or a string '[d0, d1, ...]', got {shape!r}",
                       *path, "shape")
            continue
        bad = [d for d in dims if not _dimension_ok(d)]
        if bad:
            yield _hit(ctx, f"'{entry.get('name')}' shape has invalid dimension(s) {bad!r}", *path, "shape")


@rule("OD-IF-10", "error", "interfaces", "CANNBot wiring rule 6",
      "dtype outside float32, float16, bfloat16, int32, int64, bool, int, int8",
      bad='primary_inputs:\n- {name: q, shape: [batch, seq_q, head_dim], dtype: bf16}',
      good='primary_inputs:\n- {name: q, shape: [batch, seq_q, head_dim], dtype: bfloat16}')
def check_dtypes(ctx: Context) -> Iterator[Hit]:
    """Wiring rule 6: the ``dtype`` of a primary input or module output is one of float32, float16,
    bfloat16, int32, int64, bool, int, int8 (a missing dtype is not checked, as in CANNBot)."""
    for entry, path in _tensors(ctx):
        if "dtype" in entry and (not isinstance(entry["dtype"], str) or entry["dtype"] not in DTYPES):
            yield _hit(ctx, f"'{entry.get('name')}' dtype {entry['dtype']!r} is not one of {', '.join(sorted(DTYPES))}",
                       *path, "dtype")


@rule("OD-IF-11", "warning", "interfaces", "CANNBot module_interfaces.yaml (op)",
      "interface 'op' differs from the DESIGN.md op_name",
      bad='op: attention   # DESIGN.md op_name: my_op',
      good='op: my_op')
def check_op_name(ctx: Context) -> Iterator[Hit]:
    """The interface file's ``op`` names the same operator as the DESIGN.md front matter ``op_name``;
    a mismatch usually means the file belongs to another design."""
    op, name = _data(ctx).get("op"), ctx.front.get("op_name")
    if isinstance(op, str) and isinstance(name, str) and name.strip() and op != name:
        yield _hit(ctx, f"op {op!r} differs from the DESIGN.md op_name {name!r}", "op")


@rule("OD-IF-12", "error", "interfaces", "CANNBot module_interfaces.yaml (primary_inputs in golden signature order)",
      "a tensor is listed twice among the primary inputs or among one module's inputs",
      bad=('primary_inputs:\n- {name: q, shape: [batch], dtype: bfloat16}\n'
           '- {name: topk_indices, shape: [batch], dtype: int32}\n'
           '- {name: topk_indices, shape: [batch], dtype: int32}'),
      good=('primary_inputs:\n- {name: q, shape: [batch], dtype: bfloat16}\n'
            '- {name: topk_indices, shape: [batch], dtype: int32}\n'
            '- {name: kv_act_seqs, shape: [batch], dtype: int32}'))
def check_duplicate_inputs(ctx: Context) -> Iterator[Hit]:
    """``primary_inputs`` is the golden's signature, one entry per parameter, and a module's ``inputs``
    name each tensor it reads once: a name given twice is a signature no function can have (two
    parameters of one name), and usually means two planners each added the same tensor."""
    seen: set[str] = set()
    for i, entry in _mappings(ctx, "primary_inputs"):
        name = str(entry.get("name"))
        if name in seen:
            yield _hit(ctx, f"primary input '{name}' is listed twice", "primary_inputs", i)
        seen.add(name)
    for i, module in _modules(ctx):
        names: set[str] = set()
        for j, entry in _entries(module, "inputs"):
            name = str(entry.get("name"))
            if name in names:
                yield _hit(ctx, f"module {module.get('id')!r} lists input '{name}' twice", "modules", i, "inputs", j)
            names.add(name)
