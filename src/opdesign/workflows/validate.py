"""``validate`` as the CLI, the agent and the tests run it: the validator with the registered skeletons.

The validator (:mod:`opdesign.validate`) never imports :mod:`opdesign.skeletons`; this module hands it
the registry's skeletons once, on import (:func:`opdesign.validate.api.use_skeletons`), and re-exports
the validator's entry points, so ``from opdesign.workflows.validate import validate_paths`` is ready
to run.
"""

from __future__ import annotations

from opdesign.skeletons.registry import FALLBACK, SKELETONS
from opdesign.validate.api import use_skeletons

use_skeletons(SKELETONS, FALLBACK)

from opdesign.validate import (  # noqa: E402 - the skeletons are handed in first
    MAX_INPUT_BYTES,
    Finding,
    Report,
    Rule,
    Summary,
    all_rules,
    get_rule,
    validate_kernel_text,
    validate_paths,
    validate_text,
)
from opdesign.validate.engine import (  # noqa: E402
    DESIGN_NAME,
    INTERFACES_PATH,
    Unusable,
    kernel_findings_loaded,
    validate_loaded,
)
from opdesign.validate.engine.rulebook import explain, lookup_text, row_line, rule_rows  # noqa: E402

__all__ = ["DESIGN_NAME", "INTERFACES_PATH", "MAX_INPUT_BYTES", "Finding", "Report", "Rule", "Summary", "Unusable",
           "all_rules", "explain", "get_rule", "kernel_findings_loaded", "lookup_text", "row_line", "rule_rows",
           "validate_kernel_text", "validate_loaded", "validate_paths", "validate_text"]
