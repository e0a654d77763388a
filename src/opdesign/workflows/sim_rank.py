"""``opdesign rank --sim K``: the cost-model ranking checked against PyPTO SIM (issue 11 item 2).

The top ``K`` candidates and ``K`` more at evenly spaced ranks of the legal space are each
materialised as a design (:func:`opdesign.workflows.pin.plan_for_pins`), their ``<op>_kernel.py``
rendered and run through the verify machinery's compile + SIM step
(:func:`opdesign.pypto_run.runner.run_isolated`, ``mode="sim"``: no pass verification), all on
one shape: the SPEC's typical shape, never shrunk per candidate, so the times compare. A failing
candidate gets ``sim_error`` and the run goes on. In the performance form the generated kernel
writes a row's head group G and streams S (G x S heads per ``LOOP_h`` step as independent chains,
``templates/sk01/kernel_chains.j2``) when the row has one KV tile, so those rows are eligible too; in
the baseline form it writes
neither knob and the picks are made among the rows with head group 1 and one stream. Rows that
render the same kernel (e.g. G 2 / S 1 and G 1 / S 2: the same four chains) are simulated once.

The agreement between ``score_cycles`` and ``sim_us`` is Spearman's rho and Kendall's tau-b
(:mod:`opdesign.tuning.agreement`: ties averaged / corrected, no scipy) and the SIM rank of
opdesign's top-1.
"""

from __future__ import annotations

import hashlib
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from opdesign.errors import ExtraMissingError, InputError
from opdesign.plan.models import Plan
from opdesign.spec import Spec
from opdesign.tuning.agreement import average_ranks, kendall, spearman
from opdesign.tuning.rank import Ranking

__all__ = ["agreement", "average_ranks", "eligible_ranks", "format_sim_text", "kendall", "sim_picks", "sim_rank",
           "simulate", "spearman"]


def sim_picks(legal: int, k: int) -> list[int]:
    """Ranks to simulate: 1..k, then k more evenly spaced over k+1..legal (ends included), no repeats."""
    top = list(range(1, min(k, legal) + 1))
    rest = legal - len(top)
    if rest <= 0:
        return top
    m = min(k, rest)
    lo = len(top) + 1
    spread = [lo + round(i * (legal - lo) / (m - 1)) if m > 1 else legal for i in range(m)]
    return top + sorted(set(spread) - set(top))


