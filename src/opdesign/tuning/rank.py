"""Rank the tilings of a KV-loop plan (SK-01) with a PTO-style lightweight cost model (issue 5).

The model filters, measurement decides: ``score_cycles`` orders candidates so that
only the best few go to a real compile-and-benchmark run. It is built from PTO
instruction cycles (:mod:`opdesign.tuning.model.isa`), per-stage pipes and the FAI
pipeline / load balance (:mod:`opdesign.tuning.model.stages`) over a candidate space
with every hard rule applied (:mod:`opdesign.tuning.space`). It never predicts
wall-clock time, and it says nothing about compile failures beyond the rules it checks.

Public API: :func:`rank_candidates` -> :class:`Ranking`, :func:`tuning_candidates`,
:class:`CostParams` (the figures without a cited source), :func:`parameter_table`.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from opdesign.plan.models import Plan
from opdesign.plan.tiles import cube_align
from opdesign.spec import Spec
from opdesign.tuning.model.isa import (
    FRACTAL_MACS,
    TCVT_CYCLES_PER_REPEAT,
    TCVT_HEAD_CYCLES,
    TMATMUL_HEAD_CYCLES,
    TRANSFER_HEAD_CYCLES,
    VECTOR_REPEAT_BYTES,
)
from opdesign.tuning.model.stages import BOTTLENECKS, STAGES, CostParams, core_loads, group_rows, score, useful_streams
from opdesign.tuning.space import (
    GEOMETRY,
    PV_FACTORS,
    QK_FACTORS,
    RULE_ORDER,
    STREAM_COUNTS,
    TILE_MIN,
    VEC_AREAS,
    VEC_COLS_MAX,
    check_rules,
    context,
    enumerate_candidates,
    enumerate_geometry,
    form_rules,
)

__all__ = ["CandidateRow", "CostParams", "Ranking", "RejectedRow", "parameter_table", "rank_candidates",
           "tuning_candidates", "tuning_from_ranking"]

KNOBS = ("q_tile", "kv_tile", "qk_tile", "pv_tile", "vec_tile", "unroll_factor", "head_group", "streams")
_ARRAY = {"q_tile": "q", "kv_tile": "kv", "unroll_factor": "u", "head_group": "g", "streams": "s"}


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Candidate(_Model):
    """The knobs of one candidate (tiles in elements)."""

    q_tile: int = Field(description="Q rows per loop step")
    kv_tile: int = Field(description="K/V columns per loop step")
    qk_tile: list[int] = Field(description="QK tile [m, n]: C1 m and n L1 (the S block), clipped to the step")
    pv_tile: list[int] = Field(description="PV tile [m, n]: C2 m and k L1 (the P block: Q rows, KV columns of P = "
                                           "rows of V per L1 load), clipped to the step")
    vec_tile: tuple[int, int] = Field(description="V1 TileShape [rows, cols]; V2 uses the same rows")
    unroll_factor: int = Field(description="KV-loop unroll factor (1 for a static range)")
    head_group: int = Field(description="AT-23 chains G interleaved in one body (1 = none)")
    streams: int = Field(description="concurrent task streams per core")
    kv_loop: str = Field(description="range (static, performance form), pypto.loop or loop_unroll")
    cube_tiles: dict[str, dict[str, list[int]]] = Field(description="C1/C2 m, k, n as [L0, L1]")
    form_rules: list[str] = Field(description="form rules the candidate breaks (SK-01-P1: the performance form's "
                                              "fixed q_tile; SK-01-P2: more KV tiles than its static range); "
                                              "ranked and shown, not dropped")


class CandidateRow(Candidate):
    """A legal candidate with its score; ``score_cycles`` ranks, it is not a run time."""

    rank: int
    score_cycles: int = Field(description="ranking figure in cycles: the tasks of all cores over the AIC pool or "
                                          "the longest online-softmax chain, whichever is longer, plus the dispatch")
    stages: dict[str, int] = Field(description="cycles per task: C1, V1, C2, V2 and the dispatch share sched")
    bottleneck: str = Field(description="what bounds the score: the stage that bounds the steady state (C1, V1, "
                                        "C2, V2 or sched) or fill (the latency of one online-softmax chain)")
    task_count: int
    tasks_per_core: int = Field(description="KV steps on the busiest core after the FAI greedy split")
    cores_busy: int
    epilogue_cycles: int = Field(description="per root: final O / l, cast and store (AIV)")
    chosen: bool = Field(description="the plan's own tiles")


class RejectedRow(Candidate):
    """A candidate that breaks a hard rule; ``rejected_rules`` holds the rule ids."""

    rejected_reason: str
    rejected_rules: list[str]


class Ranking(_Model):
    """Result of :func:`rank_candidates`."""

    op_name: str
    device: str
    form: str
    enumerated: int
    legal: int
    rejected_by_rule: dict[str, int] = Field(description="candidates breaking each rule (one may break several)")
    rows: list[CandidateRow] = Field(description="legal candidates, best first")
    rejected: list[RejectedRow] = Field(description="rejected candidates, best would-be score first")
    chosen_rank: int | None = Field(description="rank of the plan's tiles (head_group 1, streams 1)")
    form_breaking: int = Field(0, description="legal candidates flagged with a form rule (form_rules not empty)")
    chosen: CandidateRow | None
    note: str = "score_cycles ranks candidates for a benchmark run; it is not a wall-clock prediction"
    parameters: list[dict[str, Any]] = Field(default_factory=list,
                                             description="model figures not read from a cited table (parameter_table)")


def _unit(name: str) -> str:
    return "bytes/cycle" if name.endswith("bytes_per_cycle") else "cycles" if name.endswith("cycles") else "tasks"


def parameter_table(params: CostParams | None = None) -> list[dict[str, Any]]:
    """Every model figure not read from the formula table or the device profile: name, value, unit, reason."""
    params = params or CostParams()
    rows = [{"name": n, "value": getattr(params, n), "unit": _unit(n),
             "reason": f.description} for n, f in CostParams.model_fields.items()]
    cited = [
        ("TMATMUL_HEAD_CYCLES", TMATMUL_HEAD_CYCLES, "cycles", "pto-isa a2a3 cce_costmodel_cube.hpp mad head"),
        ("FRACTAL_MACS", FRACTAL_MACS, "MAC", "16x16x16 cube block; cycles = fractals x 4096 / cube_macs_per_cycle"),
        ("TCVT_HEAD_CYCLES", TCVT_HEAD_CYCLES, "cycles", "pto-isa cce_costmodel_core.hpp EstimateVconvCycles"),
        ("TCVT_CYCLES_PER_REPEAT", TCVT_CYCLES_PER_REPEAT, "cycles", "same source, slope per repeat"),
        ("VECTOR_REPEAT_BYTES", VECTOR_REPEAT_BYTES, "bytes", "Ascend C vector repeat: 8 blocks of 32 B"),
        ("TRANSFER_HEAD_CYCLES", TRANSFER_HEAD_CYCLES, "cycles", "K / peak of the pto-isa fitted Hill bandwidth model"),
        ("TILE_MIN", TILE_MIN, "elements", "shortest FP32 tail allowed by C-TILE-02"),
        ("VEC_AREAS", VEC_AREAS, "elements", "SK-01 safe vector tile up to the largest per-op UB that leaves room"),
        ("VEC_COLS_MAX", VEC_COLS_MAX, "elements", "widest FP32 rows the formula table measures"),
        ("QK_FACTORS", QK_FACTORS, "x safe tile", "QK m, QK n and PV m tile choices, each axis apart; beyond "
                                                  "them L0 overflows"),
        ("PV_FACTORS", PV_FACTORS, "x safe tile", "PV KV-side (C2 k) tile choices; beyond them L1 overflows"),
        ("STREAM_COUNTS", STREAM_COUNTS, "streams", "the cost-model article's 1, 2, 4, 8"),
    ]
    return rows + [{"name": n, "value": v, "unit": u, "reason": r} for n, v, u, r in cited]


def _candidate(c: dict[str, np.ndarray], i: int, static_range: int, broken: np.ndarray,
               form_rules: tuple[str, str]) -> dict[str, Any]:
    out = {k: int(c[a][i]) for k, a in _ARRAY.items()}
    out["qk_tile"] = [int(c["m1"][i]), int(c["n1"][i])]
    out["pv_tile"] = [int(c["m21"][i]), int(c["k21"][i])]
    out["form_rules"] = [name for bit, name in ((1, form_rules[0]), (2, form_rules[1])) if broken[i] & bit]
    out["vec_tile"] = (int(c["vr"][i]), int(c["vc"][i]))
    static = int(c["steps_max"][i]) <= static_range
    out["kv_loop"] = "range" if static else ("loop_unroll" if out["unroll_factor"] > 1 else "pypto.loop")
    ax = lambda lo, hi: [int(c[lo][i]), int(c[hi][i])]  # noqa: E731
    out["cube_tiles"] = {"C1": {"m": ax("m0", "m1"), "k": ax("k10", "k11"), "n": ax("n0", "n1")},
                         "C2": {"m": ax("m20", "m21"), "k": ax("k20", "k21"), "n": ax("n20", "n21")}}
    return out


def _chosen_index(plan: Plan, c: dict[str, np.ndarray], legal_idx: np.ndarray) -> int | None:
    """Index of the plan's own candidate among the legal ones (G 1, streams 1)."""
    c1, c2 = plan.cube_tiles["C1"], plan.cube_tiles["C2"]
    want = {"q": plan.q_tile, "kv": plan.kv_tile, "m0": c1.m[0], "m1": c1.m[1], "n0": c1.n[0], "n1": c1.n[1],
            "m20": c2.m[0], "m21": c2.m[1], "k20": c2.k[0], "k21": c2.k[1],
            "vr": plan.vec_tiles["V1"].shape[0], "vc": plan.vec_tiles["V1"].shape[1],
            "g": 1, "s": 1}
    hit = legal_idx[np.logical_and.reduce([c[k][legal_idx] == v for k, v in want.items()])]
    hit = hit[c["u"][hit] <= max(plan.unroll_factor, 1)]
    return int(hit[np.argmax(c["u"][hit])]) if len(hit) else None


