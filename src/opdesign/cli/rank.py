"""``opdesign rank``: the cost-model ranking, and with ``--sim K`` its check against PyPTO SIM.

Registered on the Typer app by :mod:`opdesign.cli.app` (``app.command("rank")(rank_cmd)``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from opdesign.cli.output import FLAG, is_quiet, note, pause, quiet_option
from opdesign.io.streams import ascii_json, echo


def rank_cmd(
    spec: Annotated[Path, typer.Option("--spec", help="SPEC YAML file (planned with SK-01)", metavar="FILE")],
    top: Annotated[int, typer.Option(
        "--top", min=1, help="rows to print (ranked and rejected; N >= 1)", metavar="N")] = 20,
    as_json: Annotated[bool, typer.Option("--json", help="print the Ranking as JSON", metavar=FLAG)] = False,
    show_rejected: Annotated[bool, typer.Option(
        "--show-rejected", help="also list rejected candidates with rule ids",
        metavar=FLAG)] = False,
    within_form: Annotated[bool, typer.Option(
        "--within-form", help="leave out candidates that break the plan's form "
                              "(flagged in form_rules otherwise)", metavar=FLAG)] = False,
    sim: Annotated[int, typer.Option(
        "--sim", min=1, metavar="K",
        help="run the top K and K evenly spaced candidates in PyPTO SIM (extra opdesign[pypto]) "
             "and compare the ranking with the SIM times")] = None,
    sim_timeout: Annotated[float, typer.Option(
        "--sim-timeout", min=1, metavar="S",
        help="seconds per candidate compile + SIM before it counts as failed")] = 900.0,
    uncalibrated: Annotated[bool, typer.Option(
        "--uncalibrated", help="the raw CostParams, not the committed "
                               "calibration (constraints/costmodel/calibration.yaml)", metavar=FLAG)] = False,
    quiet: bool = quiet_option(),
) -> None:
    """Rank legal SK-01 tilings with the PTO cost model (a filter for benchmarking, not a run time)."""
    from opdesign._startup.npthreads import import_numpy

    import_numpy()
    from opdesign.render.costmodel import render_ranking_text
    from opdesign.spec import load_spec
    from opdesign.tuning.model.calibration import load_params
    from opdesign.workflows.new import plan_from_spec, rank_spec

    pause("rank")  # a test hook (OPDESIGN_PAUSE)
    loaded = load_spec(spec)  # read once
    plan, params = plan_from_spec(loaded, spec), load_params(not uncalibrated)
    if sim is None:
        ranking = rank_spec(loaded, plan, top, show_rejected, params=params, within_form=within_form)
        echo(ascii_json(ranking.model_dump_json(indent=2)) if as_json
             else render_ranking_text(ranking, show_rejected, trailer=not is_quiet()), nl=as_json)
        return
    import json

    from opdesign.workflows.sim_rank import format_sim_text, sim_rank

    # every legal row: the spread picks reach the last rank
    ranking = rank_spec(loaded, plan, None, show_rejected, params=params, within_form=within_form)
    report = sim_rank(loaded, spec, plan, ranking, sim, top=top, timeout=sim_timeout,
                      progress=lambda msg: note(msg, err=True))
    echo(json.dumps(report, indent=2) if as_json else format_sim_text(report))