def agreement(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Spearman / Kendall between ``score_cycles`` and ``sim_us`` of the rows that simulated, and the SIM
    rank (1 = fastest, ties share the best place) of the best-scored simulated row."""
    done = [r for r in rows if r.get("sim_us") is not None]
    scores = [float(r["score_cycles"]) for r in done]
    sims = [float(r["sim_us"]) for r in done]
    top1 = None
    if done:
        best = min(done, key=lambda r: r["rank"])
        top1 = 1 + sum(1 for s in sims if s < best["sim_us"])
    rho, tau = spearman(scores, sims), kendall(scores, sims)
    return {"spearman": None if rho is None else round(rho, 4), "kendall": None if tau is None else round(tau, 4),
            "n": len(done), "top1_sim_rank": top1,
            "top1_regret_pct": (round(100 * (best["sim_us"] - min(sims)) / min(sims), 2) if done and min(sims) > 0
                                else None)}


def _sim_shape(plan: Plan, spec: Spec) -> dict[str, Any]:
    s = spec.shape
    shape = {"batch": s.batch, "num_heads": s.num_heads, "num_kv_heads": s.num_kv_heads, "seq_q": s.seq_q,
             "seq_kv": s.seq_kv, "head_dim": s.head_dim}
    if s.block_size:
        shape["block_size"] = s.block_size
    return shape


def simulate(kernel_text: str, shape: dict[str, Any], *, timeout: float, python: str | None = None) -> dict[str, Any]:
    """Compile + SIM one rendered kernel on ``shape`` in a child process: ``{sim_us, seconds, sim_error}``."""
    from opdesign.pypto_run import simcase
    from opdesign.pypto_run.runner import run_isolated
    from opdesign.pypto_run.selfcheck import read_harness

    work = Path(tempfile.mkdtemp(prefix="opdesign-simrank-"))
    try:
        kernel = work / "candidate_kernel.py"
        kernel.write_text(kernel_text, encoding="utf-8")
        harness = read_harness(kernel)
        config = harness["CONFIGS"][0]["name"]
        result = run_isolated(kernel, harness["KERNEL_FUNCTION"], f"{simcase.__file__}:fixed_shape_case",
                              mode="sim", work_dir=work / "run", python=python, timeout=timeout,
                              case_args={"kernel_file": str(kernel), "config": config, "shape": shape})
    finally:
        shutil.rmtree(work, ignore_errors=True)
    error = "; ".join(f"{e.stage}: {e.message}" for e in result.errors)[:500] or None
    ok = result.sim_us is not None and result.sim_us > 0 and not result.errors
    return {"sim_us": result.sim_us if ok else None, "seconds": result.seconds,
            "sim_error": None if ok else (error or "no SIM time")}


def eligible_ranks(plan: Plan, ranking: Ranking) -> list[int]:
    """Ranks of the rows whose knobs the generated kernel writes, best first (ranks keep their numbers).

    The performance kernel writes a row's head group G and streams S (G x S chains per ``LOOP_h``
    step) when the row has one KV tile (``kv_tile >= seq_kv``; :func:`opdesign.workflows.pin.plan_for_pins`
    refuses chains over more KV tiles): those rows and every G 1 / S 1 row. The baseline kernel writes
    one chain and one stream per core, where a row with G > 1 or S > 1 would re-run the kernel of a
    G 1 / S 1 row: the G 1 / S 1 rows only.
    """
    chains = plan.form == "performance"
    return [r.rank for r in ranking.rows if (r.head_group == 1 and r.streams == 1)
            or (chains and r.kv_tile >= plan.seq_kv)]


def sim_rank(spec: Spec, spec_path: str | Path, plan: Plan, ranking: Ranking, k: int, *, top: int = 20,
             timeout: float = 900.0, progress: Callable[[str], None] | None = None,
             python: str | None = None, only: list[int] | None = None, cache: Any = None,
             runner: Callable[..., dict[str, Any]] | None = None) -> dict[str, Any]:
    """Simulate the picks of ``ranking`` (every legal row) and compare; returns the ``--json`` report.

    ``only``: simulate just these of the picks (ranks), e.g. to split one SPEC's picks over processes.
    ``cache``: the SIM cache (:class:`opdesign.tuning.simcache.SimCache`, default its documented folder): a
    kernel already simulated on the same shape with the same PyPTO / torch / platform is not run again.
    ``runner``: ``runner(kernel_text, shape, timeout=, python=)`` instead of :func:`simulate` (tests).

    Raises:
        ExtraMissingError: the ``opdesign[pypto]`` extra is missing (or not PyPTO 0.2.0).
    """
    from opdesign.pypto_run._lazy import ExtraMissing, UnsupportedRelease, require_supported_release
    from opdesign.render.design import render_kernel
    from opdesign.tuning.simcache import SimCache, environment, sim_key
    from opdesign.workflows.pin import pins_from_row, plan_for_pins

    say = progress or (lambda _m: None)
    if runner is None:
        try:
            version = require_supported_release()
        except (ExtraMissing, UnsupportedRelease) as err:
            raise ExtraMissingError(str(err), {"install": "pip install 'opdesign[pypto]'"}) from None
    else:
        version = environment()["pypto"]
    cache = cache if cache is not None else SimCache()
    chains = plan.form == "performance"
    eligible = eligible_ranks(plan, ranking)
    picks = [eligible[i - 1] for i in sim_picks(len(eligible), k)]
    if only is not None:
        picks = [r for r in picks if r in set(only)]
    shape = _sim_shape(plan, spec)
    by_rank = {r.rank: r for r in ranking.rows}
    sims: dict[int, dict[str, Any]] = {}
    done_kernels: dict[str, tuple[int, dict[str, Any]]] = {}
    for n, rank in enumerate(picks, 1):
        row = by_rank[rank]
        try:
            kernel = render_kernel(plan_for_pins(spec, spec_path, plan, pins_from_row(row), validate=False))
        except InputError as err:
            sims[rank] = {"sim_us": None, "seconds": None, "sim_error": f"design: {err.message}"}
            say(f"[{n}/{len(picks)}] rank {rank}: not materialised ({err.message[:120]})")
            continue
        key = hashlib.sha256(kernel.encode()).hexdigest()
        if key in done_kernels:
            same, result = done_kernels[key]
            sims[rank] = {**result, "same_kernel_as": same}
            say(f"[{n}/{len(picks)}] rank {rank}: same kernel as rank {same}")
            continue
        cache_key = sim_key(kernel, shape, False)
        hit = cache.get(cache_key)
        say(f"[{n}/{len(picks)}] rank {rank}: q_tile {row.q_tile} kv_tile {row.kv_tile} qk {row.qk_tile} "
            f"pv {row.pv_tile} vec {row.vec_tile[0]}x{row.vec_tile[1]} unroll {row.unroll_factor} "
            f"G {row.head_group} S {row.streams}: {'compile + SIM' if hit is None else 'in the SIM cache'}")
        if hit is not None:
            result = {"sim_us": hit["sim_us"], "seconds": hit.get("seconds"), "sim_error": None, "cached": True}
        else:
            result = (runner or simulate)(kernel, shape, timeout=timeout, python=python)
            cache.put(cache_key, {**result, "shape": shape, **environment()})
        done_kernels[key] = (rank, result)
        sims[rank] = result
        status = (f"SIM {result['sim_us']:.2f} us" if result["sim_us"] is not None
                  else "FAILED: " + str(result["sim_error"])[:200])
        say(f"    {status}"
            + (" (from the SIM cache)" if result.get("cached") else f" ({result['seconds']} s)"))
    shown = sorted(set(range(1, min(top, len(ranking.rows)) + 1)) | set(picks))
    rows = []
    for rank in shown:
        data = by_rank[rank].model_dump(mode="json")
        data.update({"sim_us": None, "sim_error": None, "same_kernel_as": None} | sims.get(rank, {}))
        data["simulated"] = rank in sims
        rows.append(data)
    out = ranking.model_dump(mode="json", exclude={"rows", "rejected"})
    out.update(rows=rows, agreement=agreement([r for r in rows if r["simulated"]]),
               sim={"pypto_version": version, "shape": shape, "picks": picks, "timeout_s": timeout,
                    "shrunk": None, "eligible": len(eligible),
                    "cache": {"dir": str(cache.root), "hits": cache.hits, "misses": cache.misses},
                    "shape_note": "the SPEC's typical shape for every candidate (not shrunk); " + (
                        "picks among the rows with head_group 1 and streams 1 and the rows with one KV tile (the "
                        "performance kernel writes head_group x streams chains over one KV tile)"
                        if chains else "picks among the rows with head_group 1 and streams 1 (the baseline kernel "
                        "writes neither knob)") + "; rows with the same kernel share one SIM run"})
    return out


def format_sim_text(report: dict[str, Any]) -> str:
    """``opdesign rank --sim K`` for people: the simulated rows and the agreement line."""
    a, sim = report["agreement"], report["sim"]
    lines = [f"{report['op_name']}: {report['legal']} legal candidates; SIM (PyPTO {sim['pypto_version']}) on "
             f"{', '.join(f'{k} {v}' for k, v in sim['shape'].items())} ({sim['shape_note']})",
             "  rank q_tile kv_tile      qk      pv     vec unroll  G  S  score_cycles      sim_us  note"]
    mxn = lambda t: f"{t[0]}x{t[1]}"  # noqa: E731  (qk_tile / pv_tile / vec_tile are [m, n], as rank prints them)
    for r in report["rows"]:
        if not r["simulated"]:
            continue
        note = r["sim_error"] or (f"same kernel as rank {r['same_kernel_as']}" if r["same_kernel_as"] else "")
        sim_us = "-" if r["sim_us"] is None else f"{r['sim_us']:.2f}"
        lines.append(f"{r['rank']:>6} {r['q_tile']:>6} {r['kv_tile']:>7} {mxn(r['qk_tile']):>7} {mxn(r['pv_tile']):>7} "
                     f"{mxn(r['vec_tile']):>7} {r['unroll_factor']:>6} {r['head_group']:>2} "
                     f"{r['streams']:>2} {r['score_cycles']:>13} {sim_us:>11}  {note[:100]}")
    cache = sim.get("cache")
    if cache:
        lines.append(f"SIM cache {cache['dir']}: {cache['hits']} run(s) served from it, {cache['misses']} simulated")
    fmt = lambda v: "n/a" if v is None else f"{v:.3f}"  # noqa: E731
    lines.append(f"agreement over {a['n']} simulated candidates: Spearman rho {fmt(a['spearman'])}, Kendall tau "
                 f"{fmt(a['kendall'])}; opdesign's top-1 is SIM rank {a['top1_sim_rank'] or 'n/a'}"
                 + (f" (regret {a['top1_regret_pct']} % over the fastest simulated)" if a["top1_regret_pct"] is not None
                    else ""))
    return "\n".join(lines)