#: candidates scored at a time: the stage formulas are element-wise, so chunks give the same figures
#: while their temporaries stay a few MiB however large the space (seq 1M: ~300k candidates)
SCORE_CHUNK = 1 << 15


def _score_in_chunks(ctx, c: dict[str, np.ndarray], params: CostParams, load: dict[str, np.ndarray]) -> dict:
    n = len(c["q"])
    if n <= SCORE_CHUNK:
        return score(ctx, c, params, load)
    parts = [score(ctx, {k: v[i:i + SCORE_CHUNK] for k, v in c.items()}, params,
                   {k: v[i:i + SCORE_CHUNK] for k, v in load.items()}) for i in range(0, n, SCORE_CHUNK)]
    return {**{k: np.concatenate([p[k] for p in parts]) for k in ("stages", "score", "bottleneck", "epilogue")},
            **load}


def _rule_counts(rules, weight: np.ndarray | None = None) -> dict[str, int]:
    """Candidates breaking each rule (one may break several), in ``RULE_ORDER``; ``weight``: candidates per row."""
    by_rule = {"C-TILE-05": rules.bad_align | rules.bad_step, "C-TILE-02": rules.bad_tail,
               "C-TILE-03": np.logical_or.reduce(list(rules.over.values())), "C-TILE-04": rules.bad_expansion}
    if weight is None:
        return {k: int(by_rule[k].sum()) for k in RULE_ORDER}
    return {k: int(weight[by_rule[k]].sum()) for k in RULE_ORDER}


