"""markdown-it-py's core ``inline`` rule with a shortcut for inline text that holds no markup.

Most inline tokens of a DESIGN.md (table cells such as ``input`` or ``bfloat16``, plain prose
lines) hold no character any active inline rule starts at. For those, markdown-it's inline
parser runs the ``text`` rule over the whole content, finds nothing else and emits one ``text``
child whose content is the whole string (none for an empty string); :func:`inline` builds that
child directly and hands every other token to the parser unchanged. The shortcut is installed
only when the parser's rules are exactly the ones it was written for (:func:`install`), so another
markdown-it configuration parses as before; tests/test_validate_mdinline.py checks the children
are the parser's own.
"""

from __future__ import annotations

import re
from typing import Any

from markdown_it.token import Token

#: characters an active inline rule starts at: newline, escape, backticks, emphasis (``*`` ``_``),
#: link and image (``[`` ``]`` ``!``), autolink and inline HTML (``<``), entity (``&``); ``~`` too
_MARKUP = re.compile(r"[\n\\`*_\[\]!<&~]")
#: the rule chains the shortcut reproduces (the ``commonmark`` preset with tables and front matter)
INLINE_RULES = ["text", "newline", "escape", "backticks", "emphasis", "link", "image", "autolink", "html_inline",
                "entity"]
INLINE_RULES2 = ["balance_pairs", "emphasis", "fragments_join"]
CORE_RULES = ["normalize", "block", "inline", "text_join"]


def plain(content: str) -> bool:
    """Whether markdown-it parses ``content`` to (at most) one text child equal to it."""
    return _MARKUP.search(content) is None


def inline(state: Any) -> None:
    """The core ``inline`` rule (markdown_it.rules_core.inline) with the plain-text shortcut."""
    md = state.md
    for token in state.tokens:
        if token.type == "inline":
            if token.children is None:
                token.children = []
            content = token.content
            if plain(content):
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
