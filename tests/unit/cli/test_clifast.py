"""The fast path of the entry point (issue 15): plain `golden` / `validate` command lines skip Typer and
print the same bytes with the same exit code as the Typer tree; anything else is Typer's."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from conftest import EXAMPLES

from opdesign.cli import fast as clifast
from opdesign.cli.entry import main
from opdesign.golden.estimate import analyse_golden, estimate_golden, facts_json
from opdesign.workflows.new import new_design

GOLDENS = Path(__file__).resolve().parents[2] / "goldens"
GOLDEN = str(GOLDENS / "dense_forward_golden.py")


def _run(capsys, monkeypatch, args: list[str], typer_only: bool) -> tuple[int, str, str]:
    monkeypatch.setattr(sys, "argv", ["opdesign", *args])
    if typer_only:
        monkeypatch.setattr(clifast, "fast_command", lambda argv: None)
    try:
        main()
        code = 0
    except SystemExit as done:
        code = done.code if isinstance(done.code, int) else 0
    monkeypatch.undo()
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.fixture(scope="module")
def designs(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("designs")
    out = {}
    for name in ("causal_gqa_tail", "sk16_backward_lm"):
        new_design(EXAMPLES / f"{name}.yaml", str(root / name))
        out[name] = root / name
    broken = root / "broken"
    broken.mkdir()
    text = (out["causal_gqa_tail"] / "DESIGN.md").read_text(encoding="utf-8")
    (broken / "DESIGN.md").write_text(text.replace("q_tile", "q_tyle", 3), encoding="utf-8")
    out["broken"] = broken
    return out


def _golden_lines(tmp_path: Path) -> list[list[str]]:
    odd = tmp_path / "odd_golden.py"
    odd.write_text(textwrap.dedent('''
        def 注意_golden(q, k, v):
            s = q @ k.T
            return s @ v
    '''), encoding="utf-8")
    two = tmp_path / "two.py"
    two.write_text("def a_golden(x):\n    return x\n\n\ndef b_golden(x):\n    return x\n", encoding="utf-8")
    lines = [["golden", str(g), *extra] for g in sorted(GOLDENS.glob("*.py"))
             for extra in ([], ["--json"], ["--state-groups", "3", "--cross-tile-reduce", "0", "--json"], ["-q"])]
    return lines + [
        ["-q", "golden", str(odd), "--json"], ["golden", str(odd)], ["golden", str(two)],
        ["golden", str(two), "--function", "b_golden"], ["golden", "--function", "nope", GOLDEN],
        ["golden", str(tmp_path / "absent.py")], ["golden", str(tmp_path)],
        ["golden", str(EXAMPLES / "dense_fa_8192.yaml")],
    ]


def _validate_lines(designs: dict[str, Path]) -> list[list[str]]:
    lines = []
    for path in designs.values():
        lines += [["validate", str(path)], ["validate", str(path), "--format", "json"], ["-q", "validate", str(path)],
                  ["validate", str(path / "DESIGN.md"), "--format", "sarif", "--quiet"]]
    kernel = next(designs["causal_gqa_tail"].glob("*_kernel.py"))
    return lines + [
        ["validate", str(kernel)], ["validate", *map(str, designs.values())],
        ["validate", str(designs["broken"]), "--format", "xml"], ["validate", str(EXAMPLES / "dense_fa_8192.yaml")],
        ["validate", "/nonexistent/DESIGN.md"],
    ]


def test_fast_path_prints_what_the_typer_tree_prints(capsys, monkeypatch, tmp_path, designs) -> None:
    lines = _golden_lines(tmp_path) + _validate_lines(designs)
    codes = set()
    for args in lines:
        assert clifast.fast_command(args) is not None, args  # these lines do take the fast path
        fast = _run(capsys, monkeypatch, args, typer_only=False)
        slow = _run(capsys, monkeypatch, args, typer_only=True)
        assert fast == slow, args
        codes.add(fast[0])
    assert codes == {0, 1, 2}  # successes, error-level findings and refused input were all compared


@pytest.mark.parametrize("args", [
    [], ["golden"], ["validate"], ["golden", "--help"], ["validate", "-h"], ["--version", "golden", GOLDEN],
    ["golden", GOLDEN, "extra.py"], ["golden", f"--function={GOLDEN}"], ["golden", GOLDEN, "--function"],
    ["golden", GOLDEN, "--function", "a", "--function", "b"], ["golden", GOLDEN, "--state-groups", "-1"],
    ["golden", GOLDEN, "--state-groups", "07"], ["golden", GOLDEN, "--state-groups", "+3"],
    ["golden", GOLDEN, "--bogus"],
    ["golden", "--", GOLDEN], ["golden", ""], ["validate", "x", "--format"],
    ["validate", "x", "--format", "--json"],
    ["validate", "x", "--json"], ["-v", "validate", "x"], ["rules"], ["cards", "list"],
    ["new", "--spec", "s.yaml", "--candidate", "2"],
])
def test_anything_but_a_plain_line_goes_to_typer(args) -> None:
    assert clifast.fast_command(args) is None


@pytest.mark.parametrize("args", [
    ["golden", GOLDEN, "--bogus"], ["golden", GOLDEN, "--state-groups", "x"],
    ["golden"], ["validate"], ["golden", GOLDEN, "--function"],
])
def test_usage_errors_are_typer_s(capsys, monkeypatch, args) -> None:
    code, out, err = _run(capsys, monkeypatch, args, typer_only=False)
    assert code == 2 and out == ""
    assert err.startswith("error: invalid_input: ") and err.endswith(" --help')\n")  # click's message


def test_golden_json_is_the_model_s_json(tmp_path) -> None:
    odd = tmp_path / "odd_golden.py"
    odd.write_text("def 注意_golden(q, k, v):\n    s = q @ k.T\n    return s @ v\n", encoding="utf-8")
    cases = [(g, {}) for g in sorted(GOLDENS.glob("*.py"))] + [
        (GOLDENS / "dense_forward_golden.py", {"state_groups": 4, "cross_tile_reduce": 0}), (odd, {})]
    for path, options in cases:
        facts = analyse_golden(path, **options)
        report = estimate_golden(path, **options)
        assert facts_json(facts) == report.model_dump_json(indent=2)
        assert json.loads(facts_json(facts)) == report.model_dump(mode="json")
    assert "注意_golden" in facts_json(analyse_golden(odd))


_PROBE = """
import contextlib, io, json, sys
sys.argv = ["opdesign", *json.loads(sys.argv[1])]
from opdesign.cli.entry import main
with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
    try:
        main()
    except SystemExit as exit:
        code = exit.code
