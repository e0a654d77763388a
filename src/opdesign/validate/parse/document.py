"""Parse a DESIGN.md into what the rules look at, from markdown-it-py tokens (never by grepping).

- front matter: the ``---`` block (mdit-py-plugins ``front_matter``), loaded with
  :mod:`opdesign.io.yamlsafe` (lines are file lines);
- headings with their level and line; a heading inside fenced code is code;
- chapters: headings matched against the CANNBot chapter names
  (``opdesign.catalog.headings.HEADINGS``, English and Chinese, case-insensitive; the
  English or Chinese half of the bilingual ``验证方案 / Verification Plan``
  alone also matches; a leading section number such as ``5.`` is ignored);
- tables (header cells, body rows with lines, the enclosing chapter);
- fenced code blocks (content, first content line, chapter);
- prose spans outside code (text and inline HTML, one per source line) for
  the placeholder rule, and ``<!-- opdesign: disable=ID -->`` directives.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import cache
from typing import Any

from opdesign.catalog.headings import HEADINGS
from opdesign.io import yamlsafe

_DIRECTIVE = re.compile(r"<!--\s*opdesign:\s*disable\s*=\s*([A-Za-z0-9_,\- ]+?)\s*-->")
_NUMBERING = re.compile(r"^(?:\d+(?:\.\d+)*\.?|[一二三四五六七八九十]+、)\s*")


@dataclass
class Heading:
    level: int
    text: str
    line: int
    chapter: str | None  # key of headings.HEADINGS when the heading is a chapter


@dataclass
class Row:
    cells: list[str]
    line: int


@dataclass
class Table:
    header: list[str]
    rows: list[Row]
    line: int
    chapter: str | None
    section: str  # text of the nearest heading above

    def column(self, *aliases: str) -> int | None:
        """Index of the first header cell starting with one of ``aliases`` (case-insensitive)."""
        for i, cell in enumerate(self.header):
            name = cell.casefold()
            if any(name.startswith(a) for a in aliases):
                return i
        return None


@dataclass
class Fence:
    info: str
    content: str
    first_line: int  # file line of the first content line
    chapter: str | None


@dataclass
class Span:
    """Prose outside code on one source line (text and inline HTML, code spans removed)."""

    text: str
    line: int


@dataclass
class Directive:
    rule_ids: list[str]
    line: int


@dataclass
class FrontMatter:
    present: bool
    closed: bool
    loaded: yamlsafe.Loaded | None = None
    problem: str | None = None
    problem_line: int = 1
    first_line: int = 2  # file line of the first YAML line

    @property
    def data(self) -> Any:
        return self.loaded.data if self.loaded else None

    def line(self, *path: Any) -> int:
        """File line of a front-matter node (nearest ancestor if absent)."""
        if self.loaded is None:
            return 1
        return self.loaded.line(*path, default=1) + self.first_line - 1


@dataclass
class Document:
    text: str
    lines: list[str]
    front: FrontMatter
    headings: list[Heading] = field(default_factory=list)
    tables: list[Table] = field(default_factory=list)
    fences: list[Fence] = field(default_factory=list)
    spans: list[Span] = field(default_factory=list)
    directives: list[Directive] = field(default_factory=list)
    front_end: int = 0  # file line of the closing '---' (0 without front matter)

    def chapter_heading(self, key: str) -> Heading | None:
        return next((h for h in self.headings if h.chapter == key), None)

    def prose_lines(self) -> list[tuple[int, str]]:
        """(file line, raw text) of every line outside the front matter and fenced code."""
        hidden: set[int] = set(range(1, self.front_end + 1))
        for fence in self.fences:
            hidden.update(range(fence.first_line - 1, fence.first_line + len(fence.content.splitlines()) + 1))
        return [(n, text) for n, text in enumerate(self.lines, start=1) if n not in hidden]



def _normalise(text: str) -> str:
    text = " ".join(text.split()).casefold()
    return re.sub(r"\s*/\s*", " / ", text)


@cache
def chapter_names() -> dict[str, str]:
    """Normalised heading text -> chapter key, from ``opdesign.catalog.headings.HEADINGS`` (both languages)."""
    names: dict[str, str] = {}
    for table in HEADINGS.values():
        for key, title in table.items():
            names[_normalise(title)] = key
            for part in title.split(" / "):
                names[_normalise(part)] = key
    return names


def match_chapter(text: str) -> str | None:
    """Chapter key of a heading text, or None (a leading section number is ignored)."""
    name = _normalise(_NUMBERING.sub("", text.strip(), count=1))
    return chapter_names().get(name)


@cache
def _parser():  # markdown-it with tables and front matter
    from markdown_it import MarkdownIt
    from mdit_py_plugins.front_matter import front_matter_plugin

    from opdesign.validate.parse.mdinline import install

    return install(MarkdownIt("commonmark").enable("table").use(front_matter_plugin))


def _inline_text(token: Any) -> str:
    return "".join(c.content for c in token.children or [] if c.type in ("text", "code_inline", "html_inline")).strip()


def _spans(token: Any) -> list[Span]:
    """Prose pieces of an inline token, one per source line, code spans left out."""
    base = token.map[0] + 1 if token.map else 1
    out: dict[int, list[str]] = {}
    offset = 0
    for child in token.children or []:
        if child.type in ("softbreak", "hardbreak"):
            offset += 1
        elif child.type in ("text", "html_inline"):
            out.setdefault(base + offset, []).append(child.content)
        elif child.type == "code_inline":
            out.setdefault(base + offset, []).append(" ")
    return [Span(text="".join(parts), line=line) for line, parts in out.items()]


def _front_matter(text: str, tokens: list[Any]) -> FrontMatter:
    if not tokens or tokens[0].type != "front_matter":
        starts = text.split("\n", 1)[0].rstrip("\r") == "---"
        return FrontMatter(present=starts, closed=False)
    fm = FrontMatter(present=True, closed=True)
    try:
        fm.loaded = yamlsafe.load(tokens[0].content, first_line=fm.first_line)
    except yamlsafe.YamlProblem as err:
        fm.problem = err.message
        fm.problem_line = err.line or 1  # a file line
    return fm


def parse(text: str) -> Document:
    """Parse DESIGN.md text (already decoded) into a :class:`Document`."""
    tokens = _parser().parse(text)
    doc = Document(text=text, lines=text.splitlines(), front=_front_matter(text, tokens))
    if doc.front.closed:
        doc.front_end = tokens[0].map[1]
    chapter: str | None = None
    chapter_level = 0
    section = ""
    table: Table | None = None
    row: Row | None = None
    in_head = False
    for i, tok in enumerate(tokens):
        kind = tok.type
        if kind == "heading_open":
            text_ = _inline_text(tokens[i + 1])
            level = int(tok.tag[1])
            key = match_chapter(text_)
            if key is not None:
                chapter, chapter_level = key, level
            elif chapter is not None and level <= chapter_level:
                chapter = None
            section = text_
            doc.headings.append(Heading(level=level, text=text_, line=tok.map[0] + 1, chapter=key))
        elif kind == "table_open":
            table = Table(header=[], rows=[], line=tok.map[0] + 1, chapter=chapter, section=section)
            doc.tables.append(table)
        elif kind == "tr_open" and table is not None:
            row = Row(cells=[], line=tok.map[0] + 1 if tok.map else table.line)
        elif kind in ("thead_open", "thead_close"):
            in_head = kind == "thead_open"
        elif kind == "tr_close" and table is not None and row is not None:
            if in_head:
                table.header = row.cells
            else:
                table.rows.append(row)
            row = None
        elif kind == "inline" and row is not None:
            row.cells.append(_inline_text(tok))
        elif kind == "table_close":
            table = None
        elif kind in ("fence", "code_block"):
            doc.fences.append(Fence(info=tok.info.strip(), content=tok.content,
                                    first_line=tok.map[0] + (2 if kind == "fence" else 1), chapter=chapter))
        elif kind == "html_block":
            _directives(doc, tok.content, tok.map[0] + 1)
            if not tok.content.lstrip().startswith("<!--"):
                doc.spans += [Span(text=line, line=tok.map[0] + 1 + n)
                              for n, line in enumerate(tok.content.splitlines())]
        if kind == "inline":
            doc.spans += _spans(tok)
            for child in tok.children or []:
                if child.type == "html_inline":
                    _directives(doc, child.content, tok.map[0] + 1 if tok.map else 1)
    doc.spans = [s for s in doc.spans if s.text.strip()]
    return doc


def _directives(doc: Document, html: str, line: int) -> None:
    for match in _DIRECTIVE.finditer(html):
        ids = [part.strip().upper() for part in match.group(1).split(",") if part.strip()]
        doc.directives.append(Directive(rule_ids=ids, line=line + html[: match.start()].count("\n")))
