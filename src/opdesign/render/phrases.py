"""The words of a plan: phrase keys -> sentences (the planner states facts, this module says them).

A planner writes ``text("sk01.q_tile.perf", sq=8192, per_head=2)``
(:class:`~opdesign.plan.models.Phrase`); the sentence is the ``str.format`` pattern of that key
in the phrase tables ``templates/*/phrases.yaml`` (``common/`` for the shared plan helpers, one
table per skeleton template folder), filled with the phrase's ``args``. Keys are unique across the
tables. Besides the format specs of ``str.format`` (``{pct:.1f}``) a pattern may convert a field
with ``!j`` (a list of phrases joined by ``"; "``) or ``!b`` (brief: a long list of ints shortened
to its ends and its length); a phrase among the args is said in place.
"""

from __future__ import annotations

import string
from functools import cache
from typing import Any

from opdesign.io.paths import data_dir
from opdesign.io.yamlload import safe_load
from opdesign.plan.models import Phrase

#: The serialisation context that turns every phrase of a dumped model into its sentence.
SAY: dict[str, Any]


@cache
def phrase_table() -> dict[str, str]:
    """Every phrase key of ``templates/*/phrases.yaml`` and its pattern (ValueError on a repeated key)."""
    table: dict[str, str] = {}
    for path in sorted(data_dir("templates").glob("*/phrases.yaml")):
        for key, pattern in safe_load(path.read_text(encoding="utf-8")).items():  # libyaml, same data
            if key in table:
                raise ValueError(f"phrase {key} is defined twice ({path.parent.name})")
            table[key] = pattern
    return table


def _short(values: list[int], noun: str) -> str:
    """A list in full when short, else its first six, its last two and its length in ``noun``."""
    if len(values) <= 12:
        return str(values)
    return f"[{', '.join(map(str, values[:6]))}, ..., {', '.join(map(str, values[-2:]))}] ({len(values)} {noun})"


_SHORT_NOUNS = {"b": "q blocks", "n": "batches"}


class _Formatter(string.Formatter):
    def convert_field(self, value: Any, conversion: str | None) -> Any:
        if conversion == "j":
            return "; ".join(say(v) for v in value)
        if conversion in _SHORT_NOUNS:  # !b: one value per q block, !n: one per batch
            return _short(value, _SHORT_NOUNS[conversion])
        return super().convert_field(value, conversion)

    def format_field(self, value: Any, format_spec: str) -> Any:
        return say(value) if isinstance(value, Phrase) else super().format_field(value, format_spec)


_FORMATTER = _Formatter()


def say(value: Phrase | str) -> str:
    """The sentence of a phrase (a plain string comes back as it is).

    Raises:
        KeyError: the phrase key is in no phrase table, or its pattern names an argument the
            phrase lacks.
    """
    if not isinstance(value, Phrase):
        return value
    return _FORMATTER.vformat(phrase_table()[value.key], (), value.args)


def say_any(value: Any) -> Any:
    """:func:`say` for a phrase, anything else unchanged (the Jinja ``finalize`` hook)."""
    return say(value) if isinstance(value, Phrase) else value


SAY = {"say": say}
