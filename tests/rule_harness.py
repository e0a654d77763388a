"""Run a rule example or a per-rule case through the validator: a snippet wrapped into the smallest
document the rule can see.

The example's kind (``@rule(..., kind=...)``, default by family: see
:data:`opdesign.validate.api.DEFAULT_KIND`) says what the snippet is and where it goes:

- ``pseudocode``: Python code, the whole content of the pseudocode chapter's ```python fence.
  Leading ``# opdesign: {key: value, ...}`` comment lines (flow YAML) are also keys of the
  ``opdesign:`` block; the block is present when the rule needs it or such a line is given.
- ``block``: a YAML mapping with one key ``opdesign:``; its keys replace those of a generated block
  (the ``_base`` design of the skeleton it names: SK-01 performance by default).
- ``interfaces``: YAML whose top-level keys replace those of the minimal ``eval/module_interfaces.yaml``;
  a snippet that opens with ``schema_version:`` (or is no YAML mapping) is the whole file.
- ``markdown``: a fragment that opens with a chapter heading (``## Pseudocode``) replaces that
  chapter of the minimal document; one without a heading continues the verification chapter, whose
  last lines are the design-check table ``| check | result | basis |`` (so table rows extend it) (which
  carries the generated block when the rule needs one).
- ``document``: the whole DESIGN.md.
- ``kernel``: a whole kernel ``.py``, validated as a file (``validate_kernel_text``); lines are its own.
- ``api``: one Python expression calling ``validate_text`` / ``validate_paths`` with the names of
  :func:`api_names` (``design_text``, ``yaml_text``, ``op_dir``, ``with_kernel_blocks``).

The minimal document: front matter (schema_version, op_name ``my_op``, dynamic_axes), the seven
chapters in English with the tables the document rules require, a small SK-01 kernel in the
pseudocode fence, and an interface file with one module. Without a snippet it has no finding
(:func:`build` with no arguments; tests/rules/test_rule_examples.py checks that).

A finding's ``where`` is its line within the snippet when it falls inside it (1 = first snippet
line), else ``"design:N"`` / ``"interfaces:N"`` (line N of that file).
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from opdesign.validate import Report, validate_kernel_text, validate_paths, validate_text
from opdesign.validate.api import Rule

BASES = Path(__file__).resolve().parent / "fixtures" / "validate" / "_base"
OP = "my_op"
FRONT = f"schema_version: 1\nop_name: {OP}\ndynamic_axes:\n- {{name: batch, range: [1, 4], uniform: true}}\n"
BLOCK_HEADER = "# opdesign:"

KERNEL = '''\
@pypto.frontend.jit()
def my_kernel(q, k, v, attn_out):
    pypto.experimental.set_operation_options(combine_axis=True)
    for b_idx in pypto.loop(batch, name="batch"):
        qi = pypto.view(q, [Q_TILE, HEAD_DIM], [b_idx, 0], valid_shape=[seq_q, HEAD_DIM])
        kj = pypto.view(k, [KV_TILE, HEAD_DIM], [b_idx, 0], valid_shape=[seq_kv, HEAD_DIM])
        pypto.set_cube_tile_shapes([128, 128], [128, 128], [128, 128])
        sij = pypto.matmul(qi, kj, pypto.DT_FP32, b_trans=True)
        pypto.set_vec_tile_shapes(16, 128)
        pij = pypto.exp(sij)
        pypto.assemble(pypto.cast(pij, pypto.DT_BF16), [b_idx, 0], attn_out)
'''

CHAPTERS = {
    "contract": """\
## Operator Contract

| tensor | role | shape | dtype |
|---|---|---|---|
| q | input | [batch, seq_q, head_dim] | bfloat16 |

| name | type | priority | parameters |
|---|---|---|---|
| small | functional | P0 | batch=1 |
""",
    "graph": """\
## Compute Graph and API Mapping

| stage | computation | PyPTO API |
|---|---|---|
| C1 | `S = Q K^T` | `pypto.matmul` |
""",
    "decomposition": """\
## Decomposition and Module Boundaries

Decision: module_count = 1
""",
    "decisions": """\
## Patterns and Design Decisions

| card | reason |
|---|---|
| SK-01 | forward attention over KV tiles |

