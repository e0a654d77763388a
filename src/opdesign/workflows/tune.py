"""``opdesign tune``: rank, simulate a batch, refit, re-rank, repeat (issue 32 deliver 3).

The loop, per round:

1. rank the SPEC's rows the generated kernel writes (``rank --within-form``; in the performance form the
   head group / stream rows with one KV tile, :func:`opdesign.workflows.sim_rank.eligible_ranks`) with the current
   parameters (round 1: the committed calibration, the prior);
2. choose a batch (:func:`choose_batch`): the model's best unmeasured rows, plus rows that differ from the
   best one in the knob the model is least sure of (the knob with the fewest values measured so far; ties
   in the order of ``KNOBS``). Round 1 also holds the default plan's own row. The choice reads only the
   ranking and what is measured, never the order SIM runs complete in;
3. render each row's kernel (``new --candidate`` machinery: :func:`opdesign.workflows.pin.plan_for_pins`) and
   simulate it on the config's shape (``--quick``: the SPEC's quick shape, the same for every row); rows
   that render the same kernel share one run; runs found in the SIM cache are not run again;
4. refit the per-SPEC parameters from every measured row (:mod:`opdesign.tuning.refit`);
5. stop when the best SIM time has not improved by more than 1 % for two batches, or the budget is spent.

Every finished run is appended to ``OUT/tune/journal.jsonl`` at once (flushed and fsynced), so a killed tune
resumes (``--resume``) without simulating any row again; ``--resume`` refuses a journal written for another
SPEC text, config or quick flag. At the end the best row is written as a normal design folder in ``OUT``,
with ``OUT/tune/report.md``, ``report.json`` and ``convergence.png`` (extra ``opdesign[plot]``).
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from opdesign.errors import InputError
from opdesign.workflows.pin import KNOBS
from opdesign.workflows.tune_report import JOURNAL, _fmt, _row_model, _shape_text

IMPROVE_PCT = 1.0
PATIENCE = 2


class Journal:
    """Append-only JSON lines; every line is flushed and fsynced when written."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def read(self) -> list[dict[str, Any]]:
        if not self.path.is_file():
            return []
        out = []
        for line in self.path.read_text(encoding="utf-8").splitlines():
            try:
                out.append(json.loads(line))
            except ValueError:  # a line cut by a kill: dropped
                continue
        return out

    def append(self, record: dict[str, Any]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("a", encoding="utf-8") as fh:
            fh.write(json.dumps(record, sort_keys=True) + "\n")
            fh.flush()
            os.fsync(fh.fileno())


def _knobs(row: dict[str, Any]) -> dict[str, Any]:
    return {k: row[k] for k in KNOBS}



def least_sure_knob(candidates: list[dict[str, Any]], measured: list[dict[str, Any]]) -> str | None:
    """Among the knobs that vary over ``candidates``: the one with the fewest distinct values measured."""
    varying = [k for k in KNOBS if len({_fmt(r[k]) for r in candidates}) > 1]
    if not varying:
        return None
    return min(varying, key=lambda k: (len({_fmt(r[k]) for r in measured}), KNOBS.index(k)))


def choose_batch(rows: list[dict[str, Any]], measured_keys: set[str], n: int,
                 measured: list[dict[str, Any]],
                 must: list[dict[str, Any]] | None = None) -> tuple[list[dict], str | None]:
    """``n`` unmeasured rows: ``must`` first, then the best-ranked half, then rows that differ from the best
    row only (or least) in the least-sure knob, best-ranked first. Deterministic: reads ``rows`` in rank order."""
    from opdesign.tuning.model.calibration import row_key

    key = lambda r: json.dumps(row_key(r))  # noqa: E731
    free = [r for r in rows if key(r) not in measured_keys]
    out: list[dict[str, Any]] = []
    for r in must or []:
        if key(r) not in measured_keys and all(key(r) != key(o) for o in out) and len(out) < n:
            out.append(r)
    top = max(1, (n + 1) // 2)
    for r in free:
        if len(out) >= max(top, len(must or [])) or len(out) >= n:
            break
        if all(key(r) != key(o) for o in out):
            out.append(r)
    knob = least_sure_knob(free[:200] or rows[:200], measured + out)
    if knob and free:
        timed = [m for m in measured if m.get("sim_us") is not None]
        best = min(timed, key=lambda m: (m["sim_us"], m["rank"], key(m))) if timed else free[0]
        seen = {_fmt(m[knob]) for m in measured + out}
        ranked = sorted((r for r in free if _fmt(r[knob]) not in seen),
                        key=lambda r: (sum(_fmt(r[k]) != _fmt(best[k]) for k in KNOBS if k != knob), r["rank"]))
        for r in ranked:
            if len(out) >= n:
                break
            if _fmt(r[knob]) not in {_fmt(o[knob]) for o in out}:
                out.append(r)
    for r in free:  # fill up with the next best
        if len(out) >= n:
            break
        if all(key(r) != key(o) for o in out):
            out.append(r)
    return out[:n], knob


def spec_digest(spec_path: Path) -> str:
    return hashlib.sha256(spec_path.read_bytes()).hexdigest()


def _say_eta(say: Callable[[str], None], done: int, total: int, started: float, line: str) -> None:
    spent = time.perf_counter() - started
    eta = spent / done * (total - done) if done else 0.0
    say(f"[{done}/{total}] {line} (elapsed {spent:.0f} s, ETA {eta:.0f} s)")


def plan_run(spec_path: Path, *, budget: int, batch: int, config: str | None, quick: bool) -> dict[str, Any]:
    """What ``--dry-run`` prints: the SPEC, its P0 performance config, budget, batch and an estimate."""
    from opdesign.pypto_run.shrink import estimate_seconds, harness_configs
    from opdesign.skeletons.registry import SKELETONS, skeleton_of
    from opdesign.spec import load_spec
    from opdesign.workflows.new import plan_from_spec

    spec = load_spec(spec_path)
    plan = plan_from_spec(spec, spec_path)
    if not skeleton_of(plan).ranked:
        ranked = ", ".join(s.id for s in SKELETONS if s.ranked)
        raise InputError(f"tune: the cost-model ranking covers {ranked} tilings; {spec.op_name} is planned with "
                         f"{plan.skeleton.id}, which is not ranked", {"field": "spec", "skeleton": plan.skeleton.id})
    perf = [c for c in spec.typical_configs if c.type == "performance"]
    names = [c.name for c in spec.typical_configs]
    if config is None:
        chosen = next((c.name for c in perf if c.priority == "P0"), (perf or spec.typical_configs)[0].name)
    elif config not in names:
        raise InputError(f"--config: {config!r} is not a typical config of {spec.op_name} ({', '.join(names)})",
                         {"field": "config"})
    else:
        chosen = config
    cfg = next(c for c in harness_configs(plan, None) if c["name"] == chosen)
    pairs = cfg["quick_tile_pairs" if quick else "tile_pairs"]
    return {"spec": str(spec_path), "op_name": spec.op_name, "config": chosen, "quick": quick,
            "shape": cfg["quick" if quick else "shape"], "budget": budget, "batch": batch,
            "tile_pairs_default": pairs, "estimate_seconds": estimate_seconds(pairs) * budget,
            "performance_configs": [c.name for c in perf], "form": plan.form}


def tune(spec_path: str | Path, *, budget: int = 12, batch: int = 4, jobs: int | None = None,
         cluster: str | None = None, out: str | Path | None = None, resume: bool = False,
         config: str | None = None, quick: bool = False, progress: Callable[[str], None] | None = None,
         pool: Any = None, cache: Any = None, timeout: float = 1800.0) -> dict[str, Any]:
    """Run the loop (module docstring); returns the report (``tune/report.json``).

    Raises:
        InputError: bad input, a skeleton that is not ranked, a journal of another SPEC with ``resume``,
            or a journal present without ``resume``.
    """
    from opdesign.render.design import render_kernel
    from opdesign.spec import load_spec
    from opdesign.tuning import rank_candidates
    from opdesign.tuning.model.calibration import load_params, row_key
    from opdesign.tuning.pool import make_pool
    from opdesign.tuning.refit import refit
    from opdesign.tuning.simcache import SimCache, environment, sim_key
    from opdesign.workflows.new import plan_from_spec
    from opdesign.workflows.pin import pins_from_row, plan_for_pins
    from opdesign.workflows.sim_rank import eligible_ranks

    say = progress or (lambda _m: None)
    if budget < 1 or batch < 1:
        raise InputError("--budget and --batch must be at least 1", {"field": "budget" if budget < 1 else "batch"})
    spec_path = Path(spec_path)
    run_plan = plan_run(spec_path, budget=budget, batch=batch, config=config, quick=quick)
    spec = load_spec(spec_path)
    plan = plan_from_spec(spec, spec_path)
    out_dir = Path(out) if out is not None else Path(f"{spec.op_name}_tuned")
    journal = Journal(out_dir / "tune" / JOURNAL)
    header = {"kind": "header", "spec_sha256": spec_digest(spec_path), "op_name": spec.op_name,
              "config": run_plan["config"], "quick": quick, "budget": budget, "batch": batch}
    old = journal.read()
    if old and not resume:
        raise InputError(f"{journal.path}: a tune journal exists; give --resume to go on with it, or another --out",
                         {"field": "out"})
    if old:
        head = old[0]
        for k in ("spec_sha256", "config", "quick"):
            if head.get(k) != header[k]:
                what = "the SPEC changed since" if k == "spec_sha256" else f"{k} differs from"
                raise InputError(f"--resume: {journal.path}: {what} the journal's run ({k}: "
                                 f"{head.get(k)!r} there, {header[k]!r} now); use another --out", {"field": "resume"})
    else:
        journal.append(header)
    cache = cache if cache is not None else SimCache()
    env = environment()
    prior = load_params()
    params = prior
    runs = [r for r in old if r.get("kind") == "run"]
    measured_keys = {r["row_key"] for r in runs}
    rounds = [r for r in old if r.get("kind") == "round"]
    batches = [r for r in old if r.get("kind") == "batch"]
    if rounds and rounds[-1].get("params"):
        params = prior.model_copy(update=rounds[-1]["params"])
    if runs:
        say(f"resume: {len(runs)} SIM runs in the journal are not run again")
    own_pool = pool is None
    pool = pool if pool is not None else make_pool(jobs, cluster, quick=quick)
    started = time.perf_counter()
    sims_done = sum(1 for r in runs if r["source"] == "sim")
    default_key = None
    kernels: dict[str, dict[str, Any]] = {}  # kernel hash -> result (rows with the same kernel share a run)
    for r in runs:
        kernels.setdefault(r["kernel_sha256"], r["result"])
    stall = 0
    for i, rd in enumerate(rounds):  # the stop rule's count, as the journal's rounds left it
        prev = rounds[i - 1]["best_us"] if i else None
        better = prev is None or (rd["best_us"] is not None and rd["best_us"] < prev * (1 - IMPROVE_PCT / 100))
        stall = 0 if better else stall + 1
    try:
        if stall >= PATIENCE:
            say("the journal's run had stopped: the best SIM time no longer improved")
            budget = len(runs)
        while len(runs) < budget:
            round_no = len(rounds) + 1
            ranking = rank_candidates(spec, plan, params=params, within_form=True)
            allowed = set(eligible_ranks(plan, ranking))
            rows = [r.model_dump(mode="json") for r in ranking.rows if r.rank in allowed]
            chosen = ranking.chosen.model_dump(mode="json") if ranking.chosen is not None else None
            if chosen is not None:
                default_key = json.dumps(row_key(chosen))
            measured = [{**r["row"], "sim_us": r["result"]["sim_us"]} for r in runs]
            must = [chosen] if chosen is not None and round_no == 1 else []
            pending = next((b for b in batches if b["round"] == round_no), None)
            if pending is not None:  # a round cut by a kill: its own picks, those not measured yet
                picks = [p for p in pending["picks"] if json.dumps(row_key(p)) not in measured_keys]
                knob = pending["knob"]
            else:
                picks, knob = choose_batch(rows, measured_keys, min(batch, budget - len(runs)), measured, must)
                rec = {"kind": "batch", "round": round_no, "picks": picks, "knob": knob}
                journal.append(rec)
                batches.append(rec)
            if not picks and pending is not None:
                pass
            elif not picks:
                say("every row the kernel writes is measured")
                break
            say(f"round {round_no}: {len(picks)} rows (least-sure knob: {knob or 'none'})")
            meta = []
            for row in picks:
                key = json.dumps(row_key(row))
                try:
                    kplan = plan_for_pins(spec, spec_path, plan, pins_from_row(_row_model(row)), validate=False)
                    text = render_kernel(kplan)
                except InputError as err:
                    rec = {"kind": "run", "round": round_no, "row_key": key, "row": row, "rank": row["rank"],
                           "kernel_sha256": None, "source": "design",
                           "result": {"sim_us": None, "sim_error": f"design: {err.message}"[:300]}}
                    journal.append(rec)
                    runs.append(rec)
                    measured_keys.add(key)
                    continue
                khash = hashlib.sha256(text.encode()).hexdigest()
                meta.append((row, key, khash, text))
            todo = []
            for row, _key, khash, text in meta:
                if khash in kernels:
                    continue
                _, shape, _ = _shape_of(text, run_plan["config"], quick)
                hit = cache.get(sim_key(text, shape, quick, env))
                if hit is not None:
                    kernels[khash] = {**hit, "source": "cache"}
                    continue
                if khash not in {t[1] for t in todo}:
                    todo.append(({"kernel_text": text, "config": run_plan["config"], "quick": quick,
                                  "timeout": timeout, "label": f"rank {row['rank']}"}, khash, shape))

            def done(i: int, result: dict[str, Any], todo=todo, meta=meta) -> None:
                nonlocal sims_done
                job, khash, shape = todo[i]
                kernels[khash] = {**result, "source": "sim"}
                if result.get("sim_us") is not None:
                    cache.put(sim_key(job["kernel_text"], shape, quick, env), {**result, **env})
                sims_done += 1
                for row, key, kh, _ in meta:  # journal every row of this kernel now: a kill keeps it
                    if kh == khash and key not in measured_keys:
                        _record(row, key, kh, kernels[kh], "sim" if row is _first(meta, kh) else "same_kernel")
                fig = "FAILED " + str(result.get("sim_error"))[:120] if result.get("sim_us") is None \
                    else f"SIM {result['sim_us']:.2f} us"
                _say_eta(say, len(runs), budget, started, f"{job['label']}: {fig} at {_shape_text(shape)}")

            def _record(row: dict, key: str, kh: str, result: dict, source: str, round_no=round_no) -> None:
                rec = {"kind": "run", "round": round_no, "row_key": key, "row": row, "rank": row["rank"],
                       "kernel_sha256": kh, "source": source if result.get("source") != "cache" else "cache",
                       "result": {k: v for k, v in result.items() if k != "source"}}
                journal.append(rec)
                runs.append(rec)
                measured_keys.add(key)

            if todo:
                pool.map([t[0] for t in todo], done)
            for row, key, khash, _ in meta:  # cached or same-kernel rows
                if key not in measured_keys and khash in kernels:
                    _record(row, key, khash, kernels[khash], "same_kernel" if kernels[khash].get("source") == "sim"
                            else "cache")
                    if kernels[khash].get("source") == "cache":
                        _say_eta(say, len(runs), budget, started, f"rank {row['rank']}: SIM "
                                 f"{kernels[khash].get('sim_us')} us from the SIM cache")
            measured = [{**r["row"], "sim_us": r["result"]["sim_us"]} for r in runs]
            fit = refit(spec, plan, prior, measured)
            params = fit["params"]
            best = min((m["sim_us"] for m in measured if m["sim_us"] is not None), default=None)
            prev = rounds[-1]["best_us"] if rounds else None
            improved = prev is None or (best is not None and best < prev * (1 - IMPROVE_PCT / 100))
            stall = 0 if improved else stall + 1
            rec = {"kind": "round", "round": round_no, "picks": [json.dumps(row_key(p)) for p in picks],
                   "knob": knob, "best_us": best, "moved": fit["moved"], "spearman": fit["spearman"],
                   "prior_spearman": fit["prior_spearman"],
                   "params": {k: getattr(params, k) for k in fit["moved"]}}
            journal.append(rec)
            rounds.append(rec)
            say(f"round {round_no}: best SIM {best} us; refit moved "
                + (", ".join(f"{k} {a} -> {b}" for k, (a, b) in fit["moved"].items()) or "nothing"))
            if stall >= PATIENCE:
                say(f"stop: the best SIM time has not improved by more than {IMPROVE_PCT} % for {PATIENCE} batches")
                break
        others = _other_configs(spec, spec_path, plan, runs, run_plan, quick, timeout, pool, cache, env, say)
    finally:
        if own_pool:
            pool.close()
    run_plan = {**run_plan, "other_configs": others}
    from opdesign.workflows.tune_report import finish

    return finish(spec, spec_path, plan, out_dir, runs, rounds, params, prior, run_plan, default_key,
                  sims_done=sims_done, cache=cache, say=say, elapsed=time.perf_counter() - started)


def _other_configs(spec: Any, spec_path: Path, plan: Any, runs: list[dict], run_plan: dict[str, Any], quick: bool,
                   timeout: float, pool: Any, cache: Any, env: dict[str, str],
                   say: Callable[[str], None]) -> list[dict]:
    """The winner's SIM time on every other performance config (runs beyond the budget, said so)."""
    from opdesign.render.design import render_kernel
    from opdesign.tuning.simcache import sim_key
    from opdesign.workflows.pin import pins_from_row, plan_for_pins

    ok = [r for r in runs if r["result"].get("sim_us") is not None]
    names = [n for n in run_plan["performance_configs"] if n != run_plan["config"]]
    if not ok or not names:
        return []
    best = min(ok, key=lambda r: (r["result"]["sim_us"], r["rank"]))
    text = render_kernel(plan_for_pins(spec, spec_path, plan, pins_from_row(_row_model(best["row"])), validate=False))
    out, todo = [], []
    for name in names:
        _, shape, _ = _shape_of(text, name, quick)
        hit = cache.get(sim_key(text, shape, quick, env))
        out.append({"config": name, "shape": shape, "sim_us": hit["sim_us"] if hit else None,
                    "source": "cache" if hit else "sim"})
        if not hit:
            todo.append((len(out) - 1, {"kernel_text": text, "config": name, "quick": quick, "timeout": timeout,
                                        "label": f"winner on {name}"}))
    if todo:
        say(f"the winner on {len(todo)} more performance config(s) (beyond the budget)")
        for (i, job), res in zip(todo, pool.map([j for _, j in todo]), strict=True):
            out[i].update(sim_us=res.get("sim_us"), sim_error=res.get("sim_error"))
            if res.get("sim_us") is not None:
                cache.put(sim_key(text, out[i]["shape"], quick, env), {**res, **env})
            say(f"winner on {job['config']}: SIM {res.get('sim_us')} us at {_shape_text(out[i]['shape'])}")
    return out


def _first(meta: list, khash: str) -> Any:
    return next(m[0] for m in meta if m[2] == khash)



def _shape_of(text: str, config: str, quick: bool) -> tuple[str, dict[str, Any], Any]:
    from opdesign.tuning.simjob import run_shape

    return run_shape(text, config, quick)

