"""``opdesign tune``'s outputs: the best row's design folder, ``tune/report.md``, ``report.json`` and
``convergence.png`` (matplotlib from the ``opdesign[plot]`` extra; without it the picture is skipped with a
printed note)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from opdesign.workflows.pin import KNOBS

JOURNAL = "journal.jsonl"


def _fmt(v: Any) -> str:
    return "x".join(map(str, v)) if isinstance(v, (list, tuple)) else str(v)


def _row_model(row: dict[str, Any]) -> Any:
    from opdesign.tuning.rank import CandidateRow

    return CandidateRow.model_validate(row)


def _shape_text(shape: dict[str, Any]) -> str:
    return ", ".join(f"{k} {v}" for k, v in shape.items())


def finish(spec: Any, spec_path: Path, plan: Any, out_dir: Path, runs: list[dict], rounds: list[dict], params: Any,
           prior: Any, run_plan: dict[str, Any], default_key: str | None, *, sims_done: int, cache: Any,
           say: Callable[[str], None], elapsed: float) -> dict[str, Any]:
    """Write the best row's design folder and ``tune/report.md`` / ``report.json`` / ``convergence.png``."""
    from opdesign.io.publish import write_artifacts
    from opdesign.render.design import render_all

    ok = [r for r in runs if r["result"].get("sim_us") is not None]
    best = min(ok, key=lambda r: (r["result"]["sim_us"], r["rank"])) if ok else None
    default = next((r for r in runs if r["row_key"] == default_key), None)
    report = {"op_name": spec.op_name, "spec": str(spec_path), "out": str(out_dir), "config": run_plan["config"],
              "quick": run_plan["quick"],
              "shape": run_plan["shape"], "budget": run_plan["budget"], "batch": run_plan["batch"],
              "runs": len(runs), "sim_runs": sum(1 for r in runs if r["source"] == "sim"),
              "cache_runs": sum(1 for r in runs if r["source"] == "cache"), "elapsed_s": round(elapsed, 1),
              "default": _brief(default), "best": _brief(best),
              "best_on_other_performance_configs": run_plan.get("other_configs", []),
              "speedup": (round(default["result"]["sim_us"] / best["result"]["sim_us"], 3)
                          if default and best and default["result"].get("sim_us") else None),
              "refit": {"prior": {k: getattr(prior, k) for k in ("task_overhead_cycles", "step_dispatch_cycles",
                                                                 "pipeline_depth")},
                        "final": {k: getattr(params, k) for k in ("task_overhead_cycles", "step_dispatch_cycles",
                                                                  "pipeline_depth")},
                        "note": "the refit moves task_overhead_cycles, step_dispatch_cycles and pipeline_depth "
                                "(costmodel.calibration.FITTED); every other cost parameter keeps the committed "
                                "calibration"},
              "rounds": [{**rd, "rows": [_brief(r) for r in runs if r["round"] == rd["round"]]} for rd in rounds]}
    files: dict[str, str] = {}
    if best is not None:
        from opdesign.workflows.pin import pins_from_row, plan_for_pins

        try:
            bplan = plan_for_pins(spec, spec_path, plan, pins_from_row(_row_model(best["row"])))
            files = render_all(bplan.model_copy(update={"candidate": {
                "rank": best["rank"], "how": "tune", "gain_pct": None, "default_rank": None, "legal": None,
                "score_cycles": best["row"]["score_cycles"], "default_score_cycles": None,
                "bottleneck": best["row"]["bottleneck"], "default_bottleneck": None, "changes": _changes(default, best),
                "head_group": best["row"]["head_group"], "streams": best["row"]["streams"]}}))
        except Exception as err:  # noqa: BLE001 - the report still says which row won
            say(f"the best row's design could not be written: {err}")
    report_json = json.dumps(report, indent=1, sort_keys=True)
    files["tune/report.json"] = report_json + "\n"
    files["tune/report.md"] = report_md(report)
    files["tune/journal.jsonl"] = (out_dir / "tune" / JOURNAL).read_text(encoding="utf-8")
    stale = out_dir / "tune" / "convergence.png"
    if stale.exists():
        stale.unlink()
    write_artifacts(files, out_dir, force=True)
    png = convergence_png(report, out_dir / "tune" / "convergence.png")
    report["convergence_png"] = png
    say(f"best: rank {best['rank'] if best else '-'} SIM {best['result']['sim_us'] if best else '-'} us after "
        f"{report['runs']} runs ({report['sim_runs']} simulated, {report['cache_runs']} from the cache); "
        f"wrote {out_dir}")
    return report


