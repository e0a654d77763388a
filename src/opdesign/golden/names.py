"""Name patterns shared by the golden estimator and the SK-16 validator rules (no models: cheap to import)."""

from __future__ import annotations

import re

STATS_INPUT = re.compile(
    r"^(l|m|li|mi|l_i|m_i|lse|logsumexp|softmax_(lse|max|sum|stats?)|"
    r"(row|fwd|forward|stats?)_(max|sum|lse|l|m)|(max|sum|lse|l|m)_(fwd|forward|stats?|in|input))$"
)