def _legal_space(ctx, within_form: bool) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray], int, dict[str, int]]:
    """The legal candidates and their core loads, the count of candidates and the count breaking each rule,
    without materialising the illegal ones: the same arrays, in the same order, as filtering the whole space.

    The hard rules read the tile geometry only, the loads and the stream filter the tile pair and the knobs
    only, so the rules are checked once per geometry row and the loads once per (tile pair, knob row); a
    geometry row stands for as many candidates as its tile pair keeps knob rows.
    """
    space = enumerate_geometry(ctx)
    geo = {name: space.column(name) for name in GEOMETRY}
    first, pair_of = group_rows(geo["q"], geo["kv"])  # the rows of one tile pair share steps_max, so their knobs
    nk = len(space.knobs)
    pairs = {"q": np.repeat(geo["q"][first], nk), "kv": np.repeat(geo["kv"][first], nk),
             "u": np.tile(space.knobs[:, 0], len(first)), "g": np.tile(space.knobs[:, 1], len(first)),
             "s": np.tile(space.knobs[:, 2], len(first))}
    allowed = space.allowed[first].reshape(-1)
    pair_load = {}  # loads of the (pair, knob) rows the unroll rule keeps (0 elsewhere: never read)
    for k, v in core_loads(ctx, {k: v[allowed] for k, v in pairs.items()}).items():
        pair_load[k] = np.zeros(len(allowed), dtype=v.dtype)
        pair_load[k][allowed] = v
    pair_keep = allowed & useful_streams(pairs["s"], pair_load["units"], STREAM_COUNTS)
    if within_form:
        pair_keep &= form_rules(ctx, pairs["q"], pairs["kv"]) == 0
    keep = pair_keep.reshape(len(first), nk)[pair_of]  # (geometry, knob)
    per_row = keep.sum(axis=1)
    rules = check_rules(ctx, geo)
    c, gi, ki = space.materialise(keep & rules.legal[:, None])
    at = pair_of[gi] * nk + ki
    load = {k: v[at] for k, v in pair_load.items()}
    return c, load, int(per_row.sum()), _rule_counts(rules, per_row)