def _brief(run: dict[str, Any] | None) -> dict[str, Any] | None:
    if run is None:
        return None
    row = run["row"]
    return {"rank": run["rank"], "round": run["round"], "score_cycles": row["score_cycles"],
            "sim_us": run["result"].get("sim_us"), "sim_error": run["result"].get("sim_error"), "source": run["source"],
            "shape": run["result"].get("shape"), "kernel_sha256": run["kernel_sha256"],
            "knobs": {k: row[k] for k in KNOBS}}


def _changes(default: dict | None, best: dict) -> list[str]:
    if default is None:
        return []
    a, b = default["row"], best["row"]
    return [f"{k}: {_fmt(a[k])} -> {_fmt(b[k])}" for k in KNOBS if _fmt(a[k]) != _fmt(b[k])]


def report_md(report: dict[str, Any]) -> str:
    """``tune/report.md``: a table per round (candidates, score, SIM µs, what changed against the default)."""
    d, b = report["default"], report["best"]
    lines = [f"# opdesign tune: {report['op_name']}", "",
             f"Config {report['config']}{' (--quick)' if report['quick'] else ''}, SIM shape "
             f"{_shape_text(report['shape'])}; {report['runs']} rows measured ({report['sim_runs']} SIM runs, "
             f"{report['cache_runs']} from the SIM cache), budget {report['budget']}, batch {report['batch']}.", ""]
    if d and b:
        lines += [f"Default plan: rank {d['rank']}, SIM {d['sim_us']} us. Best: rank {b['rank']}, SIM {b['sim_us']} us "
                  f"(speedup {report['speedup']}x).", ""]
    for o in report.get("best_on_other_performance_configs", []):
        lines += [f"Best on {o['config']} ({_shape_text(o['shape'])}): SIM {o['sim_us']} us ({o['source']}).", ""]
    rf = report["refit"]
    lines += ["Refit: " + rf["note"] + ". Prior " + ", ".join(f"{k} {v}" for k, v in rf["prior"].items())
              + "; final " + ", ".join(f"{k} {v}" for k, v in rf["final"].items()) + ".", ""]
    lines += ["Ranks are those of each round's ranking (the refit re-ranks between rounds).", ""]
    for rd in report["rounds"]:
        lines += [f"## Round {rd['round']}", "",
                  f"Least-sure knob: {rd['knob'] or 'none'}; best so far {rd['best_us']} us; refit moved "
                  + (", ".join(f"{k} {a} -> {c}" for k, (a, c) in rd["moved"].items()) or "nothing") + ".", "",
                  "| rank | score_cycles | SIM us | source | changed from the default |", "|---|---|---|---|---|"]
        for r in rd["rows"]:
            changed = [f"{k} {_fmt(d['knobs'][k])} -> {_fmt(v)}" for k, v in r["knobs"].items()
                       if d and _fmt(d["knobs"][k]) != _fmt(v)] if d else []
            sim = r["sim_us"] if r["sim_us"] is not None else f"failed: {str(r['sim_error'])[:80]}"
            what = ", ".join(changed) or ("(the default plan)" if d and r["kernel_sha256"] == d["kernel_sha256"]
                                          else "-")
            lines.append(f"| {r['rank']} | {r['score_cycles']} | {sim} | {r['source']} | {what} |")
        lines.append("")
    return "\n".join(lines)


def convergence_png(report: dict[str, Any], path: Path) -> str | None:
    """SIM µs per run and the best so far, the default plan marked; None (and a note) without matplotlib."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        import sys

        print("note: tune/convergence.png not written (matplotlib missing: pip install 'opdesign[plot]')",
              file=sys.stderr)
        return None
    rows = [r for rd in report["rounds"] for r in rd["rows"]]
    xs = list(range(1, len(rows) + 1))
    ys = [r["sim_us"] for r in rows]
    best, acc = [], None
    for y in ys:
        if y is not None:
            acc = y if acc is None else min(acc, y)
        best.append(acc)
    fig, ax = plt.subplots(figsize=(6, 3.5), dpi=100)
    ax.plot([x for x, y in zip(xs, ys, strict=True) if y is not None], [y for y in ys if y is not None], "o",
            label="SIM us per run")
    ax.step(xs, best, where="post", label="best so far")
    d = report["default"]
    if d:
        i = next((i for i, r in enumerate(rows, 1) if r["kernel_sha256"] == d["kernel_sha256"]), None)
        if i is not None and d["sim_us"] is not None:
            ax.plot([i], [d["sim_us"]], "r*", markersize=12, label="default plan")
    ax.set_xlabel("run")
    ax.set_ylabel("SIM us")
    ax.set_title(f"opdesign tune {report['op_name']}")
    ax.legend()
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, metadata={"Software": None})
    plt.close(fig)
    return str(path)
