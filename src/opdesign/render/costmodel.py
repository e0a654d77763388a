"""Text view of a :class:`opdesign.tuning.Ranking` (``opdesign rank``); formats, never computes."""

from __future__ import annotations

from opdesign.tuning.rank import CandidateRow, Ranking

_HEAD = (f"{'rank':>6} {'q_tile':>6} {'kv_tile':>7} {'qk':>7} {'pv':>7} {'vec':>7} {'unroll':>6} {'G':>2} {'S':>2} "
         f"{'score_cycles':>13} {'C1':>9} {'V1':>9} {'C2':>9} {'V2':>9} {'sched':>6}  bottleneck  form")


def _mxn(tile: list[int]) -> str:
    return "x".join(str(v) for v in tile)


def _line(r: CandidateRow) -> str:
    mark = "*" if r.chosen else " "
    vec = f"{r.vec_tile[0]}x{r.vec_tile[1]}"
    st = r.stages
    return (f"{r.rank:>5}{mark} {r.q_tile:>6} {r.kv_tile:>7} {_mxn(r.qk_tile):>7} {_mxn(r.pv_tile):>7} {vec:>7} "
            f"{r.unroll_factor:>6} {r.head_group:>2} {r.streams:>2} {r.score_cycles:>13} {st['C1']:>9} {st['V1']:>9} "
            f"{st['C2']:>9} {st['V2']:>9} {st['sched']:>6}  {r.bottleneck:<10}  "
            f"{' '.join(r.form_rules) or '-'}").rstrip()


def render_ranking_text(ranking: Ranking, show_rejected: bool = False, trailer: bool = True) -> str:
    """The ranked table, the plan's rank and, on request, the rejected candidates with their rule ids;
    ``trailer`` adds the legend of the stage columns and the model's note (``-q`` leaves them out)."""
    rules = ", ".join(f"{k} {v}" for k, v in ranking.rejected_by_rule.items() if v) or "none"
    out = [f"{ranking.op_name}: SK-01 {ranking.form} form on {ranking.device}: {ranking.enumerated} candidates, "
           f"{ranking.legal} legal; rejected by rule: {rules}"]
    if ranking.chosen is None:
        out.append("plan's tiles: not in the candidate space")
    else:
        out.append(f"plan's tiles: rank {ranking.chosen_rank} of {ranking.legal} (marked *)")
    out += [_HEAD] + [_line(r) for r in ranking.rows]
    if ranking.chosen is not None and all(not r.chosen for r in ranking.rows):
        out += ["   ...", _line(ranking.chosen)]
    if trailer:
        out.append("stages: cycles per task (one KV step); qk = QK tile m x n (C1 m, n), pv = PV tile m x n (C2 m, k: "
                   "Q rows x KV columns of P), G = AT-23 head group, S = streams; bottleneck fill = the latency of one "
                   "online-softmax chain (its KV steps in turn)")
        if ranking.form_breaking:
            out.append(f"form: {ranking.form_breaking} legal candidates break a rule of the {ranking.form} form "
                       f"(SK-01-P1: its fixed q_tile); ranked and flagged, the plan keeps the form")
        out.append(f"note: {ranking.note}")
    if show_rejected:
        out.append(f"rejected ({len(ranking.rejected)} shown, best would-be score first):")
        for r in ranking.rejected:
            out.append(f"  q_tile {r.q_tile} kv_tile {r.kv_tile} qk {_mxn(r.qk_tile)} pv {_mxn(r.pv_tile)} "
                       f"vec {r.vec_tile[0]}x{r.vec_tile[1]}: {r.rejected_reason}")
    return "\n".join(out) + "\n"
