"""Designs of other candidates: ``opdesign new --candidate N`` / ``--tiles k=v,...`` (issue 11 item 1).

``--candidate N`` takes row N of ``opdesign rank`` (same SPEC, same numbering: the ranking of the
plan's own tiles) and pins its knobs; ``--tiles`` pins knobs by hand. The pinned plan is checked
against the hard rules twice: the cost model's vectorised rules (C-TILE-02/03/04/05, the ids
``opdesign rank --show-rejected`` prints) and the validator on the rendered design (every error
rule, e.g. the performance invariants SK-01-P1 / SK-01-P2). A broken rule is an input error
(exit 2) that names its id.

:func:`pins_from_row` maps a ranked row to the plan fields it pins (through the cost model's
:func:`~opdesign.tuning.plan_fields`).
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from opdesign.errors import InputError
from opdesign.plan.models import Plan
from opdesign.plan.pins import TilePins
from opdesign.spec import MAX_SEQ, Spec

if TYPE_CHECKING:
    from opdesign.tuning import CostParams
    from opdesign.tuning.rank import CandidateRow, Ranking
    from opdesign.workflows.new import GoldenReader

#: ``--tiles`` keys: scalar knobs and the ``MxN`` ones
SCALAR_KEYS = ("q_tile", "kv_tile", "unroll_factor", "head_group", "streams")
PAIR_KEYS = ("qk_tile", "pv_tile", "vec_tile")
#: knobs whose change the DESIGN.md lists against the default design
KNOBS = ("q_tile", "kv_tile", "qk_tile", "pv_tile", "vec_tile", "unroll_factor", "head_group", "streams")


def _int(key: str, text: str) -> int:
    digits = text[1:] if text[:1] in "+-" else text
    if not (digits.isascii() and digits.isdigit()):  # int() would also take '１２８' and '1_28'
        raise InputError(f"--tiles: {key}={text!r} is not an integer")
    if len(digits.lstrip("0")) > len(str(MAX_SEQ)):  # int() refuses over 4300 digits
        raise InputError(f"--tiles: {key}={text[:24]!r} is outside 1..{MAX_SEQ}")
    value = int(text)
    if value <= 0:
        raise InputError(f"--tiles: {key}={value} must be positive")
    if value > MAX_SEQ:  # no tile, unroll factor, head group or stream count exceeds the longest axis a SPEC allows
        raise InputError(f"--tiles: {key}={value} is outside 1..{MAX_SEQ}")
    return value


def parse_tiles(text: str) -> dict[str, Any]:
    """``q_tile=64,kv_tile=512,qk_tile=128x64,pv_tile=128x128,vec_tile=16x512,streams=2`` -> ``{knob: value}``.

    ``qk_tile=MxN``: the QK tile (C1 m and n L1 tiles); ``pv_tile=MxN``: the PV tile (C2 m = Q rows and
    k = KV columns of P), as ``opdesign rank`` prints them. A bare ``qk_tile=128`` means ``128x128``.
    """
    out: dict[str, Any] = {}
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        key, sep, value = part.partition("=")
        key = key.strip()
        if not sep or key not in SCALAR_KEYS + PAIR_KEYS:
            raise InputError(f"--tiles: expected key=value with key one of {', '.join(SCALAR_KEYS + PAIR_KEYS)}, "
                             f"got {part!r}")
        if key in out:
            raise InputError(f"--tiles: {key} given twice")
        if key in SCALAR_KEYS:
            out[key] = _int(key, value.strip())
            continue
        dims = value.strip().lower().split("x")
        if len(dims) > 2:
            raise InputError(f"--tiles: {key}={value!r}: expected M or MxN")
        out[key] = tuple(_int(key, d) for d in (dims * 2)[:2])
    if not out:
        raise InputError("--tiles: no tile given")
    return out


def _fmt(value: Any) -> str:
    return "x".join(map(str, value)) if isinstance(value, (tuple, list)) else str(value)


def _row_matches(fields: dict[str, Any], given: dict[str, Any]) -> bool:
    return all(_fmt(fields[k]) == _fmt(v) for k, v in given.items())


def _pins_from_tiles(spec: Spec, default: Plan, given: dict[str, Any],
                     params: CostParams) -> tuple[TilePins, CandidateRow | None]:
    """Pins of the best-ranked legal row that has every given knob (the full numbering of ``opdesign rank``),
    and that row (None for square pins outside the ranked space, planned by the skeleton's tile rule).

    Raises:
        InputError: no legal row has them; the message names the rules that reject the best would-be
            row with those tiles (``rank --show-rejected``), or says the space has no such candidate.
    """
    from opdesign.tuning import plan_fields, rank_candidates

    full = rank_candidates(spec, default, include_rejected=True, params=params)
    for row in full.rows:
        if _row_matches(plan_fields(row), given):
            return pins_from_row(row), row
    for key in ("unroll_factor", "head_group", "streams"):
        legal = sorted({getattr(row, key) for row in full.rows})
        if key in given and given[key] not in legal:  # no row has it: the rejected rows' reasons would not apply
            raise InputError(f"--tiles: {key}={given[key]}: no legal candidate of {spec.op_name} has it (the legal "
                             f"rows of `opdesign rank` take {key} {', '.join(map(str, legal))})", {"rules": []})
    tiles = {k: v for k, v in given.items() if k not in ("unroll_factor", "head_group", "streams")}
    for rej in full.rejected if tiles else ():  # one row per tile geometry, best would-be score first
        if _row_matches(plan_fields(rej), tiles):
            raise InputError(_broken(rej.rejected_rules, rej.rejected_reason),
                             {"rules": rej.rejected_rules})
    qk, pv = given.get("qk_tile"), given.get("pv_tile")
    square = qk is None or qk[0] == qk[1]
    if tiles and square and (pv is None or (qk is not None and pv[0] == qk[0])):
        # outside the ranked space but what the skeleton's own tile rule can build (C1 m = n, C2 m = C1 m):
        # plan it, and plan_for_pins names the rules it breaks
        scalars = {k: v for k, v in given.items() if k in SCALAR_KEYS or k == "vec_tile"}
        return TilePins(**scalars, **({"qk_tile": qk[0]} if qk else {}), **({"pv_tile": pv[1]} if pv else {})), None
    want = ", ".join(f"{k}={_fmt(v)}" for k, v in given.items())
    raise InputError(f"--tiles: no candidate of {spec.op_name}'s space has {want} (`opdesign rank --show-rejected` "
                     "lists the legal and rejected tiles; unroll_factor / head_group / streams take the values "
                     "the ranking tries)", {"rules": []})


def _broken(rules: list[str], reason: str) -> str:
    """``pinned tiles break C-TILE-03: UB ...``: the reason names its rules already ("C-TILE-03: ..."), so
    they are listed in front only when it does not (was ``C-TILE-03: C-TILE-03: UB ...``)."""
    named = reason.split(":", 1)[0] in rules
    return f"pinned tiles break {reason}" if named else f"pinned tiles break {', '.join(rules)}: {reason}"


def pins_from_row(row: CandidateRow) -> TilePins:
    """The plan fields a ranked row pins (:func:`opdesign.tuning.plan_fields`): its tiles, unroll, G,
    streams and its cube TileShapes exactly (rectangular QK / PV tiles included)."""
    from opdesign.tuning import plan_fields

    f = plan_fields(row)
    return TilePins(q_tile=f["q_tile"], kv_tile=f["kv_tile"], vec_tile=tuple(f["vec_tile"]),
                    unroll_factor=f["unroll_factor"], head_group=f["head_group"], streams=f["streams"],
                    cube_tiles=f["cube_tiles"])


def _rule_ids_cost(spec: Spec, plan: Plan) -> tuple[list[str], str]:
    """Hard rules the pinned plan's tiles break, by the cost model's vectorised checks (one candidate)."""
    import numpy as np

    from opdesign.plan.tiles import cube_align
    from opdesign.tuning.space import check_rules, context

    c1, c2, v1 = plan.cube_tiles["C1"], plan.cube_tiles["C2"], plan.vec_tiles["V1"]
    one = {"q": plan.q_tile, "kv": plan.kv_tile, "m0": c1.m[0], "m1": c1.m[1], "k10": c1.k[0], "k11": c1.k[1],
           "n0": c1.n[0], "n1": c1.n[1], "m20": c2.m[0], "m21": c2.m[1], "k20": c2.k[0], "k21": c2.k[1],
           "n20": c2.n[0], "n21": c2.n[1],
           "vr": v1.shape[0], "vc": v1.shape[1]}
    arrays = {k: np.array([v], dtype=np.int64) for k, v in one.items()}
    rules = check_rules(context(spec, plan), arrays)
    return rules.rules(0), rules.reason(0, arrays, cube_align(spec.dtype))


def _rule_ids_validator(plan: Plan) -> list[tuple[str, str]]:
    """(rule id, message) of every error the validator reports on the rendered pinned design."""
    from opdesign.render.design import render_all
    from opdesign.validate.engine.settings import Settings
    from opdesign.workflows.validate import validate_paths

    with tempfile.TemporaryDirectory(prefix="opdesign-pinned-") as tmp:
        for rel, text in render_all(plan).items():
            path = Path(tmp) / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
        report = validate_paths([tmp], settings=Settings())  # opdesign's own check: no user configuration
    return [(f.rule, f.message) for f in report.findings if f.level == "error"]


def _changes(default: Plan, pins: TilePins, row: CandidateRow | None, chosen: CandidateRow | None) -> list[str]:
    """``knob: default -> pinned`` for each knob that differs from the default design's."""
    base = chosen.model_dump(include=set(KNOBS)) if chosen is not None else {
        "q_tile": default.q_tile, "kv_tile": default.kv_tile, "unroll_factor": default.unroll_factor}
    mine = row.model_dump(include=set(KNOBS)) if row is not None else {}
    mine |= {k: v for k, v in pins.model_dump().items() if v is not None and k in KNOBS}
    return [f"{k}: {_fmt(base[k])} -> {_fmt(mine[k])}" for k in KNOBS if k in mine and k in base
            and _fmt(base[k]) != _fmt(mine[k])]


def pinned_plan(spec: Spec, spec_path: str | Path, *, candidate: int | None = None,
                tiles: str | None = None, params: CostParams | None = None, read: GoldenReader | None = None,
                within_form: bool = False) -> Plan:
    """The plan of rank ``candidate`` of ``opdesign rank`` (``--within-form``: of ``rank --within-form``), or of
    the ``tiles`` pins, with its rank.
    ``read``: the reader of the SPEC's golden (an agent tool's, inside its root; default: next to the SPEC).

    Raises:
        InputError: both or neither given, a skeleton the cost model does not rank, a rank out of
            range, an unparsable ``--tiles``, or pins that break a hard rule (its id named).
    """
    from opdesign.skeletons.registry import SKELETONS, skeleton_of
    from opdesign.tuning import rank_candidates, tuning_from_ranking
    from opdesign.tuning.model.calibration import load_params
    from opdesign.workflows.new import TUNING_COUNT, plan_from_spec

    if (candidate is None) == (tiles is None):
        raise InputError("--candidate and --tiles are mutually exclusive (give one)")
    params = params or load_params()
    default = plan_from_spec(spec, spec_path, read=read)
    skeleton = skeleton_of(default)
    if not skeleton.ranked:
        ranked = ", ".join(s.id for s in SKELETONS if s.ranked)
        raise InputError(f"{'--candidate' if candidate is not None else '--tiles'}: the cost-model ranking covers "
                         f"{ranked} tilings; {spec.op_name} is planned with {default.skeleton.id}")
    row = None
    if candidate is not None:
        if candidate < 1:
            raise InputError(f"--candidate: {candidate}: ranks start at 1")
        ranking = rank_candidates(spec, default, top=candidate, params=params, within_form=within_form)
        if candidate > len(ranking.rows):
            raise InputError(f"--candidate: {candidate}: {spec.op_name} has {ranking.legal} legal candidates"
                             + (" within its form" if within_form else ""))
        row = ranking.rows[candidate - 1]
        if row.form_rules:
            raise InputError(f"--candidate: {candidate}: rank {candidate} breaks the {default.form} form "
                             f"({'; '.join(_form_what(r, row, default) for r in row.form_rules)}), "
                             "which this plan keeps; "
                             "`opdesign rank --within-form` numbers the rows the form builds: "
                             "`opdesign new --candidate N --within-form`",
                             {"field": "candidate", "form_rules": row.form_rules})
        pins = pins_from_row(row)
    else:
        pins, row = _pins_from_tiles(spec, default, parse_tiles(tiles or ""), params)
        ranking = rank_candidates(spec, default, top=TUNING_COUNT + 1, params=params)
    plan = plan_for_pins(spec, spec_path, default, pins, read=read)
    if row is None:
        row = _find_row(spec, default, plan, pins, params)
    rank = row.rank if row is not None else None
    info = _candidate_info(ranking, default, pins, row, rank, "candidate" if candidate is not None else "tiles")
    return plan.model_copy(update={"cost_rank": rank, "cost_legal": ranking.legal,
                                   "tuning": tuning_from_ranking(ranking, n=TUNING_COUNT), "candidate": info})


def plan_for_pins(spec: Spec, spec_path: str | Path, default: Plan, pins: TilePins, validate: bool = True, *,
                  read: GoldenReader | None = None) -> Plan:
    """``default``'s skeleton planned again with ``pins``; checked against the cost model's hard rules and,
    with ``validate``, the validator on the rendered design.

    Raises:
        InputError: a broken rule (its id in the message and in ``details["rules"]``).
    """
    from opdesign.skeletons.registry import skeleton_of
    from opdesign.workflows.new import golden_module_count

    fallback = {"fallback_from": default.fallback_from, "skeleton_checks": default.skeleton_checks} \
        if default.fallback_from else {}
    plan = skeleton_of(default).plan(spec, golden_module_count(spec, Path(spec_path), read), pins=pins, **fallback)
    broken, reason = _rule_ids_cost(spec, plan)
    static = _static_limit(plan)
    if static is not None and plan.kv_tiles > static:
        static_rule = _form_rule_ids(plan)[1]
        broken, reason = [*broken, static_rule], "; ".join(filter(None, [reason, (
            f"{static_rule}: the performance form's kernel runs a static range over at most {static} KV tiles; "
            f"kv_tile {plan.kv_tile} gives {plan.kv_tiles} (the ranking's row runs pypto.loop, a loop this "
            "version's performance kernel does not write)")]))
    chains = (pins.head_group or 1) * (pins.streams or 1)
    if plan.form == "performance" and chains > 1:
        heads_vary = any(a.name in ("num_heads", "num_kv_heads") for a in spec.dynamic_axes)
        if spec.shape.num_heads % chains or heads_vary:
            broken, reason = [*broken, "AT-23"], "; ".join(filter(None, [reason, (
                f"AT-23: the performance kernel runs head_group x streams = {chains} heads per LOOP_h step; "
                f"num_heads {spec.shape.num_heads} is {'a dynamic axis' if heads_vary else 'not a multiple of it'}")]))
        if plan.kv_tiles > 1:  # measured: templates/sk01/kernel_chains.j2 says which kernels failed to compile
            broken, reason = [*broken, "AT-23"], "; ".join(filter(None, [reason, (
                f"AT-23: this version writes head_group x streams = {chains} chains only with one KV tile "
                f"(kv_tile >= seq_kv); kv_tile {plan.kv_tile} gives {plan.kv_tiles}, and PyPTO 0.2.0 failed to "
                "compile ('Run pass failed') the chained kernels with 2 KV tiles that were tried")]))
    if broken:
        raise InputError(_broken(broken, reason), {"rules": broken})
    errors = _rule_ids_validator(plan) if validate else []
    if errors:
        ids = sorted({r for r, _ in errors})
        raise InputError(_broken(ids, "; ".join(f"{r}: {m}" for r, m in errors[:3])),
                         {"rules": ids})
    return plan


def _form_rule_ids(plan: Plan) -> tuple[str, str]:
    """The plan's card's rule ids for the performance form's fixed q_tile and static KV range."""
    from opdesign.catalog import load_catalog
    from opdesign.tuning.space import form_rule_ids

    return form_rule_ids(load_catalog().card(plan.skeleton.id))


def _form_what(rule_id: str, row: CandidateRow, plan: Plan) -> str:
    """What a form rule of a ranked row is about, for the refusal of ``--candidate N``."""
    q_rule, _ = _form_rule_ids(plan)
    if rule_id == q_rule:
        return f"{rule_id}: q_tile {row.q_tile}"
    return f"{rule_id}: kv_tile {row.kv_tile} needs a pypto.loop, not a static range"


def _static_limit(plan: Plan) -> int | None:
    """The card's ``static_kv_max_tiles`` for a performance-form plan (None otherwise)."""
    if plan.form != "performance":
        return None
    from opdesign.catalog import load_catalog

    return load_catalog().card(plan.skeleton.id).param("static_kv_max_tiles")  # as the candidate space reads it


def _find_row(spec: Spec, default: Plan, plan: Plan, pins: TilePins, params: CostParams) -> CandidateRow | None:
    """The ranked row (default plan's numbering) of the hand-pinned tiles, or None when not in the space."""
    from opdesign.tuning import rank_candidates

    rows = rank_candidates(spec, default, params=params).rows
    want = {"q_tile": plan.q_tile, "kv_tile": plan.kv_tile, "vec_tile": tuple(plan.vec_tiles["V1"].shape),
            "cube_tiles": {s: {ax: list(getattr(t, ax)) for ax in ("m", "k", "n")} for s, t in plan.cube_tiles.items()},
            "unroll_factor": plan.unroll_factor, "head_group": pins.head_group or 1, "streams": pins.streams or 1}
    for r in rows:
        got = {"q_tile": r.q_tile, "kv_tile": r.kv_tile, "vec_tile": tuple(r.vec_tile), "cube_tiles": r.cube_tiles,
               "unroll_factor": r.unroll_factor, "head_group": r.head_group, "streams": r.streams}
        if got == want:
            return r
    return None


def _candidate_info(ranking: Ranking, default: Plan, pins: TilePins, row: CandidateRow | None,
                    rank: int | None, how: str) -> dict[str, Any]:
    chosen = ranking.chosen
    gain = (round(100 * (chosen.score_cycles - row.score_cycles) / chosen.score_cycles, 1)
            if chosen is not None and row is not None else None)
    return {"rank": rank, "how": how, "gain_pct": gain,
            "default_rank": ranking.chosen_rank, "legal": ranking.legal,
            "score_cycles": row.score_cycles if row is not None else None,
            "default_score_cycles": chosen.score_cycles if chosen is not None else None,
            "bottleneck": row.bottleneck if row is not None else None,
            "default_bottleneck": chosen.bottleneck if chosen is not None else None,
            "changes": _changes(default, pins, row, chosen),
            "head_group": pins.head_group or 1, "streams": pins.streams or 1}
