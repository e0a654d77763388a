"""The validator's name for :mod:`opdesign.yamlsafe` (the strict loader every YAML input shares)."""

from __future__ import annotations

from opdesign.yamlsafe import MAX_ALIASES, MAX_DEPTH, MAX_NODES, Loaded, YamlProblem, load

__all__ = ["MAX_ALIASES", "MAX_DEPTH", "MAX_NODES", "Loaded", "YamlProblem", "load"]
