"""The `new` fast path of the entry point (issue 15): a plain `opdesign new` line skips Typer and gives the
same exit code, stdout, stderr and files as the Typer tree; anything else is Typer's."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import EXAMPLES

from opdesign.cli import fast as clinew
from opdesign.cli.entry import main

DENSE, CAUSAL, SK16 = (str(EXAMPLES / f"{name}.yaml") for name in ("dense_fa_8192", "causal_gqa_tail",
                                                                    "sk16_backward_lm"))


def _files(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def _run(capsys, monkeypatch, args: list[str], typer_only: bool, cwd: Path) -> tuple[int, str, str, dict]:
    """(exit code, stdout, stderr, files under cwd) of one run in a fresh ``cwd/work`` folder."""
    work = cwd / "work"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir()
    (work / "taken").mkdir()
    (work / "taken" / "DESIGN.md").write_text("mine\n", encoding="utf-8")  # a target `new` must refuse
    with monkeypatch.context() as patch:
        patch.chdir(work)
        patch.setattr(sys, "argv", ["opdesign", *args])
        if typer_only:
            patch.setattr(clinew, "fast_command", lambda argv: None)
        try:
            main()
            code = 0
        except SystemExit as done:
            code = done.code if isinstance(done.code, int) else 0
    out = capsys.readouterr()
    return code, out.out, out.err, _files(work)


LINES = [
    ["new", "--spec", DENSE, "--out", "dense"],
    ["-q", "new", "--spec", CAUSAL, "--lang", "en", "--out", "causal", "--force"],
    ["new", "--uncalibrated", "--spec", CAUSAL, "--out", "causal", "--quiet"],
    ["new", "--spec", SK16],  # ./<op_name>
    ["new", "--spec", DENSE, "--out", "taken"],  # refused: a file exists
    ["new", "--spec", "absent.yaml", "--out", "x"],
    ["new", "--spec", DENSE, "--out", "x", "--lang", "fr"],
    ["new", "--spec", DENSE, "--out", " "],
]


def test_fast_path_writes_and_prints_what_the_typer_tree_does(capsys, monkeypatch, tmp_path) -> None:
    codes = set()
    for args in LINES:
        assert clinew.fast_command(args) is not None, args  # these lines do take the fast path
        fast = _run(capsys, monkeypatch, args, typer_only=False, cwd=tmp_path)
        slow = _run(capsys, monkeypatch, args, typer_only=True, cwd=tmp_path)
        assert fast == slow, args
        codes.add(fast[0])
        if fast[0] == 0:
            assert len(fast[3]) >= 5 and any(name.endswith("DESIGN.md") and name != "taken/DESIGN.md"
                                             for name in fast[3]), args
    assert codes == {0, 2}  # designs written and refused input were both compared


@pytest.mark.parametrize("args", [
    ["new"], ["new", "--help"], ["new", "-h"], ["new", "--spec"], ["new", "--spec", ""], ["new", "--spec", "-x"],
    ["new", "--spec=a.yaml"], ["new", "--out", "d"], ["new", "--spec", "a", "--spec", "b"],
    ["new", "--spec", "a", "--force", "--force"], ["new", "--spec", "a", "--candidate", "2"],
    ["new", "--spec", "a", "--tiles", "q_tile=64"], ["new", "--spec", "a", "extra"], ["new", "--spec", "a", "--"],
    ["--version", "new", "--spec", "a"], ["new", "--spec", "a", "--out"], ["estimate", "--spec", "a"],
    ["new", "--spec", "a", "--within-form"], [],
])
def test_anything_but_a_plain_new_line_goes_to_typer(args) -> None:
    assert clinew.fast_command(args) is None


def test_a_completion_request_goes_to_typer(monkeypatch) -> None:
    monkeypatch.setenv("_OPDESIGN_COMPLETE", "bash_complete")
    assert clinew.fast_command(["new", "--spec", DENSE]) is None


def test_the_new_fast_path_does_not_load_typer(tmp_path) -> None:
    probe = ("import contextlib, io, sys\nsys.argv = ['opdesign', 'new', '--spec', sys.argv[1], '--out', sys.argv[2]]\n"
             "from opdesign.cli.entry import main\n"
             "with contextlib.redirect_stdout(io.StringIO()):\n    try:\n        main()\n"
             "    except SystemExit as exit:\n        code = exit.code\n"
             "print(__import__('json').dumps([code, sorted(m for m in ('typer', 'click') if m in sys.modules)]))\n")
    out = subprocess.run([sys.executable, "-c", probe, CAUSAL, str(tmp_path / "d")], capture_output=True, text=True,
                         check=True)
    assert json.loads(out.stdout) == [0, []]
    assert (tmp_path / "d" / "DESIGN.md").is_file()
