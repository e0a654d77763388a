"""Static (``ast``) decomposition estimator for golden files: never imports or runs them.

:mod:`.syntax` walks functions and calls, :mod:`.attention` recognises the attention structure
(matmuls, softmax, statistics inputs), :mod:`.estimate` turns it into a module count and reason.
"""

from __future__ import annotations

from typing import Any

__all__ = ["GoldenReport", "analyse_golden", "estimate_golden"]


def __getattr__(name: str) -> Any:
    """``GoldenReport``, ``analyse_golden`` and ``estimate_golden`` load :mod:`.estimate` on first use (and
    the pydantic models of :mod:`.models` only for ``GoldenReport`` / ``estimate_golden``), so importing
    :mod:`.names` (the SK-16 rules do) runs no estimator code."""
    if name in __all__:
        from opdesign.golden import estimate

        return getattr(estimate, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
