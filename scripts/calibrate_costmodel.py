"""Fit the named CostParams to PyPTO SIM times and write constraints/costmodel/calibration.yaml (issue 11 item 3).

For each fit SPEC (default: the tests' tiny dense SPEC and the examples scaled down here; never the
held-out SPECs of benchmarks/bench_costmodel_fidelity.py) the ``rank --sim`` machinery simulates the
top K and K spread candidates; :func:`opdesign.tuning.model.calibration.fit_params` then grid-fits
``task_overhead_cycles``, ``step_dispatch_cycles`` and ``pipeline_depth`` (the mean Spearman rho between the re-scored
candidates and their SIM times). ``stream_switch_cycles`` is not fitted: the generated kernel runs
one stream, so no SIM time measures it. The script prints the fit and, with ``--write``, writes the
YAML with its provenance (SPECs, PyPTO release, date, the rho before and after).

    PYTHONPATH=src /work/venv-pypto/bin/python scripts/calibrate_costmodel.py --spec S [--spec S ...] [--k 6] [--write]
    PYTHONPATH=src python scripts/calibrate_costmodel.py --from-json RUN.json [--write]   # reuse a --sim run
    PYTHONPATH=src python scripts/calibrate_costmodel.py --from-json benchmarks/data/calibration_runs.json \
        --transfers benchmarks/data/sim_transfers.json     # the committed calibration.yaml

``--transfers`` keeps the SIM copy figures of ``scripts/measure_sim_transfers.py --json`` fixed during the
fit. The units split over the device profile's aic_cores (devices.yaml: 24 on a2/a3, A2A3.ini
cube_core_cnt, the cores SIM schedules on), the figure the plan uses too. The depth grid
starts at 2: depth 1 would run a chain's KV steps with nothing in flight (interval = fill).

Only a calibration.yaml that a real run of this script produced is to be committed.
"""

from __future__ import annotations

import argparse
import datetime
import json
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent


def _rescore(spec, plan, params) -> dict:
    from opdesign.tuning import rank_candidates
    from opdesign.tuning.model.calibration import row_key

    return {row_key(r.model_dump(mode="json")): r.score_cycles for r in rank_candidates(spec, plan, params=params).rows}


def _simulate(path: Path, k: int, timeout: float) -> dict:
    from opdesign.spec import load_spec
    from opdesign.tuning import CostParams
    from opdesign.workflows.new import plan_from_spec, rank_spec
    from opdesign.workflows.sim_rank import sim_rank

    spec = load_spec(path)
    plan = plan_from_spec(spec, path)
    ranking = rank_spec(spec, plan, None, params=CostParams())  # raw parameters: the fit starts from them
    return sim_rank(spec, path, plan, ranking, k, timeout=timeout,
                    progress=lambda m: print(f"  {spec.op_name}: {m}", file=sys.stderr, flush=True))


def main(argv: list[str] | None = None) -> int:
    from opdesign.spec import load_spec
    from opdesign.tuning.model.calibration import FITTED, calibration_path, fit_params
    from opdesign.workflows.new import plan_from_spec

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spec", action="append", type=Path, default=[], help="fit SPEC (repeatable)")
    parser.add_argument("--from-json", type=Path, help="{spec path: rank --sim report} of an earlier real run")
    parser.add_argument("--k", type=int, default=6, help="top K plus K spread candidates per SPEC")
    parser.add_argument("--timeout", type=float, default=300.0)
    parser.add_argument("--save-runs", type=Path, help="write the SIM reports here (for --from-json)")
    parser.add_argument("--transfers", type=Path,
                        help="JSON of scripts/measure_sim_transfers.py --json: SIM copy figures, kept fixed in the fit")
    parser.add_argument("--write", action="store_true", help=f"write {calibration_path().relative_to(ROOT)}")
    args = parser.parse_args(argv)
    reports = {str(p): _simulate(p, args.k, args.timeout) for p in args.spec}
    if args.from_json:
        reports |= json.loads(args.from_json.read_text())
    if not reports:
        parser.error("give --spec or --from-json")
    if args.save_runs:
        args.save_runs.write_text(json.dumps(reports, indent=1))
    samples = []
    for path, report in reports.items():
        spec = load_spec(Path(path))
        samples.append((spec, plan_from_spec(spec, Path(path)), [r for r in report["rows"] if r.get("simulated")]))
    from opdesign.tuning import CostParams

    measured = json.loads(args.transfers.read_text()) if args.transfers else None
    base = CostParams(**measured["params"]) if measured else CostParams()
    fit = fit_params(samples, _rescore, base)
    for row in fit["table"]:
        print(f"task_overhead_cycles {row['task_overhead_cycles']:>8} step_dispatch_cycles "
              f"{row['step_dispatch_cycles']:>7} pipeline_depth {row['pipeline_depth']}  "
              f"mean spearman {row['spearman']}")
    p = fit["params"]
    print(f"fit: {', '.join(f'{k} {getattr(p, k)}' for k in FITTED)}: mean Spearman "
          f"{fit['default_spearman']} -> {fit['spearman']} over {len(samples)} SPECs")
    if args.write:
        versions = {r["sim"]["pypto_version"] for r in reports.values()}
        data = {
            "params": p.model_dump(),
            "fit": {"objective": "mean Spearman rho of score_cycles vs sim_us over the fit SPECs",
                    "spearman_default": fit["default_spearman"], "spearman_fit": fit["spearman"],
                    "fitted": list(FITTED),
                    "not_fitted": {"stream_switch_cycles": "the generated kernel runs one stream",
                                   **({k: f"measured from {measured['traces']} PyPTO SIM pipe traces by "
                                          "scripts/measure_sim_transfers.py" for k in measured["params"]}
                                      if measured else {})}},
            "provenance": {"script": "scripts/calibrate_costmodel.py", "pypto": sorted(versions),
                           "date": datetime.date.today().isoformat(),
                           "specs": {Path(k).name: {"simulated": sum(1 for r in v["rows"] if r.get("sim_us")),
                                                    "shape": v["sim"]["shape"], "spearman_default": before,
                                                    "spearman_fit": after}
                                     for (k, v), before, after in zip(reports.items(), fit["per_spec_default"],
                                                                      fit["per_spec_fit"], strict=True)}},
        }
        calibration_path().write_text("# written by scripts/calibrate_costmodel.py from a real PyPTO SIM run\n"
                                      + yaml.safe_dump(data, sort_keys=False))
        print(f"wrote {calibration_path()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
