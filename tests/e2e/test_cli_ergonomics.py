"""The CLI behaves as people expect (issue 14 item 8): --version, -h, --quiet, shell completion,
help that shows values and choices, `opdesign rules ID` for every id opdesign prints, a SPEC given to
validate, and SPEC messages that name the file and say what to do."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from importlib.metadata import version

import pytest
import yaml
from conftest import EXAMPLES, REPO, run_cli

from opdesign.cli.entry import main
from opdesign.render.design import render_all
from opdesign.workflows.new import plan_from_spec_file

COMMANDS = ["", "new", "estimate", "validate", "rules", "golden", "rank", "verify", "cards", "cards list",
            "cards show", "schema", "schema spec", "tool", "tool list", "tool call", "mcp"]
LEAVES = [c for c in COMMANDS if c not in ("", "cards", "schema", "tool")]
#: Rule-like ids as opdesign prints them: SK-01, SK-01-R4, SK-01-PERF-2, C-TILE-03, OD-NUM-07, AT-17-R2.
RULE_ID = re.compile(r"(?<![A-Za-z0-9_-])(?:SK|AT|C|OD)-[A-Z0-9]+(?:-[A-Z0-9]+)*(?![A-Za-z0-9_])")


def run_main(capsys, *args: str) -> tuple[int, str, str]:
    """``opdesign ARGS`` in this process (the console-script entry point): exit code, stdout, stderr."""
    old = sys.argv
    sys.argv = ["opdesign", *args]
    try:
        main()
        code = 0
    except SystemExit as done:
        code = done.code if isinstance(done.code, int) else 0
    finally:
        sys.argv = old
    out = capsys.readouterr()
    return code, out.out, out.err


# --- --version, -h, help text ------------------------------------------------------------------


def test_version_prints_the_package_metadata_version():
    proc = run_cli("--version")
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, f"opdesign {version('opdesign')}\n", "")


@pytest.mark.parametrize("command", COMMANDS)
def test_dash_h_is_help_on_every_command(capsys, command):
    words = command.split()
    code_h, short, _ = run_main(capsys, *words, "-h")
    code_help, long, _ = run_main(capsys, *words, "--help")
    assert code_h == code_help == 0
    assert short == long and short.startswith(f"Usage: opdesign {command}".rstrip() + " ")
    assert "-h, --help" in short


@pytest.mark.parametrize("command", COMMANDS)
def test_help_shows_values_not_type_labels(capsys, command):
    _, text, _ = run_main(capsys, *command.split(), "--help")
    for label in ("<str>", "<bool>", "<int>", "<path>", "<list[", "<int range>"):
        assert label not in text, (command, label)


@pytest.mark.parametrize(("command", "shown"), [
    ("new", ["--spec FILE", "--out DIR", "--lang [zh|en]", "--force ", "-q, --quiet"]),
    ("validate", ["Usage: opdesign validate [OPTIONS] PATH...", "--format [text|json|sarif]"]),
    ("rank", ["--spec FILE", "--top N"]),
    ("golden", ["Usage: opdesign golden [OPTIONS] GOLDEN.py", "--function NAME", "--state-groups N"]),
    ("verify", ["--config NAME", "--quick ", "--no-verify "]),
    ("rules", ["Usage: opdesign rules [OPTIONS] [ID]"]),
    ("", ["--version", "-q, --quiet", "--install-completion", "--show-completion"]),
])
def test_help_names_the_values_and_choices(capsys, command, shown):
    _, text, _ = run_main(capsys, *command.split(), "--help")
    for part in shown:
        assert part in text, part


@pytest.mark.parametrize("group", ["", "tool", "cards", "schema"])
def test_command_list_gives_whole_sentences_and_usage_has_no_braces(capsys, group):
    """Issue 30 item 8: click cut each command's help at ~45 characters with '...', and Typer wrote the
    usage of a required argument as {PATH}...; both now read as written."""
    _, text, _ = run_main(capsys, *group.split(), "--help")
    listed = text.split("Commands:")[1].replace("{...}", "{}")  # tool call's help names {"error": {...}}
    assert "..." not in listed, listed
    for command in COMMANDS:
        _, text, _ = run_main(capsys, *command.split(), "--help")
        usage = text.splitlines()[0]
        assert usage.startswith("Usage: opdesign") and "{" not in usage, usage


# --- --quiet -------------------------------------------------------------------------------------


def test_quiet_new_writes_the_files_and_prints_nothing(capsys, tmp_path):
    spec = str(EXAMPLES / "causal_gqa_tail.yaml")
    code, out, err = run_main(capsys, "new", "--spec", spec, "--out", str(tmp_path / "q"), "--quiet")
    assert (code, out, err) == (0, "", "")
    assert sorted(p.name for p in (tmp_path / "q").iterdir()) == [
        "DESIGN.md", "causal_gqa_tail_kernel.py", "causal_gqa_tail_scaffold.py", "eval"]
    code, out, _ = run_main(capsys, "new", "--spec", spec, "--out", str(tmp_path / "loud"))
    lines = out.splitlines()
    assert code == 0 and lines[0] == f"wrote {tmp_path / 'loud' / 'DESIGN.md'}" and len(lines) == 5
    assert lines[4].startswith("SK-01 baseline form: q_tile=64 kv_tile=128 ")
    code, out, err = run_main(capsys, "-q", "new", "--spec", spec, "--out", str(tmp_path / "loud"), "--force")
    assert (code, out, err) == (0, "", "")  # before the command too


def test_quiet_validate_prints_findings_only(capsys, tmp_path):
    run_main(capsys, "new", "--spec", str(EXAMPLES / "causal_gqa_tail.yaml"), "--out", str(tmp_path / "d"), "-q")
    missing = str(tmp_path / "missing.md")
    finding = f"{missing}:1: OD-DOC-01 error: input unusable: no such file\n"
    assert run_main(capsys, "validate", str(tmp_path / "d"), missing, "-q") == (2, finding, "")
    code, out, _ = run_main(capsys, "validate", str(tmp_path / "d"), missing)
    assert (code, out) == (2, finding + "checked 3 files: 1 error, 0 warnings, 0 infos\n")
    assert run_main(capsys, "validate", str(tmp_path / "d"), "-q") == (0, "", "")
    code, out, _ = run_main(capsys, "validate", str(tmp_path / "d"), "-q", "--format", "json")
    assert code == 0 and json.loads(out)["summary"] == {"error": 0, "warning": 0, "info": 0}


def test_quiet_rules_drops_the_hint_line(capsys):
    _, loud, _ = run_main(capsys, "rules")
    _, quiet, _ = run_main(capsys, "rules", "-q")
    assert loud.splitlines()[-1] == "(* = checked by opdesign validate; `opdesign rules ID` explains one)"
    assert quiet.splitlines() == loud.splitlines()[:-1]


# --- shell completion ----------------------------------------------------------------------------


def test_show_completion_prints_the_bash_script():
    proc = run_cli("--show-completion", "bash")
    assert proc.returncode == 0
    assert "_OPDESIGN_COMPLETE=complete_bash" in proc.stdout
    assert "complete -o default -F _opdesign_completion opdesign" in proc.stdout


@pytest.mark.parametrize(("words", "cword", "expected"), [
    ("opdesign va", "1", ["validate"]),
    ("opdesign validate --format ", "3", ["text", "json", "sarif"]),
    ("opdesign new --lang ", "3", ["zh", "en"]),
])
def test_bash_completion_completes_commands_and_choices(words, cword, expected):
    env = dict(os.environ, _OPDESIGN_COMPLETE="complete_bash", COMP_WORDS=words, COMP_CWORD=cword)
    proc = subprocess.run([sys.executable, "-m", "opdesign"], capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0 and proc.stdout.split() == expected


# --- opdesign rules ID: every id opdesign prints ---------------------------------------------------


def _printed_ids() -> set[str]:
    ids: set[str] = set()
    for spec in sorted(EXAMPLES.glob("*.yaml")):
        plan = plan_from_spec_file(spec, tuning=True)  # what `opdesign new` renders
        for lang in ("zh", "en"):
            ids |= set(RULE_ID.findall(render_all(plan, lang)["DESIGN.md"]))
    return ids


def test_rules_explains_every_id_of_the_designs_and_of_the_listing(capsys):
    _, listing, _ = run_main(capsys, "rules", "--json")
    known = {row["id"] for row in json.loads(listing)}
    printed = _printed_ids()
    assert {"SK-01-PERF-2", "SK-16-R4", "C-TILE-03", "AT-17", "SK-01"} <= printed | known
    for rule_id in sorted(printed | known):
        code, out, err = run_main(capsys, "rules", rule_id)
        assert (code, err) == (0, ""), rule_id
        assert out.startswith(rule_id + " "), rule_id
    from opdesign.catalog import load_catalog

    assert printed <= known | set(load_catalog().cards)  # the listing is complete: rules, plus the cards


def test_rules_card_and_family_ids_list_their_rules(capsys):
    code, out, _ = run_main(capsys, "rules", "sk-16")
    lines = out.splitlines()
    assert code == 0 and lines[0] == ("SK-16 is a pattern card (Single-pass attention backward); "
                                      "`opdesign cards show SK-16` shows it in full. Its rules (14):")
    assert lines[1].startswith("SK-16-R1 ") and lines[-1].startswith("SK-16-WHEN-3 ")
    code, out, _ = run_main(capsys, "rules", "C-TILE")
    assert code == 0 and out.splitlines()[0] == "C-TILE: 8 rules (`opdesign rules ID` explains one):"
    code, out, _ = run_main(capsys, "rules", "OD-IF", "--json")
    assert code == 0 and all(row["id"].startswith("OD-IF-") for row in json.loads(out))
    code, out, _ = run_main(capsys, "rules", "SK-01-P5")
    assert code == 0 and out.splitlines()[0] == "SK-01-P5  (must, card of SK-01)"


def test_rules_unknown_id_names_the_close_ones(capsys):
    assert run_main(capsys, "rules", "SK-01-R44") == (
        2, "", "error: not_found: unknown rule 'SK-01-R44'; did you mean SK-01-R4 or SK-16-R4 or SK-02-R4? "
               "`opdesign rules` lists every id\n")
    assert run_main(capsys, "rules", "zzz") == (
        2, "", "error: not_found: unknown rule 'zzz'; `opdesign rules` lists every id\n")


@pytest.mark.parametrize("args,message,command", [
    (["rank", "--spec"], "Option '--spec' requires an argument.", "opdesign rank"),
    (["-q", "new", "--force=1", "--spec", "s.yaml"], "Option '--force' does not take a value.", "opdesign new"),
    (["golden", "--json=1", "g.py"], "Option '--json' does not take a value.", "opdesign golden"),
    (["tool", "call", "list_rules", "--input"], "Option '--input' requires an argument.", "opdesign tool call"),
    (["--bogus=1"], "No such option: --bogus", "opdesign"),
])
def test_a_usage_error_points_to_the_help_of_its_command(capsys, args, message, command):
    # click raises an option's own errors without a context: the hint still names the command typed
    assert run_main(capsys, *args) == (2, "", f"error: invalid_input: {message} (see '{command} --help')\n")


# --- SPEC inputs ---------------------------------------------------------------------------------


def test_validate_on_a_spec_says_to_run_new(capsys):
    spec = str(EXAMPLES / "dense_fa_8192.yaml")
    code, out, _ = run_main(capsys, "validate", spec)
    assert code == 2
    assert out == (f"{spec}:1: OD-DOC-01 error: input unusable: this is a SPEC; run `opdesign new --spec {spec}` "
                   "to write its DESIGN.md, then validate that folder\nchecked 1 file: 1 error, 0 warnings, 0 infos\n")


@pytest.mark.parametrize("cut", ["truncated", "tab"])
def test_validate_on_a_broken_spec_still_says_it_is_a_spec(capsys, tmp_path, cut):
    """A SPEC whose YAML breaks part way (cut off mid flow mapping, a tab before a key) is still a SPEC, known by
    the keys read before the break, not a DESIGN.md with a dozen missing chapters."""
    text = (EXAMPLES / "dense_fa_8192.yaml").read_text()
    text = text[:text.index("shape:") + 20] if cut == "truncated" else text.replace("\nmask:", "\n\tmask:")
    spec = tmp_path / "broken.yaml"
    spec.write_text(text)
    assert run_main(capsys, "estimate", "--spec", str(spec))[0] == 2  # it is broken
    code, out, _ = run_main(capsys, "validate", str(spec))
    assert (code, out) == (2, f"{spec}:1: OD-DOC-01 error: input unusable: this is a SPEC; run `opdesign new --spec "
                              f"{spec}` to write its DESIGN.md, then validate that folder\n"
                              "checked 1 file: 1 error, 0 warnings, 0 infos\n")


def test_validate_on_a_yaml_list_or_an_interface_file_is_not_a_spec(capsys, tmp_path):
    (tmp_path / "list.yaml").write_text("- op_name\n- device\n- dtype\n")
    (tmp_path / "nested.yaml").write_text("outer: {op_name: x, device: a2, dtype: bf16}\n")
    for name in ("list.yaml", "nested.yaml"):
        code, out, _ = run_main(capsys, "validate", str(tmp_path / name))
        assert code == 1 and "this is a SPEC" not in out and "OD-DOC-02" in out


def test_validate_on_the_scaffold_points_to_the_kernel(capsys, tmp_path):
    """`opdesign validate out/op/*` passes the numpy scaffold too: it is named for what it is (exit 2), not linted
    as a kernel that lacks its jit function; a user's own file that happens to end in _scaffold.py is linted."""
    out = tmp_path / "op"
    assert run_main(capsys, "-q", "new", "--spec", str(EXAMPLES / "causal_gqa_tail.yaml"), "--out", str(out))[0] == 0
    scaffold = out / "causal_gqa_tail_scaffold.py"
    code, out_text, _ = run_main(capsys, "validate", str(scaffold), str(out))
    assert code == 2 and out_text == (
        f"{scaffold}:1: OD-DOC-01 error: input unusable: this is the numpy scaffold of `opdesign new` (no PyPTO "
        f"kernel in it); run it with `python {scaffold}`, and validate causal_gqa_tail_kernel.py or the operator "
        "folder\nchecked 3 files: 1 error, 0 warnings, 0 infos\n")
    own = tmp_path / "mine_scaffold.py"
    own.write_text("x = 1\n")
    code, out_text, _ = run_main(capsys, "validate", str(own))
    # linted as a kernel file: no kernel in it, said once (OD-KN-08 info, issue 33), not a scaffold message
    assert code == 0 and "OD-KN-08" in out_text and "does not import pypto" in out_text
    assert "numpy scaffold" not in out_text


