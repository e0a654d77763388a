"""Tuning: rank the legal tilings around a plan with a PTO-style cost model, and hold the ranking to SIM.

The model: :mod:`.model` (instruction cycles, stages, parameters, calibration), :mod:`.space`
candidates and hard rules, :mod:`.rank` the ranking (it takes a SPEC and its plan, never the
estimator; text rendering is :mod:`opdesign.render.costmodel`). The loop's parts (issue 32): the SIM
result cache (:mod:`.simcache`), SIM jobs and warm workers (:mod:`.simjob`, :mod:`.pool`) and the
per-SPEC refit (:mod:`.refit`); ``opdesign tune`` itself is :mod:`opdesign.workflows.tune`, the
self-check's shape rule :mod:`opdesign.pypto_run.shrink`.
"""

from opdesign.tuning.pins import plan_fields, with_cube_tiles
from opdesign.tuning.rank import (
    CandidateRow,
    CostParams,
    Ranking,
    RejectedRow,
    parameter_table,
    rank_candidates,
    tuning_candidates,
    tuning_from_ranking,
)

__all__ = ["CandidateRow", "CostParams", "Ranking", "RejectedRow", "parameter_table", "rank_candidates",
           "plan_fields", "tuning_candidates", "tuning_from_ranking", "with_cube_tiles"]
