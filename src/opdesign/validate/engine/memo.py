"""Findings of inputs already checked in this process, by content (a bulk run over copies, the MCP server).

The rules see a document's text and its interface input, never its path: the engine runs them with
placeholder file names (:data:`DESIGN`, :data:`INTERFACES`, :data:`KERNEL`) and this memo keeps the
findings under a digest of the inputs, so the same bytes under another path give the same findings
with that path. At most :data:`MEMO_SIZE` entries are kept (least recently used goes first); the
placeholders hold a NUL, which no checked text or path holds.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from collections.abc import Callable, Iterable

from opdesign.validate.analysis import astnodes
from opdesign.validate.model import Finding

#: placeholder file names of a memoised run (replaced by the names of each use)
DESIGN, INTERFACES, KERNEL = "\x00design", "\x00interfaces", "\x00kernel"
#: entries kept (a digest and the findings of one input each)
MEMO_SIZE = 512

_MEMO: OrderedDict[bytes, tuple[Finding, ...]] = OrderedDict()


def _digest(parts: Iterable[str]) -> bytes:
    h = hashlib.blake2b(digest_size=20)
    for part in parts:
        data = part.encode("utf-8", "surrogatepass")
        h.update(len(data).to_bytes(8, "little"))
        h.update(data)
    return h.digest()


def findings(key: Iterable[str], names: dict[str, str], compute: Callable[[], list[Finding]]) -> list[Finding]:
    """``compute()`` (findings filed under the placeholder names) once per ``key``, with each
    placeholder of ``names`` replaced by its real name."""
    digest = _digest(key)
    found = _MEMO.get(digest)
    if found is None:
        found = tuple(compute())
        _MEMO[digest] = found
        if len(_MEMO) > MEMO_SIZE:
            _MEMO.popitem(last=False)
    else:
        _MEMO.move_to_end(digest)
    return [f.model_copy(update={"file": names[f.file]}) if f.file in names else f for f in found]


def clear() -> None:
    """Forget every memoised run (and the parsed trees kept by :mod:`opdesign.validate.analysis.astnodes`)."""
    _MEMO.clear()
    astnodes.clear()