def rank_candidates(spec: Spec, plan: Plan, top: int | None = None, include_rejected: bool = False, *,
                    params: CostParams | None = None, within_form: bool = False) -> Ranking:
    """Enumerate, check and rank the candidates around a plan's tiles.

    Order: ``score_cycles`` ascending; equal scores put fewer streams, head groups
    and unroll first, then larger tiles (q, kv, QK area then m, PV area then KV side, vector
    area: fewer tiles first). Candidates that break a form rule (``form_rules``) are ranked
    among the others and flagged.

    Args:
        spec: a validated SPEC.
        plan: its plan, from a skeleton the cost model covers (``Skeleton.ranked``: the
            C1-V1-C2-V2 loop over KV tiles); :func:`opdesign.workflows.new.rank_spec` checks that.
        top: keep the best ``top`` legal rows (and rejected rows); None keeps all.
        include_rejected: fill ``Ranking.rejected`` (rows ordered by the score they
            would have had).
        params: model figures (defaults: :class:`CostParams`).
        within_form: leave out the candidates that break a form rule (``form_rules``) instead of
            flagging them: the space of a design that keeps its form (``opdesign new``'s tuning).
    """
    params = params or CostParams()
    ctx = context(spec, plan)
    if include_rejected:
        c = enumerate_candidates(ctx)
        load = core_loads(ctx, c)
        keep = useful_streams(c["s"], load["units"], STREAM_COUNTS)
        if within_form:
            keep &= form_rules(ctx, c["q"], c["kv"]) == 0
        for d in (c, load):  # column by column: one filtered copy alive at a time
            for k in d:
                d[k] = d[k][keep]
        enumerated = len(c["q"])
        rules = check_rules(ctx, c)
        legal, rejected_by_rule = rules.legal, _rule_counts(rules)
    else:  # only legal candidates are built, scored and sorted (same order among themselves)
        c, load, enumerated, rejected_by_rule = _legal_space(ctx, within_form)
        legal = np.ones(len(c["q"]), dtype=bool)
    scored = _score_in_chunks(ctx, c, params, load)

    def sort(idx: np.ndarray) -> np.ndarray:  # stable: the order of candidates ``idx`` keeps among themselves
        key = (-(c["vr"][idx] * c["vc"][idx]), -c["k21"][idx], -(c["m21"][idx] * c["k21"][idx]), -c["m1"][idx],
               -(c["m1"][idx] * c["n1"][idx]), -c["kv"][idx], -c["q"][idx], c["u"][idx], c["g"][idx], c["s"][idx],
               scored["score"][idx])
        return idx[np.lexsort(key)]

    order = sort(np.arange(len(legal))) if include_rejected else None
    legal_order = order[legal[order]] if include_rejected else sort(np.flatnonzero(legal))
    rank_of = np.zeros(len(legal), dtype=np.int64)  # 1-based rank of each legal candidate, 0 when illegal
    rank_of[legal_order] = np.arange(1, len(legal_order) + 1)
    chosen_i = _chosen_index(plan, c, legal_order)
    broken = form_rules(ctx, c["q"], c["kv"])

    def row(i: int) -> CandidateRow:
        st = {name: int(round(v)) for name, v in zip(STAGES, scored["stages"][i], strict=True)}
        return CandidateRow(**_candidate(c, i, ctx.static_range, broken, ctx.form_rules), rank=int(rank_of[i]),
                            score_cycles=int(scored["score"][i]), stages=st,
                            bottleneck=BOTTLENECKS[int(scored["bottleneck"][i])],
                            task_count=int(scored["task_count"][i]), tasks_per_core=int(scored["tasks"][i]),
                            cores_busy=int(scored["cores_busy"][i]), epilogue_cycles=int(round(scored["epilogue"][i])),
                            chosen=i == chosen_i)

    align = cube_align(spec.dtype)
    rejected = []
    if include_rejected:  # legality ignores unroll / G / streams: one row per tile geometry
        first = np.sort(group_rows(*(c[k][order] for k in ("q", "kv", "m1", "n1", "m21", "k21", "vr", "vc")))[0])
        rejected_order = order[first][~legal[order[first]]]
        rejected = [RejectedRow(**_candidate(c, int(i), ctx.static_range, broken, ctx.form_rules),
                                rejected_reason=rules.reason(int(i), c, align),
                                rejected_rules=rules.rules(int(i))) for i in rejected_order[:top]]
    return Ranking(
        op_name=spec.op_name, device=spec.device, form=plan.form, enumerated=enumerated, legal=int(legal.sum()),
        rejected_by_rule=rejected_by_rule,
        rows=[row(int(i)) for i in legal_order[:top]], rejected=rejected,
        chosen_rank=int(rank_of[chosen_i]) if chosen_i is not None else None,
        chosen=row(chosen_i) if chosen_i is not None else None, parameters=parameter_table(params),
        form_breaking=int(np.count_nonzero(broken[legal])),
    )


