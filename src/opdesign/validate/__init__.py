"""``opdesign validate``: parse DESIGN.md (markdown-it-py), run the rule registry, report findings.

Library API (the CLI and the agent tools call the same functions)::

    from opdesign.validate import validate_paths, validate_text
    report = validate_paths(["custom/my_op"])          # DESIGN.md + eval/module_interfaces.yaml
    report = validate_text(text, interfaces_text=yaml)  # in-memory text (agents)
    report = validate_paths(["op/op_kernel.py"])        # a PyPTO kernel source (ast; file lines)
    report.findings  # [Finding(rule, level, message, file, line)], report.summary, report.exit_code

Rules: :func:`opdesign.validate.engine.collect.all_rules` (``opdesign rules`` lists them).
"""

from __future__ import annotations

from opdesign.validate.api import Rule
from opdesign.validate.engine import MAX_INPUT_BYTES, validate_kernel_text, validate_text
from opdesign.validate.engine.bulk import validate_paths
from opdesign.validate.engine.collect import all_rules, get_rule
from opdesign.validate.model import Finding, Report, Summary

__all__ = ["MAX_INPUT_BYTES", "Finding", "Report", "Rule", "Summary", "all_rules", "get_rule", "validate_paths",
           "validate_kernel_text", "validate_text"]
