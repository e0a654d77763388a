"""`opdesign validate` settings ([tool.opdesign] / opdesign.toml), disable comments, --target-pypto,
-j and the .opdesign_cache/ findings cache."""

from __future__ import annotations

import json
import shutil
from collections import Counter
from pathlib import Path

import pytest
import yaml
from conftest import run_cli
from typer.testing import CliRunner
from validate_support import FIXTURES

from opdesign.catalog.pypto_api import load_api_surface
from opdesign.cli.app import app
from opdesign.errors import ConfigError
from opdesign.validate import engine, validate_kernel_text, validate_paths, validate_text
from opdesign.validate.analysis.api_surface import check_source
from opdesign.validate.engine import bulk, memo, settings
from opdesign.validate.output import sarif

runner = CliRunner()
BASE = FIXTURES / "_base" / "perf_en"
REPO = Path(__file__).resolve().parents[3]

KERNEL = '''import pypto


@pypto.frontend.jit()
def k(q: pypto.Tensor((16, 64), pypto.DT_BF16), o: pypto.Tensor((16, 64), pypto.DT_BF16)):
    pypto.experimental.set_operation_options(combine_axis=True)
    t = pypto.div(q, q, precision_type=pypto.PrecisionType.HIGH_PRECISION)
    pypto.atomic_add(o, t)
    x = t
'''


@pytest.fixture(autouse=True)
def _fresh() -> None:
    settings.clear()
    memo.clear()
    yield
    settings.clear()


def _rules(report) -> list[tuple[str, int]]:
    return [(f.rule, f.line) for f in report.findings]


def _bad_design(folder: Path) -> Path:
    shutil.copytree(BASE, folder)
    design = folder / "DESIGN.md"
    design.write_text(design.read_text(encoding="utf-8").replace("KV_TILE = 1024", "KV_TILE = 512"), encoding="utf-8")
    return folder


# --- release-aware API -----------------------------------------------------------------------------

def test_manifest_keeps_self_and_records_return_kinds() -> None:
    api = load_api_surface()
    for name in ("hypot", "bitwise_and", "bitwise_not", "isfinite", "cbrt", "ceil_div", "prelu", "prod", "gathermask"):
        assert api.entry(f"pypto.{name}")["positional"][0] == "self", name
    assert api.entry("pypto.get_debug_options")["returns"] == "dict"
    assert api.entry("pypto.add")["returns"] == "tensor"
    code = ("import pypto\n\n\n@pypto.frontend.jit()\ndef k(q: pypto.Tensor((16, 64), pypto.DT_BF16)):\n"
            "    d = pypto.get_debug_options()\n    v = d.get('x')\n    h = pypto.hypot(self=q, other=q)\n")
    assert check_source(code) == []
    assert check_source("import pypto\nimport pypto._controller\nx = pypto._controller.loop\n") == []
    assert "has no method .get()" in check_source(code.replace("pypto.get_debug_options()", "pypto.abs(q)"))[0].message


def test_later_manifest_records_its_commit() -> None:
    later = load_api_surface("883e7dfb0")
    assert later.commit == "883e7dfb018da764a65fd2c2f8c1e1d2de2d2471" and later.commit_date == "2026-08-22"
    assert later.has("pypto.atomic_add") and not load_api_surface("0.2.0").has("pypto.atomic_add")
    assert "precision_type" in later.entry("pypto.div")["positional"]
    header = (REPO / "constraints" / "pypto_api_883e7dfb0.yaml").read_text(encoding="utf-8")
    assert "STATIC reading" in header and yaml.safe_load(header)["commit"] == later.commit


def test_added_later_is_an_error_for_the_release_and_nothing_for_the_commit() -> None:
    old = [f for f in validate_kernel_text(KERNEL, "k_kernel.py").findings if f.rule == "OD-PC-05"]
    assert [(f.line, f.level) for f in old] == [(7, "error"), (8, "error")]
    # PrecisionType and precision_type= on one call: one cause, one finding
    assert old[0].message.startswith("pypto.div(precision_type=), pypto.PrecisionType: not in PyPTO 0.2.0 "
                                     "(added later: in commit 883e7dfb0 (2026-08-22))")
    assert old[1].message.startswith("pypto.atomic_add: not in PyPTO 0.2.0 (added later")
    new = validate_kernel_text(KERNEL, "k_kernel.py", target_pypto="883e7dfb0")
    assert [f for f in new.findings if f.rule == "OD-PC-05"] == []
    # a name no manifest has stays a plain error under every target
    typo = KERNEL.replace("pypto.atomic_add(o, t)", "pypto.atomic_addd(o, t)")
    for target in (None, "883e7dfb0"):
        (hit,) = [f for f in validate_kernel_text(typo, "k.py", target_pypto=target).findings if f.rule == "OD-PC-05"
                  and "atomic_addd" in f.message]
        assert "does not exist" in hit.message