| parameter | current value | basis |
|---|---|---|
| q_tile | 128 | SK-01 safe baseline |

| option | value | basis |
|---|---|---|
| combine_axis | True | SK-01 configuration |

| loop | kind | bound |
|---|---|---|
| batch | pypto.loop | batch |

| state | dtype | where |
|---|---|---|
| oi | fp32 | Q-tile loop |
""",
    "pseudocode": "## Pseudocode\n\n```python\n" + KERNEL + "```\n",
    "verification": """\
## Verification Plan

| check | result | basis |
|---|---|---|
| C-TILE-03 UB budget | pass | 98304 B <= 196608 B |
""",
    "risks": "## Risks and Open Questions\n\nNone known.\n",
}

INTERFACES = f"""\
schema_version: 1
op: {OP}
primary_inputs:
- {{name: q, shape: [batch, seq_q, head_dim], dtype: bfloat16}}
modules:
- id: 1
  name: {OP}_sk01
  inputs: [{{name: q, source: primary}}]
  outputs: [{{name: attn_out, shape: [batch, seq_q, head_dim], dtype: bfloat16}}]
final_outputs: [{{name: attn_out, source: module_1}}]
composition_verification: {{rtol: 0.02, atol: 0.02}}
"""


@dataclass(frozen=True)
class Built:
    """A document built around a snippet; the snippet's first line is line ``offset + 1`` of ``file``."""

    design: str
    interfaces: str | None
    file: str | None = None  # "design" / "interfaces"; None: the snippet is not in a file (api)
    offset: int = 0
    length: int = 0

    def where(self, file: str, line: int) -> int | str:
        if file == self.file and self.offset < line <= self.offset + self.length:
            return line - self.offset
        return f"{file}:{line}"


def _base_block(overlay: dict[str, Any]) -> dict[str, Any]:
    name = {"SK-02": "sk02_en", "SK-16": "sk16_en"}.get(overlay.get("skeleton"), "perf_en")
    if name == "perf_en" and overlay.get("form") == "baseline":
        name = "baseline_zh"
    text = (BASES / name / "DESIGN.md").read_text(encoding="utf-8")
    return yaml.safe_load(text.split("---\n")[1])["opdesign"]


def _block_text(overlay_text: str | None, overlay: dict[str, Any]) -> str:
    """``opdesign:`` + the overlay's lines as written + the base keys it does not replace."""
    rest = {k: v for k, v in _base_block(overlay).items() if k not in overlay}
    dumped = yaml.safe_dump({"opdesign": rest}, sort_keys=False, default_flow_style=None, width=200)
    return (overlay_text.rstrip("\n") + "\n" + dumped.split("\n", 1)[1]) if overlay_text else dumped


def _document(front: str, chapters: dict[str, str]) -> str:
    return f"---\n{front}---\n# {OP} design\n\n" + "\n".join(chapters.values())


def _lines_before(text: str, marker: str) -> int:
    return text[: text.index(marker)].count("\n")


def _header_block(snippet: str) -> dict[str, Any]:
    overlay: dict[str, Any] = {}
    for line in snippet.splitlines():
        if not line.startswith(BLOCK_HEADER):
            break
        overlay.update(yaml.safe_load(line[len(BLOCK_HEADER):]) or {})
    return overlay


