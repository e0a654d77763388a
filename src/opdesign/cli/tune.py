"""``opdesign tune``: the command line of :func:`opdesign.workflows.tune.tune`
(registered by :mod:`opdesign.cli.app`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from opdesign.cli.output import FLAG, note, quiet_option
from opdesign.io.streams import echo


def tune_cmd(
    spec: Annotated[Path, typer.Option(
        "--spec", help="SPEC YAML file (a skeleton the cost model ranks: SK-01)",
        metavar="FILE")],
    budget: Annotated[int, typer.Option("--budget", min=1, help="SIM runs at most", metavar="N")] = 12,
    batch: Annotated[int, typer.Option("--batch", min=1, help="rows simulated per round", metavar="B")] = 4,
    jobs: Annotated[int, typer.Option(
        "--jobs", min=1, metavar="J",
        help="local warm SIM workers (default: what memory allows, ~7 GB per full-size SIM)")] = None,
    cluster: Annotated[str, typer.Option(
        "--cluster", metavar="ADDRESS",
        help="a running Dask scheduler, tcp://HOST:8786 (extra opdesign[cluster])")] = None,
    out: Annotated[Path, typer.Option(
        "--out", help="design folder to write (default ./<op_name>_tuned); the journal "
                      "and reports go to OUT/tune/", metavar="DIR")] = None,
    resume: Annotated[bool, typer.Option(
        "--resume", help="go on with OUT/tune/journal.jsonl (same SPEC)", metavar=FLAG)] = False,
    dry_run: Annotated[bool, typer.Option(
        "--dry-run", help="print the plan of the run and its SIM time estimate",
        metavar=FLAG)] = False,
    config: Annotated[str, typer.Option(
        "--config", help="typical config to tune (default: the P0 performance config)",
        metavar="NAME")] = None,
    quick: Annotated[bool, typer.Option(
        "--quick", help="simulate the SPEC's quick shape (the same for every row)",
        metavar=FLAG)] = False,
    sim_timeout: Annotated[float, typer.Option(
        "--sim-timeout", min=1, metavar="S",
        help="seconds per candidate compile + SIM before it counts as failed")] = 1800.0,
    as_json: Annotated[bool, typer.Option("--json", help="print the report as JSON", metavar=FLAG)] = False,
    quiet: bool = quiet_option(),
) -> None:
    """Rank, simulate a batch in PyPTO SIM, refit, re-rank; write the best design (extra opdesign[pypto])."""
    from opdesign._startup.npthreads import import_numpy

    import_numpy()
    from opdesign.workflows.tune import plan_run, tune

    if dry_run:
        plan = plan_run(spec, budget=budget, batch=batch, config=config, quick=quick)
        echo(json.dumps(plan, indent=1) if as_json else
             f"tune {plan['op_name']} ({plan['form']} form): config {plan['config']}"
             f"{' (--quick)' if quick else ''} at {', '.join(f'{k} {v}' for k, v in plan['shape'].items())}; "
             f"budget {budget} SIM runs in batches of {batch}; the default plan has {plan['tile_pairs_default']} tile "
             f"pairs: about {plan['estimate_seconds']:.0f} s of SIM for the budget (~48 pairs per 10 s)")
        return
    report = tune(spec, budget=budget, batch=batch, jobs=jobs, cluster=cluster, out=out, resume=resume,
                  config=config, quick=quick, progress=lambda m: note(m, err=True), timeout=sim_timeout)
    if as_json:
        echo(json.dumps(report, indent=1, sort_keys=True))
    else:
        b, d = report["best"], report["default"]
        echo(f"{report['op_name']}: best rank {b['rank'] if b else '-'} SIM {b['sim_us'] if b else '-'} us"
             + (f", default plan {d['sim_us']} us (speedup {report['speedup']}x)" if d and b else "")
             + f"; {report['runs']} rows measured ({report['sim_runs']} SIM runs); "
               f"report {Path(report.get('out', ''))}")