def test_target_pypto_from_cli_and_from_configuration(tmp_path: Path) -> None:
    kernel = tmp_path / "k_kernel.py"
    kernel.write_text(KERNEL, encoding="utf-8")
    assert runner.invoke(app, ["validate", "--no-cache", str(kernel)]).exit_code == 1
    ok = runner.invoke(app, ["validate", "--no-cache", "--target-pypto", "883e7dfb0", str(kernel)])
    assert ok.exit_code == 0, ok.output
    (tmp_path / "opdesign.toml").write_text('target-pypto = "883e7dfb0"\n', encoding="utf-8")
    settings.clear()
    assert runner.invoke(app, ["validate", "--no-cache", str(kernel)]).exit_code == 0
    # the command line wins over the configuration
    assert runner.invoke(app, ["validate", "--no-cache", "--target-pypto", "0.2.0", str(kernel)]).exit_code == 1
    bad = run_cli("validate", "--target-pypto", "0.9.9", str(kernel))
    assert bad.returncode == 2 and "0.9.9" in bad.stderr and "known: 0.2.0, 883e7dfb0" in bad.stderr


def test_mcp_tool_takes_target_pypto(tmp_path: Path) -> None:
    from opdesign.agent.tools import call_tool

    (tmp_path / "k_kernel.py").write_text(KERNEL, encoding="utf-8")
    old, _ok = call_tool("validate_design", {"design_path": "k_kernel.py"}, root=tmp_path)
    new, _ok = call_tool("validate_design", {"design_path": "k_kernel.py", "target_pypto": "883e7dfb0"}, root=tmp_path)
    assert any(f["rule"] == "OD-PC-05" for f in old["findings"])
    assert not any(f["rule"] == "OD-PC-05" for f in new["findings"])
    bad, ok = call_tool("validate_design", {"design_path": "k_kernel.py", "target_pypto": "nope"}, root=tmp_path)
    assert not ok and bad["error"]["code"] == "invalid_input" and "nope" in bad["error"]["message"]


# --- configuration ---------------------------------------------------------------------------------

def test_discovery_order_and_show_settings(tmp_path: Path) -> None:
    project = tmp_path / "project"
    op = _bad_design(project / "ops" / "op")
    (project / "pyproject.toml").write_text('[tool.opdesign]\nignore = ["OD-NUM-04"]\n', encoding="utf-8")
    # no table: passed over
    (project / "ops" / "pyproject.toml").write_text('[project]\nname = "x"\n', encoding="utf-8")
    found = settings.discover(op)
    assert found.source == project / "pyproject.toml" and found.ignore == ("OD-NUM-04",)
    shown = runner.invoke(app, ["validate", "--show-settings", str(op)])
    assert shown.exit_code == 0
    assert f"settings file: {project / 'pyproject.toml'} ([tool.opdesign])" in shown.output
    assert 'ignore = ["OD-NUM-04"]' in shown.output
    (project / "ops" / "opdesign.toml").write_text('select = ["OD-PC"]\n', encoding="utf-8")  # nearer: wins
    settings.clear()
    assert settings.discover(op).source == project / "ops" / "opdesign.toml"
    (op / "opdesign.toml").write_text("", encoding="utf-8")
    (op / "pyproject.toml").write_text('[tool.opdesign]\nignore = ["OD-DOC-03"]\n', encoding="utf-8")
    settings.clear()
    assert settings.discover(op).source == op / "opdesign.toml"  # opdesign.toml before pyproject.toml
    assert settings.discover(tmp_path / "elsewhere").source is None


def test_select_ignore_and_per_file_ignores_filter_findings(tmp_path: Path) -> None:
    op = _bad_design(tmp_path / "op")
    assert ("OD-NUM-04", 236) in _rules(validate_paths([op]))
    config = tmp_path / "opdesign.toml"
    config.write_text('ignore = ["OD-NUM"]\n', encoding="utf-8")
    settings.clear()
    assert validate_paths([op]).findings == []
    config.write_text('select = ["OD-DOC"]\n', encoding="utf-8")
    settings.clear()
    assert validate_paths([op]).exit_code == 0
    config.write_text('[per-file-ignores]\n"op/DESIGN.md" = ["OD-NUM-04"]\n"other/*" = ["OD-NUM"]\n', encoding="utf-8")
    settings.clear()
    assert validate_paths([op]).findings == []
    config.write_text('[per-file-ignores]\n"other/*" = ["OD-NUM"]\n', encoding="utf-8")
    settings.clear()
    assert _rules(validate_paths([op])) == [("OD-NUM-04", 236)]
    config.write_text('exclude = ["op"]\n', encoding="utf-8")
    settings.clear()
    assert validate_paths([op]).files == []