print(json.dumps({"code": code, "loaded": sorted(m for m in ("typer", "click", "pydantic") if m in sys.modules)}))
"""


@pytest.mark.parametrize("argv,code,loaded", [
    (["golden", GOLDEN], 0, []),
    (["golden", GOLDEN, "--json", "-q"], 0, []),
    (["golden", GOLDEN, "--function", "nope"], 2, []),
    (["validate", str(EXAMPLES / "dense_fa_8192.yaml")], 2, ["pydantic"]),
    (["golden", "--help"], 0, ["pydantic", "typer"]),
])
def test_the_fast_path_loads_neither_typer_nor_pydantic_for_golden(argv, code, loaded) -> None:
    out = subprocess.run([sys.executable, "-c", _PROBE, json.dumps(argv)], capture_output=True, text=True, check=True)
    assert json.loads(out.stdout) == {"code": code, "loaded": loaded}


def _interrupt(*args, **kwargs):
    raise KeyboardInterrupt


@pytest.mark.parametrize("where", ["loading the command tree", "a fast-path validate"])
def test_ctrl_c_exits_130_without_a_traceback(capsys, monkeypatch, tmp_path, where):
    """Ctrl-C while the command tree loads (importing Typer takes a few hundred ms) printed Python's
    KeyboardInterrupt traceback; in a fast-path `validate` it exited 1, the findings code a CI job
    reads as "errors found". Both are 130 now, as Typer's own commands (128 + SIGINT)."""
    if where == "loading the command tree":
        monkeypatch.setattr(clifast, "fast_command", _interrupt)
        args = ["new", "--spec", str(EXAMPLES / "causal_gqa_tail.yaml"), "--out", str(tmp_path / "o")]
    else:
        monkeypatch.setattr(clifast, "validate_command", _interrupt)
        args = ["validate", str(EXAMPLES / "causal_gqa_tail.yaml")]
    monkeypatch.setattr(sys, "argv", ["opdesign", *args])
    with pytest.raises(SystemExit) as exit_:
        main()
    captured = capsys.readouterr()
    assert exit_.value.code == 130, captured
    assert "Traceback" not in captured.err and "internal_error" not in captured.err and captured.out == ""
    assert not (tmp_path / "o").exists()
