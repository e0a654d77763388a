"""Disable comments: ``# opdesign: disable=ID[,ID]`` in a kernel ``.py``, ``<!-- opdesign: disable=ID -->``
in a DESIGN.md (:func:`apply_design`; the directives are read from markdown-it's html tokens by
:mod:`opdesign.validate.parse.document`).

Two forms, read from the file's comment tokens (:mod:`tokenize`, so a ``#`` inside a string is not a
comment):

- ``# opdesign: disable=OD-PC-05,OD-KN-06`` at the end of a line (or alone on it) suppresses those
  rules' findings on that line;
- ``# opdesign: disable-file=OD-PC-03`` anywhere suppresses those rules in the whole file.

Any rule can be suppressed this way except OD-DOC-01 (unusable input). Suppressed findings leave the
report's findings and summary and are listed in SARIF as ``suppressions`` (kind ``inSource``). A
disable that suppresses nothing, and an unknown rule id, are OD-DOC-09 warnings on the comment's line.
"""

from __future__ import annotations

import io
import re
import tokenize
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache

from opdesign.validate.model import Finding, SuppressedFinding

MARK = "opdesign:"
_DIRECTIVE = re.compile(r"#\s*opdesign:\s*(disable-file|disable)\s*=\s*([A-Za-z0-9_\-]+(?:\s*,\s*[A-Za-z0-9_\-]+)*)")
SUPPRESSION_RULE = "OD-DOC-09"
NEVER = frozenset({"OD-DOC-01"})


@dataclass(frozen=True)
class Disable:
    line: int
    whole_file: bool
    rule_ids: tuple[str, ...]


@lru_cache(maxsize=256)
def directives(text: str) -> tuple[Disable, ...]:
    """The disable comments of ``text`` in line order (none when it does not tokenize)."""
    if MARK not in text:
        return ()
    out = []
    try:
        for tok in tokenize.generate_tokens(io.StringIO(text).readline):
            if tok.type == tokenize.COMMENT and MARK in tok.string:
                match = _DIRECTIVE.match(tok.string)
                if match:
                    ids = tuple(dict.fromkeys(i.strip() for i in match.group(2).split(",")))
                    out.append(Disable(tok.start[0], match.group(1) == "disable-file", ids))
    except (tokenize.TokenError, SyntaxError):
        pass  # a file that does not tokenize: OD-PC-02 says so; its comments are not read
    return tuple(out)


def apply(text: str, findings: list[Finding], name: str) -> list[Finding]:
    """``findings`` of kernel ``name`` with its disable comments applied: suppressed ones become
    :class:`SuppressedFinding`, plus one OD-DOC-09 warning per unknown id or unused disable."""
    found = directives(text)
    if not found:
        return findings
    from opdesign.validate.engine.collect import get_rule

    used: set[tuple[int, str]] = set()
    out: list[Finding] = []
    for f in findings:
        by = None
        if f.file == name and f.rule not in NEVER and f.rule != SUPPRESSION_RULE:
            by = next((d for d in found if f.rule in d.rule_ids and (d.whole_file or d.line == f.line)), None)
        if by is None:
            out.append(f)
        else:
            used.add((by.line, f.rule))
            form = "disable-file" if by.whole_file else "disable"
            out.append(SuppressedFinding(**f.model_dump(), suppressed_by=f"# opdesign: {form}={f.rule} "
                                                                          f"(line {by.line})"))
    for d in found:
        form = "disable-file" if d.whole_file else "disable"
        for rule_id in d.rule_ids:
            if get_rule(rule_id) is None:
                why = f"unknown rule id {rule_id} in `# opdesign: {form}=` (`opdesign rules` lists them)"
            elif rule_id in NEVER:
                why = f"{rule_id} (unusable input) cannot be suppressed"
            elif (d.line, rule_id) not in used:
                where = "in this file" if d.whole_file else "on this line"
                why = f"`# opdesign: {form}={rule_id}` suppresses nothing {where}: remove it"
            else:
                continue
            out.append(Finding(rule=SUPPRESSION_RULE, level="warning", file=name, line=d.line, message=why))
    return out


def apply_design(directives: Iterable, findings: list[Finding], design: str) -> list[Finding]:
    """Apply ``<!-- opdesign: disable=ID -->``: warning-level rules only; each use listed as info, a
    disable that suppresses nothing as a warning; the suppressed findings stay as
    :class:`SuppressedFinding` (SARIF lists them)."""
    from opdesign.validate.engine.collect import get_rule

    notes: list[Finding] = []
    disabled: dict[str, int] = {}
    for directive in directives:
        for rule_id in directive.rule_ids:
            rule = get_rule(rule_id)
            if rule is None:
                why = f"unknown rule id {rule_id} in a disable comment"
            elif rule.level == "error":
                why = f"{rule_id} is error-level and cannot be suppressed: fix the design instead"
            elif rule.level == "info":
                why = f"{rule_id} is info-level: there is nothing to suppress"
            else:
                disabled.setdefault(rule_id, directive.line)
                continue
            notes.append(Finding(rule=SUPPRESSION_RULE, level="info", message=why, file=design, line=directive.line))
    counts = Counter(f.rule for f in findings if f.rule in disabled)
    kept = [f if f.rule not in disabled else SuppressedFinding(
        **f.model_dump(), suppressed_by=f"<!-- opdesign: disable={f.rule} --> (line {disabled[f.rule]})")
        for f in findings]
    notes += [Finding(rule=SUPPRESSION_RULE, level="info", file=design, line=line,
                      message=f"{rule_id} suppressed for this document ({counts[rule_id]} finding(s))")
              if counts[rule_id] else
              Finding(rule=SUPPRESSION_RULE, level="warning", file=design, line=line,
                      message=f"<!-- opdesign: disable={rule_id} --> suppresses nothing in this document: remove it")
              for rule_id, line in disabled.items()]
    return kept + notes
