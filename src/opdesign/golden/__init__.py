"""Static (``ast``) decomposition estimator for golden files: never imports or runs them.

:mod:`.syntax` walks functions and calls, :mod:`.attention` recognises the attention structure
(matmuls, softmax, statistics inputs), :mod:`.estimate` turns it into a module count and reason.
"""

from __future__ import annotations

from typing import Any

__all__ = ["GoldenReport", "estimate_golden"]


def __getattr__(name: str) -> Any:
    """``GoldenReport`` and ``estimate_golden`` load :mod:`.estimate` (and its models) on first use, so
    importing :mod:`.names` (the SK-16 rules do) builds no model."""
    if name in __all__:
        from opdesign.golden import estimate

        return getattr(estimate, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
