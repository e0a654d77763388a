"""markdown-it-py's core ``inline`` rule with a shortcut for inline text that holds no markup.

Most inline tokens of a DESIGN.md (table cells such as ``input``, ``[batch, seq_q, head_dim]`` or
``bfloat16``, plain prose lines) give markdown-it's inline parser nothing to do: it runs its rules over
the content, none produces a token, and what comes out is one ``text`` child whose content is the whole
string (none for an empty string). :func:`plain` recognises such content without running the rules,
and :func:`inline` builds that child directly; every other token goes to the parser unchanged. Plain
content holds none of the characters the active inline rules start at (newline, ``\\``, backticks,
``*``, ``!``, ``<``, ``&``, ``~``), and

- each ``_`` sits between two ASCII letters or digits (``seq_q``): such a delimiter can neither open
  nor close emphasis, so its text fragments are joined back into one;
- ``[`` / ``]`` only when no ``](`` follows a label and the document defines no link reference (the
  link rule then gives up and the brackets stay text).

The shortcut is installed only when the parser's rules are exactly the ones it was written for
(:func:`install`), so another markdown-it configuration parses as before; tests/unit/validate/test_validate_shortcuts.py
checks the children are the parser's own.

Measured for issue 29 (callgrind instructions, this shortcut off against on): ``opdesign validate`` of
one design 1832 M against 1720 M (6.5 % saved), a bulk ``validate`` of 23 designs 9089 M against 8324 M
(9.2 %). Kept: a throughput shortcut of the parser (over the 5 % bar), not a start-up tweak.
"""

from __future__ import annotations

import re
from typing import Any

from markdown_it.token import Token

#: characters an active inline rule starts at: newline, escape, backticks, emphasis (``*``), image
#: (``!``), autolink and inline HTML (``<``), entity (``&``); ``~`` too
_MARKUP = re.compile(r"[\n\\`*!<&~]")
#: an ``_`` that is not between two ASCII letters or digits (it might open or close emphasis)
_LOOSE_UNDERSCORE = re.compile(r"(?<![A-Za-z0-9])_|_(?![A-Za-z0-9])")
#: the rule chains the shortcut reproduces (the ``commonmark`` preset with tables and front matter)
INLINE_RULES = ["text", "newline", "escape", "backticks", "emphasis", "link", "image", "autolink", "html_inline",
                "entity"]
INLINE_RULES2 = ["balance_pairs", "emphasis", "fragments_join"]
CORE_RULES = ["normalize", "block", "inline", "text_join"]


def plain(content: str, env: dict[str, Any]) -> bool:
    """Whether markdown-it parses ``content`` (in a document whose environment is ``env``) to (at most)
    one text child equal to it."""
    if _MARKUP.search(content) is not None:
        return False
    if "_" in content and _LOOSE_UNDERSCORE.search(content) is not None:
        return False
    if "[" in content or "]" in content:
        return "references" not in env and "](" not in content
    return True


def inline(state: Any) -> None:
    """The core ``inline`` rule (markdown_it.rules_core.inline) with the plain-text shortcut."""
    md = state.md
    for token in state.tokens:
        if token.type == "inline":
            if token.children is None:
                token.children = []
            content = token.content
            if plain(content, state.env):
                if content:
                    token.children.append(Token("text", "", 0, content=content))
            else:
                md.inline.parse(content, md, state.env, token.children)


def install(md: Any) -> Any:
    """``md`` with :func:`inline` in place of its core ``inline`` rule, when its rules are the expected ones."""
    if (md.inline.ruler.get_active_rules() == INLINE_RULES and md.inline.ruler2.get_active_rules() == INLINE_RULES2
            and md.core.ruler.get_active_rules() == CORE_RULES and not md.options.get("linkify")):
        md.core.ruler.at("inline", inline)
    return md