@pytest.mark.parametrize("axes", ["missing", "empty"])
def test_a_spec_without_dynamic_axes_fails_and_suggests_batch(capsys, tmp_path, axes):
    data = yaml.safe_load((EXAMPLES / "dense_fa_8192.yaml").read_text())
    if axes == "missing":
        del data["dynamic_axes"]
    else:
        data["dynamic_axes"] = []
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(data))
    assert run_main(capsys, "estimate", "--spec", str(path)) == (
        2, "", f"error: spec_invalid: {path}: dynamic_axes: the CANNBot contract needs at least one real dynamic "
               "axis (a length known only at run time); declare batch, e.g. "
               "`dynamic_axes: [{name: batch, range: [1, 8], uniform: true}]` (the range must hold shape.batch)\n")


def test_tnd_layout_names_the_file_and_the_readme_has_the_scope_section(capsys, tmp_path):
    data = yaml.safe_load((EXAMPLES / "paged_fp8_decode.yaml").read_text())
    data["layout"] = "TND"  # TND plans FP8 on the paged path only: contiguous KV names the kv_cache field
    data["kv_cache"] = "contiguous"
    path = tmp_path / "tnd.yaml"
    path.write_text(yaml.safe_dump(data))
    code, out, err = run_main(capsys, "new", "--spec", str(path), "--out", str(tmp_path / "out"))
    assert (code, out) == (2, "") and not (tmp_path / "out").exists()
    assert err == (f"error: spec_invalid: {path}: kv_cache: 'contiguous' is not planned by SK-01 with layout TND and "
                   "quant fp8 in this version of opdesign (supported: paged); see the README's scope section\n")
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    scope = readme.split("\n## Scope\n", 1)[1].split("\n## ", 1)[0]
    for fact in ("SK-01", "SK-02", "SK-16", "`BNSD`, `BSND`", "`TND`", "`a2`, `a3`", "`a5`", "`bf16`, `fp16`",
                 "`fp32`", "declare `batch`"):
        assert fact in scope, fact
    for flag in ("`-q`, `--quiet`", "`opdesign --version`", "`-h`, `--help`", "--install-completion"):
        assert flag in readme, flag


def test_an_empty_out_folder_is_refused_and_nothing_is_written(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, out, err = run_main(capsys, "new", "--spec", str(EXAMPLES / "causal_gqa_tail.yaml"), "--out", "")
    assert (code, out) == (2, "")
    assert err == "error: invalid_input: --out: empty folder name (omit --out for ./<op_name>)\n"
    assert list(tmp_path.iterdir()) == []


def test_an_oversize_golden_is_too_large(capsys, tmp_path):
    golden = tmp_path / "g.py"
    golden.write_text("def my_golden(x):\n    return x\n" + "#" * 1_048_576 + "\n", encoding="utf-8")
    code, out, err = run_main(capsys, "golden", str(golden))
    assert (code, out) == (2, "")
    assert err.startswith(f"error: too_large: golden file {golden}: larger than the limit of 1048576 bytes")
