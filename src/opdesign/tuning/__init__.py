"""The PTO-style cost model: rank the legal tilings around a plan (a filter for benchmarking).

:mod:`.isa` instruction cycles, :mod:`.space` candidates and hard rules, :mod:`.stages` per-stage
cycles and the FAI pipeline, :mod:`.rank` the ranking. It takes a SPEC and its plan, never the
estimator; text rendering is :mod:`opdesign.render.costmodel`.
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
