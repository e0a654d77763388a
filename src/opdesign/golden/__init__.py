"""Static (``ast``) decomposition estimator for golden files: never imports or runs them.

:mod:`.syntax` walks functions and calls, :mod:`.attention` recognises the attention structure
(matmuls, softmax, statistics inputs), :mod:`.estimate` turns it into a module count and reason.
"""

from opdesign.golden.estimate import GoldenReport, estimate_golden

__all__ = ["GoldenReport", "estimate_golden"]
