"""Artifact rules of issue 30 (one plan, four artifacts that agree) that run on one DESIGN.md.

The folder-level comparison of a kernel with its design is :mod:`opdesign.validate.rules.crosscheck`.
"""

from __future__ import annotations

from collections.abc import Iterator

from opdesign.validate.api import Context, Hit, rule


@rule("OD-DOC-21", "error", "document", "opdesign validate (a table that does not parse is never skipped)",
      "a line that looks like a table row belongs to no table (a broken delimiter row, a stray pipe)",
      bad='### UB budget\n\n| item | bytes |\n|---|\n| total | 999 |',
      good='### UB budget\n\n| item | bytes |\n|---|---|\n| total | 999 |')
def check_unparsed_table_rows(ctx: Context) -> Iterator[Hit]:
    """Every line outside front matter and fenced code that starts with ``|`` belongs to a table the
    Markdown parser read (its header, delimiter or a row). A table whose delimiter row is broken
    (fewer cells than the header, a missing ``-``) is plain text to the parser, so the rules that read
    that table (the UB, L1 and L0 budgets, the design checks) would see no table and check nothing:
    it is reported at its first line instead, once per block of such lines."""
    covered: set[int] = set()
    for table in ctx.doc.tables:
        covered.update((table.line, table.line + 1))
        covered.update(row.line for row in table.rows)
    previous = -1
    for line, text in ctx.doc.prose_lines():
        if text.lstrip().startswith("|") and line not in covered:
            if line != previous + 1:
                header = text.strip()
                yield Hit(line, f"this table does not parse as a Markdown table (check its delimiter row: one "
                                f"`---` cell per header cell), so no rule reads it: {header[:80]}")
            previous = line