def build(kind: str = "document", snippet: str | None = None, needs_block: bool = False,
          interfaces: str | None = INTERFACES) -> Built:
    """The smallest document around ``snippet`` (see the module docstring); no snippet: the minimal one."""
    chapters, front = dict(CHAPTERS), FRONT
    if snippet is None:
        return Built(_document(front, chapters), interfaces)
    snippet = snippet.strip("\n") + "\n"
    length = snippet.count("\n")
    if kind == "document":
        return Built(snippet, interfaces, "design", 0, length)
    if kind == "interfaces":
        whole = snippet.startswith("schema_version:") or not _is_mapping(snippet)
        keys = set() if whole else set(yaml.safe_load(snippet))
        base = yaml.safe_load(INTERFACES)
        rest = yaml.safe_dump({k: v for k, v in base.items() if k not in keys}, sort_keys=False,
                              default_flow_style=None, width=200) if not whole else ""
        return Built(_document(front, chapters), snippet + rest, "interfaces", 0, length)
    if kind == "block":
        overlay = (yaml.safe_load(snippet) or {}).get("opdesign") if _is_mapping(snippet) else None
        block = _block_text(snippet, overlay) if isinstance(overlay, dict) else snippet
        text = _document(front + block, chapters)
        return Built(text, interfaces, "design", front.count("\n") + 1, length)
    if kind == "pseudocode":
        chapters["pseudocode"] = f"## Pseudocode\n\n```python\n{snippet}```\n"
        overlay = _header_block(snippet)
        if needs_block or overlay:
            front += _block_text(None, overlay) if not overlay else _overlay_dump(overlay)
        text = _document(front, chapters)
        return Built(text, interfaces, "design", _lines_before(text, "```python\n") + 1, length)
    if kind == "markdown":
        first = snippet.splitlines()[0].strip().casefold()
        key = next((k for k, body in CHAPTERS.items() if body.splitlines()[0].casefold() == first), None)
        chapters[key or "verification"] = snippet if key else chapters["verification"] + snippet
        text = _document(front + (_block_text(None, {}) if needs_block else ""), chapters)
        return Built(text, interfaces, "design", _lines_before(text, snippet), length)
    raise ValueError(f"unknown example kind {kind!r}")


def _overlay_dump(overlay: dict[str, Any]) -> str:
    block = {**_base_block(overlay), **overlay}
    return yaml.safe_dump({"opdesign": block}, sort_keys=False, default_flow_style=None, width=200)


def _is_mapping(text: str) -> bool:
    try:
        return isinstance(yaml.safe_load(text), dict)
    except yaml.YAMLError:
        return False


def with_kernel_blocks(count: int) -> str:
    """The minimal document with ``count`` kernel fences in its pseudocode chapter."""
    fence = "```python\n" + KERNEL + "```\n"
    chapters = dict(CHAPTERS, pseudocode="## Pseudocode\n\n" + "\n".join([fence] * count))
    return _document(FRONT, chapters)


def api_names(folder: Path) -> dict[str, Any]:
    """Names an ``api`` example may use: the minimal design, its interface text, an operator folder
    holding both (``op_dir``) and :func:`with_kernel_blocks`."""
    built = build()
    op_dir = folder / OP
    (op_dir / "eval").mkdir(parents=True, exist_ok=True)
    (op_dir / "DESIGN.md").write_text(built.design, encoding="utf-8")
    (op_dir / "eval" / "module_interfaces.yaml").write_text(built.interfaces or "", encoding="utf-8")
    (folder / "bare").mkdir(exist_ok=True)
    (folder / "bare" / "DESIGN.md").write_text(built.design, encoding="utf-8")
    return {"validate_text": validate_text, "validate_paths": validate_paths, "design_text": built.design,
            "yaml_text": built.interfaces, "op_dir": op_dir, "bare_dir": folder / "bare",
            "missing_dir": folder / "no_such_op", "with_kernel_blocks": with_kernel_blocks}


def run(kind: str, snippet: str, needs_block: bool = False, interfaces: str | None = INTERFACES
        ) -> list[tuple[str, int | str]]:
    """``[(rule, where)]`` of every finding of the snippet's document (``where``: see the module docstring)."""
    if kind == "api":
        with tempfile.TemporaryDirectory() as tmp:
            report: Report = eval(snippet, {"__builtins__": {}}, api_names(Path(tmp)))  # noqa: S307 - test input
            return [(f.rule, f"{'interfaces' if f.file.endswith('.yaml') else 'design'}:{f.line}")
                    for f in report.findings]
    if kind == "kernel":
        report = validate_kernel_text(snippet.strip("\n") + "\n", "kernel.py")
        return [(f.rule, f.line) for f in report.findings]
    built = build(kind, snippet, needs_block, interfaces)
    report = validate_text(built.design, "DESIGN.md", built.interfaces, "eval/module_interfaces.yaml")
    return [(f.rule, built.where("interfaces" if f.file.endswith(".yaml") else "design", f.line))
            for f in report.findings]


def run_example(rule: Rule, which: str) -> list[tuple[str, int | str]]:
    """Findings of a rule's ``bad`` or ``good`` example, in the document its kind describes."""
    return run(rule.example_kind, getattr(rule, which), rule.needs_block)
