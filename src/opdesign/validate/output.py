"""Report formats of ``opdesign validate``: text (one finding per line), JSON, SARIF 2.1.0.

Text: ``path:line: RULE-ID level: message`` per finding, then a summary line.
JSON and SARIF are ASCII (``\\uXXXX`` escapes), so they read the same on any terminal.
JSON: ``{"files": [...], "findings": [{rule, level, message, file, line}], "summary": {error, warning, info}}``.
SARIF: one run whose ``tool.driver.rules`` lists every registered rule (id, help,
default level) and whose results carry ruleId, level (``info`` becomes
``note``), message.text and a physical location (relative URI, startLine >= 1),
as code-scanning UIs (GitHub) accept. Findings a disable comment suppressed are results too, with a
``suppressions`` entry (kind ``inSource``, the comment as justification).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any
from urllib.parse import quote

from opdesign.io.streams import ascii_json
from opdesign.validate.engine.collect import all_rules, get_rule
from opdesign.validate.model import Report

SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
SARIF_LEVEL = {"error": "error", "warning": "warning", "info": "note"}


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def format_text(report: Report, summary: bool = True) -> str:
    """One finding per line, then ``checked N files: E errors, W warnings, I infos`` (unless not ``summary``)."""
    lines = [f"{f.file}:{f.line}: {f.rule} {f.level}: {f.message}" for f in report.findings]
    if not summary:
        return "".join(line + "\n" for line in lines)
    s = report.summary
    lines.append(f"checked {_plural(len(report.files), 'file')}: {_plural(s.error, 'error')}, "
                 f"{_plural(s.warning, 'warning')}, {_plural(s.info, 'info')}")
    return "\n".join(lines) + "\n"


def format_statistics(report: Report) -> str:
    """``--statistics`` (as ruff's): one line per rule, most findings first: count, rule id, level and the
    rule's one-line message; then the summary line."""
    counts: dict[tuple[str, str], int] = {}
    for f in report.findings:
        counts[(f.rule, f.level)] = counts.get((f.rule, f.level), 0) + 1
    lines = []
    for (rule_id, level), n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])):
        rule = get_rule(rule_id)
        lines.append(f"{n:5d}\t{rule_id}\t[{level}]\t{rule.message if rule else ''}".rstrip())
    summary = format_text(Report.build(report.files, []), summary=True).splitlines()[-1]
    s = report.summary
    lines.append(summary.split(":")[0] + f": {_plural(s.error, 'error')}, {_plural(s.warning, 'warning')}, "
                                         f"{_plural(s.info, 'info')}")
    return "\n".join(lines) + "\n"


def format_json(report: Report) -> str:
    """The report as JSON, ASCII only (non-ASCII characters as ``\\uXXXX`` escapes: any terminal shows it)."""
    return ascii_json(report.model_dump_json(indent=2)) + "\n"


def _uri(path: str) -> str:
    """Relative URI reference (POSIX path, percent-encoded: spaces, ``#``, ``%``, ``?``, ``:``, non-ASCII)
    when the file is under the working directory, else an absolute ``file://`` URI (also encoded)."""
    absolute = Path(path).absolute()
    try:
        relative = absolute.relative_to(Path.cwd()).as_posix()
    except ValueError:
        return absolute.as_uri()
    return quote(relative, safe="/")  # ':' is encoded too, so no segment reads as a URI scheme


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("opdesign")
    except PackageNotFoundError:
        return "0"


def sarif(report: Report) -> dict[str, Any]:
    """The report as a SARIF 2.1.0 log (a dict)."""
    rules = list(all_rules().values())
    index = {r.id: i for i, r in enumerate(rules)}
    driver_rules = [{
        "id": r.id,
        "name": r.id.replace("-", ""),
        "shortDescription": {"text": r.message},
        "fullDescription": {"text": r.explanation or r.message},
        "help": {"text": f"{r.explanation}\n\nBad:\n{r.bad}\n\nGood:\n{r.good}\n\nSource: {r.source}",
                 "markdown": f"{r.explanation}\n\n**Bad**\n\n```\n{r.bad}\n```\n\n**Good**\n\n```\n{r.good}\n```"
                             f"\n\nSource: {r.source}"},
        "defaultConfiguration": {"level": SARIF_LEVEL[r.level]},
        "properties": {"tags": [r.family], "source": r.source},
    } for r in rules]
    results = []
    for f in report.findings:
        result: dict[str, Any] = {
            "ruleId": f.rule,
            "level": SARIF_LEVEL[f.level],
            "message": {"text": f.message},
            "locations": [{"physicalLocation": {"artifactLocation": {"uri": _uri(f.file)},
                                                "region": {"startLine": max(1, f.line)}}}],
        }
        if f.rule in index:
            result["ruleIndex"] = index[f.rule]
        results.append(result)
    for f in report.suppressed:  # suppressed by a disable comment: listed, marked as suppressed
        result = {
            "ruleId": f.rule,
            "level": SARIF_LEVEL[f.level],
            "message": {"text": f.message},
            "locations": [{"physicalLocation": {"artifactLocation": {"uri": _uri(f.file)},
                                                "region": {"startLine": max(1, f.line)}}}],
            "suppressions": [{"kind": "inSource", "justification": f.suppressed_by}],
        }
        if f.rule in index:
            result["ruleIndex"] = index[f.rule]
        results.append(result)
    return {
        "$schema": SARIF_SCHEMA,
        "version": "2.1.0",
        "runs": [{
            "tool": {"driver": {"name": "opdesign", "version": _version(), "rules": driver_rules}},
            "results": results,
        }],
    }


def format_sarif(report: Report) -> str:
    return json.dumps(sarif(report), indent=2) + "\n"


FORMATTERS = {"text": format_text, "json": format_json, "sarif": format_sarif}


def rule_text(rule_id: str) -> str | None:
    """Human view of one validator rule (``opdesign rules ID``): header, explanation, bad and good example."""
    r = get_rule(rule_id)
    if r is None:
        return None
    indent = lambda text: "\n".join(f"    {line}" for line in text.splitlines())
    return (f"{r.id}  ({r.level}, {r.family} rule; source: {r.source})\n  {r.message}\n\n"
            f"{r.explanation}\n\nbad:\n{indent(r.bad)}\n\ngood:\n{indent(r.good)}"
            + ("\n\n(needs the opdesign block of the front matter)" if r.needs_block else ""))
