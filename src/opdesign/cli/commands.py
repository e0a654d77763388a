"""The body of ``opdesign new`` that both the Typer tree (:mod:`opdesign.cli.app`) and the fast path
(:mod:`opdesign.cli.fast`) run."""

from __future__ import annotations

from pathlib import Path

from opdesign.cli.output import is_quiet, note, pause
from opdesign.io.streams import StreamError, echo


def new_command(spec: Path, out: str | None, lang: str, force: bool, candidate: int | None, tiles: str | None,
                uncalibrated: bool, within_form: bool = False) -> None:
    """``opdesign new``: write the design, print ``wrote PATH`` per file and the plan's summary line."""
    from opdesign._startup.npthreads import import_numpy
    from opdesign.errors import InputError, ToolIOError

    import_numpy()
    from opdesign.workflows.new import new_design

    if lang not in ("en", "zh"):
        raise InputError(f"--lang: expected 'en' or 'zh', got {lang!r}")
    if out is not None and not out.strip():
        raise InputError("--out: empty folder name (omit --out for ./<op_name>)")

    def announce(paths: list[Path]) -> None:  # printed (and flushed) before publishing: a broken stdout writes nothing
        if is_quiet():
            return
        try:
            echo("".join(f"wrote {path}\n" for path in paths), nl=False)
        except StreamError as err:
            raise ToolIOError(f"stdout: {err} (nothing written)") from None

    from opdesign.tuning.model.calibration import load_params

    if within_form and candidate is None:
        raise InputError("--within-form: it sets how --candidate N counts (give --candidate N)")
    params, pinned = load_params(not uncalibrated), None
    if candidate is not None or tiles is not None:
        from opdesign.spec import load_spec
        from opdesign.workflows.pin import pinned_plan

        if candidate is not None and tiles is not None:
            raise InputError("--candidate and --tiles are mutually exclusive (give one)")
        pinned = pinned_plan(load_spec(spec), spec, candidate=candidate, tiles=tiles, params=params,
                             within_form=within_form)
    pause("new")  # a test hook (OPDESIGN_PAUSE): after planning's imports, before anything is written
    result = new_design(spec, out, lang=lang, force=force, before_publish=announce, plan=pinned, params=params)
    p = result.plan
    form = f"{p.form} form" if p.form_checks else p.variant  # a skeleton with a form choice shows it
    note(f"{p.skeleton.id} {form}: q_tile={p.q_tile} kv_tile={p.kv_tile} root_count={p.root_count} "
         f"ub={p.ub_budget.total_bytes}/{p.ub_budget.capacity_bytes} B")
