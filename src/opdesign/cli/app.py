"""The Typer command tree of ``opdesign`` (every command, its options and its help).

:func:`opdesign.cli.entry.main` is the entry point: it runs the hot commands (``golden``, ``validate``)
through :mod:`opdesign.cli.fast` when their arguments are plain, and everything else through this
tree (:func:`run_typer`). Both call the same command bodies in :mod:`opdesign.cli.fast`.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import typer

from opdesign.catalog.headings import DEFAULT_LANG
from opdesign.cli.output import FLAG, note, pause, print_version, quiet_option
from opdesign.cli.text import card_text as _card_text
from opdesign.cli.text import value_lines as _value_lines
from opdesign.io import streams
from opdesign.io.streams import ascii_json, echo

app = typer.Typer(
    add_completion=True,  # --install-completion / --show-completion [bash|zsh|fish|powershell|pwsh]
    no_args_is_help=True,
    help="Design and lint PyPTO attention operators for Ascend NPUs.",
    pretty_exceptions_enable=False,
    rich_markup_mode=None,  # plain help: metavars and choices, no <str> / <bool> type labels
    context_settings={"help_option_names": ["-h", "--help"]},
)
cards_app = typer.Typer(no_args_is_help=True, help="Skeleton (SK) and atom (AT) pattern cards.")
schema_app = typer.Typer(no_args_is_help=True, help="JSON Schemas of opdesign inputs.")
app.add_typer(cards_app, name="cards")
app.add_typer(schema_app, name="schema")


@app.callback()
def _root(
    version: Annotated[bool, typer.Option(
        "--version", help="print `opdesign X.Y.Z` and exit", is_eager=True,
        callback=print_version, metavar=FLAG)] = False,
    quiet: bool = quiet_option(),
) -> None:
    """Design and lint PyPTO attention operators for Ascend NPUs."""


# Commands raise OpdesignError; main() turns it into "error: <code>: <message>"
# on stderr and the error's exit code. Each area keeps its commands in its own
# section below.

# === spec / estimate / new ===


@schema_app.command("spec")
def schema_spec(quiet: bool = quiet_option()) -> None:
    """Print the JSON Schema of the SPEC."""
    from opdesign.spec import spec_json_schema

    echo(json.dumps(spec_json_schema(), indent=2, sort_keys=True))


@app.command()
def estimate(
    spec: Annotated[Path, typer.Option("--spec", help="SPEC YAML file", metavar="FILE")],
    as_json: Annotated[bool, typer.Option("--json", help="print the Plan as JSON", metavar=FLAG)] = False,
    quiet: bool = quiet_option(),
) -> None:
    """Decide the design numbers of a SPEC (skeleton, form, tiles, budgets, counts)."""
    from opdesign.render.phrases import SAY
    from opdesign.workflows.new import plan_from_spec_file

    plan = plan_from_spec_file(spec)
    if as_json:
        echo(ascii_json(plan.model_dump_json(indent=2, context=SAY)))
        return
    from opdesign.render.design import render_plan_text

    echo(render_plan_text(plan), nl=False)


@app.command()
def new(
    spec: Annotated[Path, typer.Option("--spec", help="SPEC YAML file", metavar="FILE")],
    out: Annotated[str, typer.Option("--out", help="output folder (default: ./<op_name>)", metavar="DIR")] = None,
    lang: Annotated[str, typer.Option(
        "--lang", metavar="[zh|en]", autocompletion=lambda: ["zh", "en"],
        help="DESIGN.md headings: zh (default; the Chinese headings pass the CANNBot "
             "contract, references/artifacts.yaml) or en (English headings: readable, "
             "but the CANNBot validator reports every chapter missing)")] = DEFAULT_LANG,
    force: Annotated[bool, typer.Option("--force", help="overwrite existing files", metavar=FLAG)] = False,
    candidate: Annotated[int, typer.Option(
        "--candidate", help="design rank N of `opdesign rank` (SK-01)", metavar="N")] = None,
    within_form: Annotated[bool, typer.Option(
        "--within-form", help="--candidate N counts as `opdesign rank "
                              "--within-form` does (only rows the plan's form can build)", metavar=FLAG)] = False,
    tiles: Annotated[str, typer.Option(
        "--tiles", metavar="K=V,..",
        help="pin tiles: q_tile=..,kv_tile=..,"
             "qk_tile=MxN,pv_tile=MxN,vec_tile=RxC,unroll_factor=..,head_group=..,streams=..")] = None,
    uncalibrated: Annotated[bool, typer.Option(
        "--uncalibrated", help="rank with the raw CostParams", metavar=FLAG)] = False,
    quiet: bool = quiet_option(),
) -> None:
    """Write DESIGN.md, eval/module_interfaces.yaml, <op_name>_scaffold.py and <op_name>_kernel.py for a SPEC."""
    from opdesign.cli.commands import new_command

    new_command(spec, out, lang, force, candidate, tiles, uncalibrated, within_form)

# === cards / rules ===
# The catalog (cards, constraint tables, their pydantic models, markdown-it) is imported by the
# commands that read it, not with this module: `--help`, `golden` and `validate` never load it.


def _echo_json(data: object) -> None:
    import json

    echo(json.dumps(data, indent=2))  # ASCII: the same JSON on any terminal


@cards_app.command("list")
def cards_list(as_json: Annotated[bool, typer.Option("--json", help="Print a JSON array.", metavar=FLAG)] = False,
               quiet: bool = quiet_option()) -> None:
    """List every skeleton and atom card: id, type, title, tags."""
    from opdesign.catalog import load_catalog

    cards = load_catalog().cards.values()
    if as_json:
        keys = {"id", "type", "title", "tags", "flow_pattern", "path"}
        _echo_json([card.model_dump(mode="json", include=keys) for card in cards])
        return
    for card in cards:
        echo(f"{card.id:<7}{card.type:<10}{card.title:<42}{', '.join(card.tags)}")


@cards_app.command("show")
def cards_show(
    card_id: Annotated[str, typer.Argument(help="Card id, e.g. SK-01 or AT-17.", metavar="ID")],
    as_json: Annotated[bool, typer.Option("--json", help="Print the card as a JSON object.", metavar=FLAG)] = False,
    quiet: bool = quiet_option(),
) -> None:
    """Show one card: its structured fields, then its explanation."""
    from opdesign.catalog import load_catalog

    card = load_catalog().card(card_id)
    if as_json:
        _echo_json(card.model_dump(mode="json"))
    else:
        echo(_card_text(card))


@app.command("rules")
def rules(
    rule_id: Annotated[str | None, typer.Argument(
        metavar="ID", help="a rule (C-TILE-02, SK-01-R4) in full, or "
                           "a card / family (SK-01, C-TILE) as its rules; omit to list all")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.", metavar=FLAG)] = False,
    quiet: bool = quiet_option(),
) -> None:
    """List the rule catalog (constraints, card rules, planner conditions, validator checks), or show one
    rule in full."""
    from opdesign.workflows.validate import lookup_text, row_line, rule_rows

    if rule_id is not None:  # a rule in full; a card (SK-01) or family (C-TILE) id lists its rules
        text = lookup_text(rule_id, as_json, _value_lines)
        echo(ascii_json(text) if as_json else text)
        return
    rows = rule_rows()
    if as_json:
        _echo_json(rows)
        return
    for row in rows:
        echo(row_line(row))
    note("(* = checked by opdesign validate; `opdesign rules ID` explains one)")


# === golden ===


@app.command("golden")
def golden_cmd(
    golden: Annotated[Path, typer.Argument(
        help="golden .py file (parsed with ast, never imported)", metavar="GOLDEN.py")],
    function: Annotated[str, typer.Option(
        "--function", help="function to analyse (default: the one *_golden)",
        metavar="NAME")] = None,
    state_groups: Annotated[int, typer.Option(
        "--state-groups", help="loop-carried state groups S (default: detected)",
        metavar="N")] = None,
    cross_tile_reduce: Annotated[int, typer.Option(
        "--cross-tile-reduce", help="reductions across a tiled axis (default: detected)", metavar="N")] = None,
    as_json: Annotated[bool, typer.Option(
        "--json", help="print one JSON object (CANNBot keys + our additions)",
        metavar=FLAG)] = False,
    quiet: bool = quiet_option(),
) -> None:
    """Estimate the module count of a golden: CANNBot signals, design parameters, attention-aware decision."""
    from opdesign.cli.fast import golden_command

    golden_command(golden, function, state_groups, cross_tile_reduce, as_json)


# === validate ===


@app.command("validate")
def validate_cmd(
    paths: Annotated[list[str], typer.Argument(
        help="DESIGN.md files, PyPTO kernel .py files or operator folders (a "
             "folder means its DESIGN.md and its *_kernel.py / *_impl.py)",
        metavar="PATH")],
    fmt: Annotated[str, typer.Option(
        "--format", help="text, json or sarif", metavar="[text|json|sarif]",
        autocompletion=lambda: ["text", "json", "sarif"])] = "text",
    target_pypto: Annotated[str, typer.Option(
        "--target-pypto", metavar="VERSION|COMMIT",
        help="the PyPTO release or source commit the kernels are written for "
             "(default: target-pypto of the configuration, else the pinned release)")] = None,
    jobs: Annotated[int, typer.Option(
        "-j", "--jobs", min=1, metavar="N",
        help="worker processes over many paths (default: every core)")] = None,
    no_cache: Annotated[bool, typer.Option("--no-cache", help="neither read nor write .opdesign_cache/")] = False,
    exit_zero: Annotated[bool, typer.Option(
        "--exit-zero", help="exit 0 even with error-level findings "
                            "(unusable input still exits 2)")] = False,
    statistics: Annotated[bool, typer.Option(
        "--statistics", help="one line per rule: count, id, level, first message")] = False,
    show_settings: Annotated[bool, typer.Option(
        "--show-settings", help="print the settings resolved for the first "
                                "path and where they came from; check nothing")] = False,
    quiet: bool = quiet_option(),
) -> None:
    """Check DESIGN.md files (with their eval/module_interfaces.yaml) and PyPTO kernel .py files against the rules.

    A kernel .py is read with Python's ast (file lines); the code rules run on it (`opdesign rules ID`
    says which rules do).

    Settings: [tool.opdesign] in pyproject.toml or an opdesign.toml, the nearest from each path upward
    (keys select, ignore, per-file-ignores, target-pypto, exclude). In a .py, `# opdesign: disable=ID`
    on a line or `# opdesign: disable-file=ID`; in DESIGN.md, `<!-- opdesign: disable=ID -->`.

    Exit 0 when no error-level finding, 1 when any, 2 when an input is unusable
    (missing, unreadable, binary, not UTF-8, larger than 256 KiB) or the configuration is invalid.
    """
    from opdesign.cli.fast import validate_command

    raise typer.Exit(validate_command(paths, fmt, target_pypto=target_pypto, jobs=jobs, no_cache=no_cache,
                                      exit_zero=exit_zero, statistics=statistics, show_settings=show_settings))

# === verify (optional extra: opdesign[pypto]) ===


@app.command("verify")
def verify_cmd(
    design_dir: Annotated[Path, typer.Argument(
        help="design folder written by `opdesign new` (or its *_kernel.py)",
        metavar="DIR")],
    config: Annotated[list[str], typer.Option(
        "--config", help="run only this typical config (repeatable)",
        metavar="NAME")] = None,
    quick: Annotated[bool, typer.Option(
        "--quick", help="shrunk shapes (every shrink is stated in the output)",
        metavar=FLAG)] = False,
    no_verify: Annotated[bool, typer.Option(
        "--no-verify", help="compile + SIM only (verify SKIPPED)", metavar=FLAG)] = False,
    as_json: Annotated[bool, typer.Option("--json", help="print the report as JSON", metavar=FLAG)] = False,
    quiet: bool = quiet_option(),
) -> None:
    """Compile, simulate (PyPTO SIM) and pass-verify DIR/<op>_kernel.py on the CPU, per typical config.

    Needs the extra: pip install 'opdesign[pypto]'. Exit 0 when every config compiled, simulated and
    verified; 1 when one did not; 2 for unusable input or a missing extra.
    """
    pause("verify")  # a test hook (OPDESIGN_PAUSE): before PyPTO loads
    from opdesign.pypto_run.design import verify_dir
    from opdesign.pypto_run.selfcheck import format_report

    report = verify_dir(design_dir, configs=config or None, quick=quick, verify=not no_verify,
                        progress=lambda msg: note(msg, err=True))
    data = report.model_dump(exclude={"passed"})
    echo(json.dumps(data, indent=1, sort_keys=True) if as_json else format_report(data))
    raise typer.Exit(0 if report.passed else 1)

# === rank ===


from opdesign.cli.rank import rank_cmd  # noqa: E402  (its own module: the ranking and its SIM check)

app.command("rank")(rank_cmd)

from opdesign.cli.tune import tune_cmd  # noqa: E402  (the tuning loop: rank, SIM, refit, re-rank)

app.command("tune")(tune_cmd)

# === tool / mcp ===

tool_app = typer.Typer(no_args_is_help=True, help="Agent tools: JSON Schemas, one JSON call in, one JSON result out.")
app.add_typer(tool_app, name="tool")
_ROOT_HELP = "folder every tool path is relative to; paths resolving outside it are refused"


@tool_app.command("list")
def tool_list(quiet: bool = quiet_option()) -> None:
    """Print every tool (name, description, inputSchema, outputSchema) as a JSON array."""
    from opdesign.agent.tools import tool_definitions

    echo(json.dumps(tool_definitions(), indent=2))


@tool_app.command("call")
def tool_call(
    name: Annotated[str, typer.Argument(help="tool name (see `opdesign tool list`)", metavar="NAME")],
    input_file: Annotated[Path, typer.Option(
        "--input", help="read the JSON arguments from this file, not stdin",
        metavar="FILE")] = None,
    root: Annotated[Path, typer.Option("--root", help=_ROOT_HELP, metavar="DIR")] = Path("."),
    quiet: bool = quiet_option(),
) -> None:
    """Run one tool: JSON object on stdin, JSON result on stdout; errors are {"error": {...}} and exit 2."""
    from opdesign.agent.tools import main_call

    raise typer.Exit(main_call(name, input_file, root))


@app.command("mcp")
def mcp_serve(root: Annotated[Path, typer.Option("--root", help=_ROOT_HELP, metavar="DIR")] = Path("."),
              quiet: bool = quiet_option()) -> None:
    """Serve the agent tools over MCP (stdio). Needs the extra: pip install 'opdesign[mcp]'."""
    from opdesign.agent.mcp_server import serve

    serve(root)



def click_app() -> typer.core.TyperGroup:
    """The click command tree of ``app`` with the help tidied (``opdesign.cli.output.tidy_help``)."""
    from opdesign.cli.output import reset, tidy_help

    reset()  # --quiet is per run
    return tidy_help(typer.main.get_command(app))


def _command_path(group: typer.core.TyperGroup, args: list[str]) -> str:
    """``opdesign tool call``: the (sub)command words of ``args``, for a usage error click raised without its
    context (an option that takes no value given one, an option missing its value)."""
    words, command = ["opdesign"], group
    for arg in args:
        sub = command.commands.get(arg) if hasattr(command, "commands") else None
        if sub is not None:
            words, command = words + [arg], sub
        elif not arg.startswith("-"):
            break
    return " ".join(words)


def run_typer() -> int:
    """Parse ``sys.argv`` with the Typer tree and run the command: its exit code. A usage error
    (bad option, missing argument, unknown command) is ``invalid_input``, exit 2; the other errors
    are :func:`opdesign.cli.entry.main`'s."""
    usage_error = typer.BadParameter.__mro__[1]  # the click UsageError class Typer is built on
    group = click_app()
    try:
        rv = group(standalone_mode=False, prog_name="opdesign")
    except usage_error as err:  # bad option, missing argument, unknown command, no command
        if type(err).__name__ == "NoArgsIsHelpError":
            return 0  # `opdesign` alone printed its help
        command = err.ctx.command_path if getattr(err, "ctx", None) else _command_path(group, sys.argv[1:])
        streams.say(f"error: invalid_input: {err.format_message()} (see '{command} --help')")
        return 2
    except typer.Abort:  # end of input at a prompt (Typer itself turns Ctrl-C into exit 130)
        streams.say("error: aborted")
        return 1
    return rv if isinstance(rv, int) else 0
