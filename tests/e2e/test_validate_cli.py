"""`opdesign validate` output formats and exit codes; `opdesign rules` lists and explains the checks."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner
from validate_support import FIXTURES

from opdesign.cli.entry import app
from opdesign.validate import all_rules

runner = CliRunner()
BASE = FIXTURES / "_base"
BASE_LINES = (BASE / "perf_en" / "DESIGN.md").read_text(encoding="utf-8").splitlines()
KV_TILE_LINE = str(BASE_LINES.index("KV_TILE = 1024") + 1)
L1_LINE = str(next(i for i, line in enumerate(BASE_LINES, start=1) if line.startswith("  l1_budget:")))
LINE = re.compile(r"^(?P<file>.+):(?P<line>\d+): (?P<rule>[A-Z0-9-]+) (?P<level>error|warning|info): (?P<msg>.+)$")


@pytest.fixture
def ops(tmp_path: Path) -> Path:
    """A folder with a clean design ``good`` and one with an error and a warning, ``bad``."""
    shutil.copytree(BASE / "perf_en", tmp_path / "good")
    shutil.copytree(BASE / "perf_en", tmp_path / "bad")
    design = tmp_path / "bad" / "DESIGN.md"
    text = design.read_text(encoding="utf-8").replace("KV_TILE = 1024", "KV_TILE = 512")
    design.write_text(text.replace("l1_budget: {total_bytes: 360448,", "l1_budget: {total_bytes: 350000,"),
                      encoding="utf-8")
    return tmp_path


def test_text_output_and_exit_codes(ops: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ops)
    clean = runner.invoke(app, ["validate", "good"])
    assert clean.exit_code == 0 and clean.output == "checked 1 file: 0 errors, 0 warnings, 0 infos\n"
    bad = runner.invoke(app, ["validate", "good", "bad/DESIGN.md"])
    assert bad.exit_code == 1
    *lines, summary = bad.output.splitlines()
    parsed = [LINE.match(line).groupdict() for line in lines]
    assert [(p["file"], p["line"], p["rule"], p["level"]) for p in parsed] == [
        ("bad/DESIGN.md", L1_LINE, "OD-NUM-05", "warning"), ("bad/DESIGN.md", KV_TILE_LINE, "OD-NUM-04", "error")]
    assert summary == "checked 2 files: 1 error, 1 warning, 0 infos"
    missing = runner.invoke(app, ["validate", "bad", "nowhere"])
    assert missing.exit_code == 2 and "nowhere:1: OD-DOC-01 error: input unusable: no such file" in missing.output


def test_json_output(ops: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ops)
    result = runner.invoke(app, ["validate", "bad", "--format", "json"])
    data = json.loads(result.output)
    assert result.exit_code == 1 and set(data) == {"files", "findings", "summary"}
    assert data["files"] == ["bad/DESIGN.md"] and data["summary"] == {"error": 1, "warning": 1, "info": 0}
    assert data["findings"][1] == {"rule": "OD-NUM-04", "level": "error", "file": "bad/DESIGN.md",
                                   "line": int(KV_TILE_LINE),
                                   "message": "KV_TILE = 512, the opdesign block says kv_tile: 1024"}


def test_sarif_output_for_code_scanning(ops: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ops)
    result = runner.invoke(app, ["validate", "bad", "--format", "sarif"])
    log = json.loads(result.output)
    assert result.exit_code == 1 and log["version"] == "2.1.0" and "sarif" in log["$schema"]
    (run,) = log["runs"]
    rules = run["tool"]["driver"]["rules"]
    assert run["tool"]["driver"]["name"] == "opdesign"
    assert [r["id"] for r in rules] == list(all_rules())
    assert all(r["help"]["text"] and r["shortDescription"]["text"] for r in rules)
    assert {r["defaultConfiguration"]["level"] for r in rules} == {"error", "warning", "note"}
    results = run["results"]
    assert [(r["ruleId"], r["level"]) for r in results] == [("OD-NUM-05", "warning"), ("OD-NUM-04", "error")]
    for r in results:
        assert rules[r["ruleIndex"]]["id"] == r["ruleId"] and r["message"]["text"]
        (loc,) = r["locations"]
        assert loc["physicalLocation"]["artifactLocation"]["uri"] == "bad/DESIGN.md"
        assert loc["physicalLocation"]["region"]["startLine"] >= 1


def test_exit_codes_from_the_console(ops: Path, cli) -> None:
    assert cli("validate", "good", cwd=ops).returncode == 0
    assert cli("validate", "bad", cwd=ops).returncode == 1
    (ops / "binary").mkdir()
    (ops / "binary" / "DESIGN.md").write_bytes(b"---\x00\x01\x02")
    unusable = cli("validate", "good", "binary", cwd=ops)
    assert unusable.returncode == 2
    assert unusable.stdout.startswith("binary/DESIGN.md:1: OD-DOC-01 error: input unusable: binary file (NUL bytes)")
    usage = cli("validate", "good", "--format", "xml", cwd=ops)
    assert usage.returncode == 2 and usage.stdout == ""
    assert usage.stderr == "error: invalid_input: --format: expected one of text, json, sarif, got 'xml'\n"


def test_rules_lists_checks_and_explains_one() -> None:
    listed = runner.invoke(app, ["rules"])
    assert listed.exit_code == 0
    rows = listed.output.splitlines()
    assert "OD-DOC-05  * error     template placeholder left in the document" in rows
    assert [r[:14] for r in rows if r.startswith(("C-TILE-01 ", "C-TILE-02 "))] == ["C-TILE-01    m", "C-TILE-02  * m"]
    assert {r.split()[0] for r in rows[:-1]} >= set(all_rules())  # every check is listed
    shown = runner.invoke(app, ["rules", "od-doc-07"])
    assert shown.exit_code == 0
    assert shown.output.startswith("OD-DOC-07  (error, document rule; source: CANNBot DESIGN.md template")
    assert "\nbad:\n    | C-TILE-03 UB budget | pass | |\n" in shown.output and "\ngood:\n" in shown.output
    both = runner.invoke(app, ["rules", "C-TILE-02"])
    assert (both.output.startswith("C-TILE-02  (must, area TILE)")
            and "check (opdesign validate): C-TILE-02" in both.output)
    data = json.loads(runner.invoke(app, ["rules", "C-TILE-02", "--json"]).output)
    assert data["parameters"]["align_bytes"] == 32 and data["check"]["level"] == "error"
    check = json.loads(runner.invoke(app, ["rules", "SK-01-P1", "--json"]).output)
    assert check["id"] == "SK-01-P1" and check["check"]["needs_block"] is True
    card_rule = runner.invoke(app, ["rules", "SK-01-R4"])  # a card rule without a check is explained too
    assert card_rule.exit_code == 0 and card_rule.output.startswith("SK-01-R4  (must, card of SK-01)")


def test_pre_commit_hook_definition(ops: Path, cli) -> None:
    import yaml

    (hook,) = yaml.safe_load((Path(__file__).resolve().parents[2] / ".pre-commit-hooks.yaml").read_text())
    assert hook["id"] == "opdesign-validate" and hook["entry"] == "opdesign validate"
    pattern = re.compile(hook["files"])
    assert [bool(pattern.search(p)) for p in ("DESIGN.md", "custom/op/DESIGN.md", "MY_DESIGN.md", "DESIGN.md.bak")] == [
        True, True, False, False]
    # pre-commit passes the matching file names as arguments
    assert cli("validate", "good/DESIGN.md", "bad/DESIGN.md", cwd=ops).returncode == 1


def test_sarif_uri_is_percent_encoded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from opdesign.validate.model import Finding, Report
    from opdesign.validate.output import sarif

    monkeypatch.chdir(tmp_path)
    inside = Finding(rule="OD-DOC-04", level="error", message="m", file="my op #1/100%/DESIGN.md", line=1)
    outside = Finding(rule="OD-DOC-04", level="error", message="m", file="/x y/#/DESIGN.md", line=1)
    results = sarif(Report.build([inside.file, outside.file], [inside, outside]))["runs"][0]["results"]
    uris = sorted(r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] for r in results)
    assert uris == ["file:///x%20y/%23/DESIGN.md", "my%20op%20%231/100%25/DESIGN.md"]