def tuning_candidates(spec: Spec, plan: Plan, n: int = 3, *, params: CostParams | None = None) -> list[dict[str, Any]]:
    """The ``n`` best legal candidates other than the plan's own tiles that keep the plan's form
    (``within_form``), each with its estimated gain.

    Each dict: the knobs, ``rank``, ``score_cycles``, ``bottleneck``, ``gain_pct``
    (``100 x (chosen - candidate) / chosen`` score; positive = fewer cycles than
    the plan's tiles, None when the plan's tiles are not in the space) and
    ``changes`` (``"kv_tile: 1024 -> 2048"`` for every knob that differs).
    """
    return tuning_from_ranking(rank_candidates(spec, plan, top=n + 1, params=params, within_form=True), n)


def tuning_from_ranking(ranking: Ranking, n: int = 3) -> list[dict[str, Any]]:
    """:func:`tuning_candidates` from a ranking already made (it needs ``top >= n + 1`` rows)."""
    chosen = ranking.chosen
    out = []
    for r in ranking.rows:
        if r.chosen or len(out) == n:
            continue
        item = r.model_dump(include={*KNOBS, "kv_loop", "rank", "score_cycles", "bottleneck", "cube_tiles",
                                     "form_rules"})
        item["gain_pct"] = (round(100 * (chosen.score_cycles - r.score_cycles) / chosen.score_cycles, 1)
                            if chosen else None)
        item["changes"] = ([f"{k}: {getattr(chosen, k)} -> {getattr(r, k)}" for k in KNOBS
                            if getattr(chosen, k) != getattr(r, k)] if chosen else [])
        item["changes"] += [f"breaks {rule}" for rule in r.form_rules]
        out.append(item)
    return out