@pytest.mark.parametrize(("text", "named"), [
    ('selec = ["OD-PC"]\n', "unknown key 'selec'"),
    ('ignore = ["OD-XX-99"]\n', "ignore: unknown rule id 'OD-XX-99'"),
    ('[per-file-ignores]\n"*.py" = ["NOPE-1"]\n', "per-file-ignores.*.py: unknown rule id 'NOPE-1'"),
    ('ignore = "OD-PC-05"\n', "ignore: expected a list of rule ids"),
    ('target-pypto = "1.0"\n', "target-pypto: no API manifest for '1.0'"),
    ("select = [\n", "not valid TOML"),
])
def test_bad_configuration_is_exit_2_naming_the_key(tmp_path: Path, text: str, named: str) -> None:
    op = _bad_design(tmp_path / "op")
    (tmp_path / "opdesign.toml").write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError, match="opdesign.toml"):
        settings.discover(op)
    settings.clear()
    result = run_cli("validate", str(op))
    assert result.returncode == 2 and "config_invalid" in result.stderr and named in result.stderr, result.stderr


def test_pyproject_unknown_key_names_the_table(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text('[tool.opdesign]\nline-length = 100\n', encoding="utf-8")
    with pytest.raises(ConfigError, match=r"pyproject.toml \[tool.opdesign\]: unknown key 'line-length'"):
        settings.discover(tmp_path)


# --- disable comments ------------------------------------------------------------------------------

def test_py_disable_on_a_line_and_for_a_file() -> None:
    plain = validate_kernel_text(KERNEL, "k.py")
    assert ("OD-PC-05", 7) in _rules(plain) and ("OD-PC-05", 8) in _rules(plain)
    line = KERNEL.replace("pypto.atomic_add(o, t)", "pypto.atomic_add(o, t)  # opdesign: disable=OD-PC-05")
    report = validate_kernel_text(line, "k.py")
    assert ("OD-PC-05", 8) not in _rules(report) and ("OD-PC-05", 7) in _rules(report)
    assert [(f.rule, f.line) for f in report.suppressed] == [("OD-PC-05", 8)]
    whole = "# opdesign: disable-file=OD-PC-05\n" + KERNEL
    report = validate_kernel_text(whole, "k.py")
    assert not any(f.rule == "OD-PC-05" for f in report.findings) and len(report.suppressed) == 2
    # a '#' inside a string is no comment
    text = KERNEL.replace("import pypto\n", "import pypto\nX = '# opdesign: disable-file=OD-PC-05'\n")
    assert any(f.rule == "OD-PC-05" for f in validate_kernel_text(text, "k.py").findings)


def test_unused_or_unknown_disable_is_a_warning() -> None:
    text = KERNEL.replace("x = t", "x = t  # opdesign: disable=OD-PC-03,ZZ-01")
    notes = [(f.level, f.line, f.message) for f in validate_kernel_text(text, "k.py").findings if f.rule == "OD-DOC-09"]
    assert notes == [("warning", 9, "`# opdesign: disable=OD-PC-03` suppresses nothing on this line: remove it"),
                     ("warning", 9, "unknown rule id ZZ-01 in `# opdesign: disable=` (`opdesign rules` lists them)")]


def test_design_disable_that_suppresses_nothing_is_a_warning() -> None:
    text = (BASE / "DESIGN.md").read_text(encoding="utf-8")
    iface = (BASE / "eval" / "module_interfaces.yaml").read_text(encoding="utf-8")
    marked = text.replace("## Risks and Open Questions\n", "## Risks and Open Questions\n\n"
                          "<!-- opdesign: disable=C-TILE-04 -->\n")
    (note,) = [f for f in validate_text(marked, interfaces_text=iface).findings if f.rule == "OD-DOC-09"]
    assert note.level == "warning" and "suppresses nothing" in note.message


def test_sarif_lists_suppressed_findings() -> None:
    line = KERNEL.replace("pypto.atomic_add(o, t)", "pypto.atomic_add(o, t)  # opdesign: disable=OD-PC-05")
    results = sarif(validate_kernel_text(line, "k.py"))["runs"][0]["results"]
    suppressed = [r for r in results if "suppressions" in r]
    assert [(r["ruleId"], r["locations"][0]["physicalLocation"]["region"]["startLine"]) for r in suppressed] == [
        ("OD-PC-05", 8)]
    assert suppressed[0]["suppressions"] == [{"kind": "inSource",
                                              "justification": "# opdesign: disable=OD-PC-05 (line 8)"}]
    assert json.loads(validate_kernel_text(line, "k.py").model_dump_json()).keys() == {"files", "findings", "summary"}


def test_statistics_and_exit_zero(tmp_path: Path) -> None:
    kernel = tmp_path / "k_kernel.py"
    kernel.write_text(KERNEL, encoding="utf-8")
    stats = runner.invoke(app, ["validate", "--no-cache", "--statistics", str(kernel)])
    assert stats.exit_code == 1
    assert stats.output.splitlines()[0].split("\t")[:3] == ["    2", "OD-PC-05", "[error]"]
    assert runner.invoke(app, ["validate", "--no-cache", "--exit-zero", str(kernel)]).exit_code == 0
    missing = run_cli("validate", "--exit-zero", str(tmp_path / "none.py"))
    assert missing.returncode == 2  # unusable input is not a finding


# --- -j and the cache ------------------------------------------------------------------------------

def _many(tmp_path: Path) -> list[Path]:
    paths = []
    for i in range(6):
        op = _bad_design(tmp_path / f"op{i}") if i % 2 else Path(shutil.copytree(BASE, tmp_path / f"op{i}"))
        (op / "x_kernel.py").write_text(KERNEL + f"# {i}\n", encoding="utf-8")
        paths.append(op)
    return paths


def test_parallel_report_is_identical(tmp_path: Path) -> None:
    paths = _many(tmp_path)
    one = validate_paths(paths, jobs=1)
    memo.clear()
    two = validate_paths(paths, jobs=2)
    assert two.model_dump_json() == one.model_dump_json()
    # the same errors as one process: OD-NUM-04 in the 3 bad designs, OD-PC-05 (atomic_add) in the 6 kernels,
    # and the kernel / design cross-check (issue 30) on each folder, whose x_kernel.py is not its design's kernel
    assert len(one.files) == 12
    assert Counter(f.rule for f in one.findings if f.level == "error") == {
        "OD-NUM-04": 3, "OD-PC-05": 12, "OD-XC-02": 24, "OD-XC-03": 18, "OD-XC-05": 6}


def test_cache_hit_and_invalidation(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    paths = [str(p.relative_to(tmp_path)) for p in _many(tmp_path)[:2]]
    first = validate_paths(paths, use_cache=True)
    entries = sorted((tmp_path / ".opdesign_cache").rglob("*.json"))
    assert len(entries) == 2 and (tmp_path / ".opdesign_cache" / "CACHEDIR.TAG").is_file()
    calls: list[str] = []
    real = engine._validate_file
    monkeypatch.setattr(engine, "_validate_file", lambda given, target=None: calls.append(given) or real(given, target))
    memo.clear()
    assert validate_paths(paths, use_cache=True).model_dump_json() == first.model_dump_json() and calls == []
    # the kernel's content changes: that path is checked again, the other is served
    kernel = tmp_path / paths[1] / "x_kernel.py"
    kernel.write_text(kernel.read_text(encoding="utf-8").replace("    pypto.atomic_add(o, t)\n", ""), encoding="utf-8")
    changed = validate_paths(paths, use_cache=True)
    assert calls == [paths[1]] and changed.summary.error == first.summary.error - 1
    # the settings change: every path is checked again
    (tmp_path / "opdesign.toml").write_text('ignore = ["OD-NUM-04"]\n', encoding="utf-8")
    settings.clear()
    calls.clear()
    assert validate_paths(paths, use_cache=True).summary.error == changed.summary.error - 1
    assert calls == paths
    calls.clear()
    validate_paths(paths, use_cache=False)
    assert calls == paths


def test_cache_is_not_written_outside_the_root_or_into_a_read_only_tree(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    inside, outside = tmp_path / "root", tmp_path / "elsewhere"
    inside.mkdir()
    op = _bad_design(outside / "op")
    monkeypatch.chdir(inside)
    validate_paths([op], use_cache=True)
    assert not (inside / ".opdesign_cache").exists() and not (outside / ".opdesign_cache").exists()
    monkeypatch.chdir(outside)
    monkeypatch.setattr(bulk.os, "access", lambda path, mode: Path(path) != outside.resolve())  # a read-only tree
    report = validate_paths([op], use_cache=True)
    assert not (outside / ".opdesign_cache").exists() and ("OD-NUM-04", 236) in _rules(report)


def test_readme_configuration_example_is_valid(tmp_path: Path) -> None:
    import re

    block = re.search(r"```toml\n(.*?)```", (REPO / "README.md").read_text(encoding="utf-8"), re.S).group(1)
    (tmp_path / "pyproject.toml").write_text(block, encoding="utf-8")
    found = settings.discover(tmp_path)
    assert found.target_pypto == "883e7dfb0" and ("tests/*", ("OD-PC-03",)) in found.per_file_ignores
    assert found.reports("OD-PC-05", str(tmp_path / "a.py")) and not found.reports("OD-PC-04", str(tmp_path / "a.py"))
    assert not found.reports("OD-PC-03", str(tmp_path / "tests" / "t.py")) and not found.reports("OD-DOC-03", "x")
