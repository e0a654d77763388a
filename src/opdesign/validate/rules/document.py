"""Document rules (OD-DOC): front matter, chapters, placeholders, tables, design checks, module count.

Source: the CANNBot design contract (pypto-op-design ``references/artifacts.yaml``,
``templates/DESIGN.md.tmpl`` and its quality self-check; domain.md §9) and the
gaps of its validator (anchors.md: the unfilled template passes, nothing checks
placeholders, empty tables or pre-filled "pass").
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from opdesign.catalog.headings import HEADINGS, SUBHEADINGS
from opdesign.validate.api import Context, Hit, rule
from opdesign.validate.parse.prose import holds_python, prose_pseudocode

_VERSION_TEXT = re.compile(r"^\d+(\.\d+)*$")  # a version number written as a string
PLACEHOLDER_WORDS = re.compile(r"\b(TODO|TBD|FIXME)\b|待补充|待确认|待填写|待定")
SLOT = re.compile(r"<([^<>\n]{1,80})>")
BRACED = re.compile(r"\{\s*[^\W\d][\w .\-|/]*\}")  # {slot}, {a|b} and {a / b} choice slots
HTML_TAGS = frozenset(
    ["a", "abbr", "b", "br", "code", "details", "div", "em", "hr", "i", "img", "kbd", "li", "ol", "p", "pre", "s",
     "small", "span", "strong", "sub", "summary", "sup", "table", "tbody", "td", "th", "thead", "tr", "u", "ul"])
PASS_WORDS = frozenset({"pass", "passed", "ok", "通过", "已通过", "✅", "✓", "✔", "yes", "是"})
EMPTY_BASIS = frozenset({"", "-", "—", "n/a", "na", "none", "无"})
CHECK_TABLE = ("check", "检查")
RESULT_COLUMN = ("result", "结果", "结论", "当前结论", "status")  # 当前结论: the CANNBot template's column
BASIS_COLUMN = ("basis", "依据", "evidence", "证据", "reason", "理由", "说明")
MODULE_COUNT = re.compile(r"(?:Decision|决策|决定)\s*[:：]\s*`?\s*module_count\s*=\s*([^\s`]+)", re.IGNORECASE)
# The typical-configurations table (CANNBot's older quality self-check) is not in the current CANNBot
# template: its absence is OD-DOC-12's warning. Aliases: any header cell (the "*").
TYPICAL_CONFIGS = ("*", "priority", "优先级")
# (chapter key, table name, aliases of the first header cell; "*" = any header cell)
REQUIRED_TABLES = (
    ("decisions", "tiling parameters", ("parameter", "参数")),
    ("decisions", "implementation config", ("option", "配置", "选项")),
    ("decisions", "loops", ("loop", "循环")),
    ("decisions", "state", ("state", "状态")),
    ("verification", "design checks", CHECK_TABLE),
)


@rule("OD-DOC-01", "error", "document", "opdesign validate (input contract)",
      "input unusable: missing, unreadable, binary, not UTF-8 or larger than the size limit",
      bad='validate_paths([missing_dir])   # no such folder: nothing is read, exit code 2',
      good='validate_paths([op_dir])   # op_dir/DESIGN.md: UTF-8 text under 256 KiB', kind='api')
def check_unusable(ctx: Context) -> Iterator[Hit]:
    """The file could not be read as a UTF-8 text document; nothing else is checked and the exit code is 2.

    Reported by the reader, not by a check: a missing path, a directory without
    DESIGN.md, a read error, NUL bytes (binary), invalid UTF-8, or more than
    256 KiB (generated designs are about 20 KB). A UTF-8 byte-order mark is accepted.
    """
    return iter(())


@rule("OD-DOC-02", "error", "document", "CANNBot artifacts.yaml (front matter)",
      "DESIGN.md must open with a YAML front-matter mapping between '---' lines",
      bad='# my_op design\n\nop_name: my_op',
      good=('---\nschema_version: 1\nop_name: my_op\ndynamic_axes:\n'
            '- {name: seq_kv, range: [1, 8192], uniform: true}\n---\n# my_op design'), kind='document')
def check_front_matter(ctx: Context) -> Iterator[Hit]:
    """The first line is exactly ``---`` and a later ``---`` line closes a YAML mapping.

    YAML is loaded safely (no object tags) with limits on aliases and nesting;
    a front matter that is a list or a scalar is not a mapping.
    """
    front = ctx.doc.front
    if not front.present:
        yield Hit(1, "no front matter: the first line must be '---' opening a YAML mapping")
    elif not front.closed:
        yield Hit(1, "front matter opened on line 1 is never closed by a '---' line")
    elif front.problem:
        yield Hit(front.problem_line, f"front matter: {front.problem}")
    elif not isinstance(front.data, dict):
        kind = "empty" if front.data is None else f"a YAML {type(front.data).__name__}"
        yield Hit(front.first_line, f"front matter is {kind}, expected a mapping")


@rule("OD-DOC-03", "error", "document", "CANNBot artifacts.yaml (required front-matter keys)",
      "front matter needs schema_version, a non-empty op_name string and a non-empty dynamic_axes list",
      bad="---\nschema_version: 1\nop_name: ''\ndynamic_axes: []\n---\n# my_op design",
      good=('---\nschema_version: 1\nop_name: my_op\ndynamic_axes:\n'
            '- {name: seq_kv, range: [1, 8192], uniform: true}\n---\n# my_op design'), kind='document')
def check_front_keys(ctx: Context) -> Iterator[Hit]:
    """``schema_version`` (an integer), ``op_name`` (a non-empty string) and ``dynamic_axes``
    (a non-empty list: a design needs at least one real dynamic axis, domain.md §9). Each axis is a
    name (``[B]``, ``["B", "S"]``: how both CANNBot templates write it) or a mapping with a non-empty
    ``name`` (how opdesign writes it); a mapping's ``range``, when given, is ``[lo, hi]`` integers, lo <= hi.
    Without the ``opdesign:`` block, a string ``schema_version`` such as ``"2.1"`` (CANNBot's earlier
    template) is accepted with an info."""
    data = ctx.doc.front.data
    if not isinstance(data, dict):
        return
    first = ctx.doc.front.first_line
    version = data.get("schema_version")
    if "schema_version" not in data:
        yield Hit(first, "front matter has no schema_version")
    elif isinstance(version, str) and _VERSION_TEXT.match(version.strip()) and ctx.block is None:
        yield Hit(ctx.doc.front.line("schema_version"),
                  f"schema_version is the string {version!r}, as CANNBot's earlier DESIGN.md template writes it; "
                  "accepted (the current contract writes an integer)", level="info")
    elif not isinstance(version, int) or isinstance(version, bool) or version < 1:
        yield Hit(ctx.doc.front.line("schema_version"), f"schema_version must be a positive integer, got {version!r}")
    name = data.get("op_name")
    if "op_name" not in data:
        yield Hit(first, "front matter has no op_name")
    elif not isinstance(name, str) or not name.strip():
        yield Hit(ctx.doc.front.line("op_name"), f"op_name must be a non-empty string, got {name!r}")
    axes = data.get("dynamic_axes")
    if "dynamic_axes" not in data:
        yield Hit(first, "front matter has no dynamic_axes (at least one real dynamic axis is required)")
    elif not isinstance(axes, list) or not axes:
        yield Hit(ctx.doc.front.line("dynamic_axes"), "dynamic_axes is empty: list at least one dynamic axis, by name "
                  "([B]) or as a mapping (- {name: seq_kv})" if axes in (None, [], "") else
                  f"dynamic_axes must be a list of axes, got the {type(axes).__name__} {axes!r}")
    else:
        for i, axis in enumerate(axes):
            where = ctx.doc.front.line("dynamic_axes", i)
            if isinstance(axis, str) and axis.strip():
                continue
            if not isinstance(axis, dict) or not isinstance(axis.get("name"), str) or not axis["name"].strip():
                yield Hit(where, f"dynamic_axes[{i}] must be an axis name or a mapping with a non-empty name, "
                                 f"got {axis!r}")
            elif "range" in axis and not _int_range(axis["range"]):
                yield Hit(ctx.doc.front.line("dynamic_axes", i, "range"),
                          f"dynamic_axes[{i}].range must be [lo, hi] integers with lo <= hi, got {axis['range']!r}")


def _int_range(value: Any) -> bool:
    return (isinstance(value, list) and len(value) == 2
            and all(isinstance(v, int) and not isinstance(v, bool) for v in value) and value[0] <= value[1])


@rule("OD-DOC-04", "error", "document", "CANNBot artifacts.yaml (required headings)",
      "a required chapter of the CANNBot contract is missing",
      bad=('---\nschema_version: 1\nop_name: my_op\ndynamic_axes: [{name: batch}]\n---\n## Operator Contract\n'
           '## Pseudocode'),
      good=('---\nschema_version: 1\nop_name: my_op\ndynamic_axes: [{name: batch}]\n---\n'
            '## 算子契约\n## 计算图与 API 映射\n'
            '## 分解与模块边界\n## 范式与设计决策\n## 伪代码\n## 验证方案 / Verification Plan\n## 风险与开放问题'),
      kind='document')
def check_chapters(ctx: Context) -> Iterator[Hit]:
    """Seven chapters: operator contract; compute graph and API mapping; decomposition and module
    boundaries; patterns and design decisions; pseudocode; verification plan; risks and open questions.

    Headings of any level match in English or Chinese (``opdesign.catalog.headings.HEADINGS``),
    case-insensitively; for ``验证方案 / Verification Plan`` either half alone
    matches; a leading section number (``5.``) is ignored. A heading inside a
    fenced code block is code, not a heading.
    """
    found = {h.chapter for h in ctx.doc.headings}
    for key, title in HEADINGS["en"].items():
        if key not in found:
            yield Hit(1, f"missing chapter '{title}' ({HEADINGS['zh'][key]})")


@rule("OD-DOC-11", "error", "document", "CANNBot artifacts.yaml (required headings, each once)",
      "a required chapter of the CANNBot contract appears more than once",
      bad=('## Pseudocode\n\n```python\n@pypto.frontend.jit()\ndef overview(q, k, v, attn_out):\n'
           '    pypto.experimental.set_operation_options(combine_axis=True)\n```\n\n## Pseudocode\n\n'
           'The real kernel follows.'),
      good=('## Pseudocode\n\n### Overview\n\n```python\n@pypto.frontend.jit()\ndef overview(q, k, v, attn_out):\n'
            '    pypto.experimental.set_operation_options(combine_axis=True)\n```\n\n### Kernel\n\n'
            'The real kernel follows.'))
def check_duplicate_chapters(ctx: Context) -> Iterator[Hit]:
    """Each of the seven chapters appears once (English or Chinese name, any heading level, as
    OD-DOC-04 matches them). A second chapter of the same name splits the content the rules read
    (tables, the pseudocode): which one is the design is ambiguous, and a decoy can hide the real
    one. Reported at the second heading."""
    first: dict[str, int] = {}
    for heading in ctx.doc.headings:
        if heading.chapter is None:
            continue
        if heading.chapter in first:
            yield Hit(heading.line, f"chapter '{heading.text}' again (first at line {first[heading.chapter]}): "
                                    "each required chapter appears once")
        else:
            first[heading.chapter] = heading.line


def _front_strings(value: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[tuple[Any, ...], str]]:
    if isinstance(value, str):
        yield path, value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _front_strings(item, path + (str(key),))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from _front_strings(item, path + (i,))


def placeholders(text: str) -> list[str]:
    """Template placeholders in a piece of prose: ``<slot>``, ``{slot}``, TODO / TBD / FIXME, 待补充 / 待确认 / ..."""
    found = [m.group(0) for m in PLACEHOLDER_WORDS.finditer(text)]
    if "<" not in text and "{" not in text:  # no slot can match: most prose (600 pieces in a design)
        return found
    for m in SLOT.finditer(text):
        inner = m.group(1).strip()
        word = inner.split()[0].rstrip("/").lower() if inner else ""
        if (inner and not inner.startswith(("!", "/", "=", "-")) and (inner[0].isalpha() or inner[0] == "_")
                and word not in HTML_TAGS and "://" not in inner and "@" not in inner):
            found.append(m.group(0))
    found += [m.group(0) for m in BRACED.finditer(text)]
    return found


@rule("OD-DOC-05", "error", "document", "CANNBot quality self-check (no placeholders)",
      "template placeholder left in the document",
      bad=('## Verification Plan\n\n| check | result | basis |\n|---|---|---|\n'
           '| C-TILE-03 UB budget | pass | <UB_TOTAL> B, TODO |'),
      good=('## Verification Plan\n\n| check | result | basis |\n|---|---|---|\n'
            '| C-TILE-03 UB budget | pass | 98304 B <= 196608 B |'))
def check_placeholders(ctx: Context) -> Iterator[Hit]:
    """Template slots ``<...>`` and ``{...}``, ``TODO``, ``TBD``, ``FIXME``, ``待补充``, ``待确认``,
    ``待填写`` or ``待定`` left in prose, tables, headings, front-matter values or string values of
    ``eval/module_interfaces.yaml``.

    Fenced code and inline code spans are not prose: ``[M, N]``, dict literals
    and comparisons there are fine; HTML tags (``<br>``), autolinks and
    comments are not slots. The exception is plain-text pseudocode (a pseudocode chapter without
    Python code, :mod:`opdesign.validate.parse.prose`): its text blocks are prose, and the CANNBot
    template's ``<入口与输入输出>`` lines left in them are slots.
    """
    for path, value in _front_strings(ctx.doc.front.data):
        found = placeholders(value)
        if found:
            yield Hit(ctx.doc.front.line(*path), f"placeholder {', '.join(found)} left in front matter")
    for span in ctx.doc.spans:
        found = placeholders(span.text)
        if found:
            yield Hit(span.line, f"placeholder {', '.join(dict.fromkeys(found))} left in the document")
    if prose_pseudocode(ctx.doc) is not None:
        for fence in ctx.doc.fences:
            if fence.chapter != "pseudocode" or holds_python(fence):
                continue
            for n, line in enumerate(fence.content.splitlines()):
                found = placeholders(line)
                if found:
                    yield Hit(fence.first_line + n, f"placeholder {', '.join(dict.fromkeys(found))} left in the "
                                                    "plain-text pseudocode")
    for path, value in _front_strings(ctx.interfaces.data if ctx.interfaces else None):
        found = placeholders(value)
        if found:
            yield Hit(ctx.iface_line(*path), f"placeholder {', '.join(found)} left in the interface file",
                      interfaces=True)


def _matches(header: list[str], aliases: tuple[str, ...]) -> bool:
    cells = [c.casefold() for c in header]
    if aliases[0] == "*":
        return any(c.startswith(a) for c in cells for a in aliases[1:])
    return bool(cells) and any(cells[0].startswith(a) for a in aliases)


def _is_empty(table_rows: list[Any]) -> bool:
    return not table_rows or all(not cell.strip() for row in table_rows for cell in row.cells)


@rule("OD-DOC-06", "error", "document", "CANNBot DESIGN.md template (required tables)",
      "a required table is missing, or a table has no filled row",
      bad='## Verification Plan\n\n| check | result | basis |\n|---|---|---|\n| | | |',
      good=('## Verification Plan\n\n| check | result | basis |\n|---|---|---|\n'
            '| C-TILE-03 UB budget | pass | 98304 B <= 196608 B |'))
def check_tables(ctx: Context) -> Iterator[Hit]:
    """Every table has at least one row with a non-blank cell, and each chapter has the tables of the
    CANNBot template: tiling parameters, implementation config, loops and state in the decisions chapter (first column ``parameter`` / ``option`` /
    ``loop`` / ``state``, or ``参数`` / ``配置`` / ``循环`` / ``状态``); design checks (``check`` /
    ``检查`` first column, or any table under the Design Checks / 设计检查结果 sub-heading) in the
    verification plan. A missing table is reported at its chapter heading: an error with the ``opdesign:``
    block, a warning without it (CANNBot's ``references/artifacts.yaml`` requires headings and keys, not
    tables: decisions written as prose bullets are valid, only not checkable). An empty table: an error."""  # noqa: E501 (the rule's explanation, printed as written)
    for table in ctx.doc.tables:
        if _is_empty(table.rows):
            yield Hit(table.line, f"table '{' | '.join(table.header)}' has no filled row")
    for chapter, name, aliases in REQUIRED_TABLES:
        heading = ctx.doc.chapter_heading(chapter)
        if heading is None:
            continue
        found = (design_check_tables(ctx) if aliases is CHECK_TABLE
                 else [t for t in ctx.doc.tables if t.chapter == chapter and _matches(t.header, aliases)])
        if not found:
            wanted = " / ".join(a for a in aliases if a != "*")
            cannbot = ctx.block is None  # a CANNBot design: its contract asks for headings and keys, not tables
            yield Hit(heading.line, f"chapter '{heading.text}' has no {name} table (column '{wanted}')" + (
                ": opdesign's convention, not the CANNBot contract; a table makes it checkable" if cannbot else ""),
                level="warning" if cannbot else None)


@rule("OD-DOC-12", "warning", "document", "CANNBot quality self-check (typical configs, 7 columns)",
      "the operator contract has no typical-configurations table (a priority column)",
      bad=('## Operator Contract\n\n| tensor | role | shape | dtype |\n|---|---|---|---|\n'
           '| q | input | [B, S, D] | bfloat16 |'),
      good=('## Operator Contract\n\n| name | type | priority | parameters |\n|---|---|---|---|\n'
            '| small | functional | P0 | batch=1 |'))
def check_typical_configs(ctx: Context) -> Iterator[Hit]:
    """The operator contract lists the typical configurations as a table with a ``priority`` /
    ``优先级`` column (name, type functional / performance, priority P0-P3, parameters, input and
    output shapes, note: the CANNBot quality self-check); verification runs them in priority order.
    A warning, not an error: the current CANNBot template (``DESIGN.md.tmpl``) has no such table and
    a design written from it is otherwise complete; without the ``opdesign:`` block, an info."""
    heading = ctx.doc.chapter_heading("contract")
    if heading is None:
        return
    if not any(t.chapter == "contract" and _matches(t.header, TYPICAL_CONFIGS) for t in ctx.doc.tables):
        yield Hit(heading.line, f"chapter '{heading.text}' has no typical configurations table "
                                "(column 'priority / 优先级')", level=None if ctx.block is not None else "info")


def design_check_tables(ctx: Context) -> list[Any]:
    """Tables of the verification chapter with a ``check`` / ``检查`` first column, or under the
    design-checks sub-heading (``opdesign.catalog.headings.SUBHEADINGS``: Design Checks / 设计检查结果)."""
    names = {table["checks"].casefold() for table in SUBHEADINGS.values()}
    return [t for t in ctx.doc.tables if t.chapter == "verification"
            and (_matches(t.header, CHECK_TABLE) or t.section.strip().casefold() in names)]


@rule("OD-DOC-07", "error", "document", "CANNBot DESIGN.md template (no pre-filled pass)",
      "a design check says 'pass' without a basis",
      bad='| C-TILE-03 UB budget | pass | |',
      good='| C-TILE-03 UB budget | pass | 98304 B <= 196608 B |')
def check_pass_basis(ctx: Context) -> Iterator[Hit]:
    """A design-check row whose result is pass / ok / 通过 / ✅ must say why in its basis column
    (``basis`` / ``依据`` / ``evidence``): the figures or the rule that was checked. A table without a
    basis column cannot support any "pass"."""
    for table in design_check_tables(ctx):
        result = table.column(*RESULT_COLUMN)
        basis = table.column(*BASIS_COLUMN)
        if result is None:
            continue
        for row in table.rows:
            if result >= len(row.cells) or row.cells[result].strip("* ").casefold() not in PASS_WORDS:
                continue
            if basis is None:
                yield Hit(row.line, f"'{row.cells[0]}' says pass but the table has no basis column")
                continue
            text = row.cells[basis].strip() if basis < len(row.cells) else ""
            if text.casefold() in EMPTY_BASIS or placeholders(text):
                yield Hit(row.line, f"'{row.cells[0]}' says pass with no basis")


def module_count_decision(ctx: Context) -> tuple[int, str] | None:
    """(line, value text) of ``Decision: module_count = N`` outside code, or None."""
    for line, text in ctx.doc.prose_lines():
        match = MODULE_COUNT.search(text)
        if match:
            return line, match.group(1)
    return None


@rule("OD-DOC-08", "error", "document", "CANNBot workflow step 3 (Decision: module_count = N)",
      "'Decision: module_count = N' missing, or N differs from the modules of the interface file",
      bad=('## Decomposition and Module Boundaries\n\n'
           'Decision: module_count = 2   (the interface file lists one module)'),
      good='## Decomposition and Module Boundaries\n\nDecision: module_count = 1')
def check_module_count(ctx: Context) -> Iterator[Hit]:
    """The decomposition chapter records ``Decision: module_count = N`` (``决策:`` also accepted),
    N is an integer, and N equals the number of modules in ``eval/module_interfaces.yaml`` and the
    ``module_count`` of the ``opdesign:`` block when those are present."""
    found = module_count_decision(ctx)
    if found is None:
        heading = ctx.doc.chapter_heading("decomposition")
        yield Hit(heading.line if heading else 1, "no 'Decision: module_count = N' line")
        return
    line, text = found
    if not text.isdigit():
        yield Hit(line, f"module_count must be an integer, got {text!r}")
        return
    count = int(text)
    others = []
    data = ctx.interfaces.data if ctx.interfaces else None
    if isinstance(data, dict) and isinstance(data.get("modules"), list) and len(data["modules"]) != count:
        others.append(f"the interface file lists {len(data['modules'])}")
    stated = (ctx.block or {}).get("module_count")
    if isinstance(stated, int) and not isinstance(stated, bool) and stated != count:
        others.append(f"the opdesign block says {stated}")
    if others:
        yield Hit(line, f"module_count = {count} but {' and '.join(others)}")


@rule("OD-DOC-09", "info", "document", "opdesign validate (inline suppression)",
      "an inline suppression comment was applied, ignored or refused",
      bad=('## Risks and Open Questions\n\n'
           '<!-- opdesign: disable=C-TILE-03 -->  (error-level: refused, listed as info)'),
      good='## Risks and Open Questions\n\nNone known.')
def check_suppressions(ctx: Context) -> Iterator[Hit]:
    """``<!-- opdesign: disable=RULE-ID[,RULE-ID] -->`` anywhere in the Markdown (not in code) suppresses
    those warning-level rules for the whole document; each use is listed as info. Error-level rules
    cannot be suppressed (fix the design instead), info rules need no suppression; both are said so
    in an info finding, as is an unknown rule id. A disable that suppresses nothing is a warning.

    In a kernel ``.py``, ``# opdesign: disable=RULE-ID[,RULE-ID]`` suppresses those rules on its line and
    ``# opdesign: disable-file=RULE-ID`` in the whole file, at any level (not OD-DOC-01); an unknown id
    and a disable that suppresses nothing are warnings (:mod:`opdesign.validate.engine.inline`). Suppressed
    findings are listed in SARIF with ``suppressions``. Emitted by the engine after all checks ran."""
    return iter(())


@rule("OD-DOC-10", "error", "document", "opdesign validate (robustness)",
      "a rule could not be evaluated on this input",
      bad='validate_text(with_kernel_blocks(17), interfaces_text=yaml_text)   # only MAX_KERNELS = 16 are checked',
      good='validate_text(with_kernel_blocks(2), interfaces_text=yaml_text)', kind='api')
def check_internal(ctx: Context) -> Iterator[Hit]:
    """A check raised an unexpected exception on this document. The document is not reported as
    valid for that rule; the message names the rule and the exception. Please report it with the
    input. Emitted by the engine."""
    return iter(())
