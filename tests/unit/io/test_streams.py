"""Standard streams (opdesign.io.streams): a closed, full or broken stdout / stderr is ``io_error`` and
exit 2 on every command; a terminal that is not UTF-8 still gets every finding (text: ``\\uXXXX``
escapes; JSON: ASCII), never a UnicodeEncodeError and exit 3."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import EXAMPLES
from hypothesis import given, settings
from hypothesis import strategies as st

from opdesign.io.streams import ascii_json

CJK_FUNCTION = "注意力_golden"
GOLDEN = Path(__file__).resolve().parents[2] / "goldens" / "dense_forward_golden.py"
STDOUT_CLOSED = "error: io_error: stdout closed: opdesign writes results to stdout and diagnostics to stderr\n"
STDERR_CLOSED = "error: io_error: stderr closed: opdesign writes results to stdout and diagnostics to stderr\n"


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONIOENCODING", "PYTHONUTF8")}
    return {**env, **extra}


def _run(args: list[str], *, cwd: Path, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
         close: tuple[int, ...] = (), env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """``python -m opdesign ARGS`` with the given streams; ``close`` lists descriptors closed in the child."""
    def closer() -> None:
        for fd in close:
            os.close(fd)

    return subprocess.run([sys.executable, "-m", "opdesign", *args], cwd=cwd, stdin=stdin, stdout=stdout,
                          stderr=stderr, preexec_fn=closer if close else None, env=env or _env(), timeout=120,
                          check=False)


@pytest.fixture
def tiny(tmp_path: Path) -> Path:
    """A DESIGN.md whose findings quote the Chinese chapter names (exit 1)."""
    (tmp_path / "tiny").mkdir()
    (tmp_path / "tiny" / "DESIGN.md").write_text("# tiny\n", encoding="utf-8")
    return tmp_path


@pytest.mark.parametrize("args", [["cards", "list"], ["validate", "tiny"]])
def test_a_closed_stdout_is_io_error(tiny: Path, args: list[str]) -> None:
    res = _run(args, cwd=tiny, close=(1,), stdout=None)
    assert (res.returncode, res.stderr.decode()) == (2, STDOUT_CLOSED)


def test_a_closed_stderr_is_io_error_said_on_stdout(tiny: Path) -> None:
    res = _run(["validate", "tiny"], cwd=tiny, close=(2,), stderr=None)
    assert (res.returncode, res.stdout.decode()) == (2, STDERR_CLOSED)
    tool = _run(["tool", "call", "spec_schema"], cwd=tiny, close=(2,), stderr=None)
    assert tool.returncode == 2
    assert json.loads(tool.stdout)["error"] == {
        "code": "io_error", "message": STDERR_CLOSED.removeprefix("error: io_error: ").strip(),
        "details": {"streams": ["stderr"]}}


def test_a_closed_stdin_of_a_tool_call_is_io_error(tiny: Path) -> None:
    res = _run(["tool", "call", "spec_schema"], cwd=tiny, stdin=None, close=(0,))
    assert res.returncode == 2
    assert json.loads(res.stdout)["error"]["code"] == "io_error"
    assert json.loads(res.stdout)["error"]["message"].startswith("stdin is closed")


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
@pytest.mark.parametrize("args,code", [(["cards", "list"], 0), (["validate", "tiny"], 1),
                                       (["tool", "call", "spec_schema"], 0), (["schema", "spec"], 0)])
def test_a_full_stdout_is_io_error(tiny: Path, args: list[str], code: int) -> None:
    assert _run(args, cwd=tiny).returncode == code  # the exit code with a working stdout
    with open("/dev/full", "wb") as full:
        res = _run(args, cwd=tiny, stdout=full)
    assert res.returncode == 2
    assert res.stderr.decode() == ("error: io_error: cannot write to stdout: No space left on device "
                                   "(output was lost)\n")


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
def test_a_full_stderr_is_io_error(tiny: Path) -> None:
    with open("/dev/full", "wb") as full:
        res = _run(["new", "--spec", "missing.yaml"], cwd=tiny, stderr=full)  # the error goes to stderr
        both = _run(["validate", "tiny"], cwd=tiny, stdout=full, stderr=full)
    assert (res.returncode, res.stdout) == (2, b"")
    assert (both.returncode, both.stdout, both.stderr) == (2, None, None)


def test_a_broken_pipe_is_io_error(tiny: Path) -> None:
    read, write = os.pipe()
    os.close(read)  # the reader is gone before the first write: EPIPE
    try:
        res = _run(["validate", "tiny"], cwd=tiny, stdout=write)
    finally:
        os.close(write)
    assert res.returncode == 2
    assert res.stderr.decode() == "error: io_error: cannot write to stdout: Broken pipe (output was lost)\n"


@pytest.fixture
def cjk_golden(tiny: Path) -> Path:
    text = GOLDEN.read_text(encoding="utf-8")
    name = next(line.split("def ", 1)[1].split("(")[0] for line in text.splitlines()
                if line.startswith("def ") and "_golden(" in line)
    (tiny / "cjk_golden.py").write_text(text.replace(f"def {name}(", f"def {CJK_FUNCTION}("), encoding="utf-8")
    return tiny


@pytest.mark.parametrize("encoding", ["latin-1", "ISO-8859-9", "ascii"])
def test_a_terminal_that_is_not_utf8_gets_every_finding(cjk_golden: Path, encoding: str) -> None:
    env = _env(PYTHONIOENCODING=encoding)
    utf8 = _run(["validate", "tiny"], cwd=cjk_golden)
    text = _run(["validate", "tiny"], cwd=cjk_golden, env=env)
    assert (utf8.returncode, text.returncode, text.stderr) == (1, 1, b"")
    expected = utf8.stdout.decode("utf-8").encode("ascii", "backslashreplace").decode("ascii")
    assert text.stdout.decode("ascii") == expected
    assert "missing chapter 'Pseudocode' (\\u4f2a\\u4ee3\\u7801)" in expected
    for args in (["validate", "--format", "json", "tiny"], ["validate", "--format", "sarif", "tiny"]):
        res = _run(args, cwd=cjk_golden, env=env)
        assert res.returncode == 1
        assert json.loads(res.stdout.decode("ascii")) == json.loads(_run(args, cwd=cjk_golden).stdout)
    golden = _run(["golden", "cjk_golden.py"], cwd=cjk_golden, env=env)
    assert golden.returncode == 0
    assert golden.stdout.decode("ascii").splitlines()[0] == "function: \\u6ce8\\u610f\\u529b_golden"
    golden_json = _run(["golden", "cjk_golden.py", "--json"], cwd=cjk_golden, env=env)
    assert json.loads(golden_json.stdout.decode("ascii"))["function"] == CJK_FUNCTION
    tool = subprocess.run([sys.executable, "-m", "opdesign", "tool", "call", "validate_design"], cwd=cjk_golden,
                          env=env, input=b'{"design_path": "tiny/DESIGN.md"}', capture_output=True, timeout=120,
                          check=False)
    assert tool.returncode == 0
    messages = [f["message"] for f in json.loads(tool.stdout.decode("ascii"))["findings"]]
    assert "missing chapter 'Pseudocode' (伪代码)" in messages


def test_json_output_is_ascii_on_a_utf8_terminal_too(cjk_golden: Path) -> None:
    """The same bytes on every terminal: JSON is ASCII whatever the encoding."""
    for args in (["validate", "--format", "json", "tiny"], ["golden", "cjk_golden.py", "--json"],
                 ["cards", "show", "SK-01", "--json"], ["estimate", "--spec", str(EXAMPLES / "dense_fa_8192.yaml"),
                                                         "--json"]):
        res = _run(args, cwd=cjk_golden)
        assert res.returncode in (0, 1), args
        assert res.stdout.isascii(), args
        assert res.stdout == _run(args, cwd=cjk_golden, env=_env(PYTHONIOENCODING="latin-1")).stdout, args


@settings(max_examples=60, deadline=None)
@given(st.recursive(st.none() | st.booleans() | st.integers() | st.text(),
                    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
                    max_leaves=10))
def test_ascii_json_is_what_json_dumps_writes(value: object) -> None:
    raw = json.dumps(value, ensure_ascii=False, indent=2)
    assert ascii_json(raw) == json.dumps(value, ensure_ascii=True, indent=2)


def test_a_tool_call_without_stdout_answers_in_json_on_stderr(tiny: Path) -> None:
    res = _run(["tool", "call", "spec_schema"], cwd=tiny, close=(1,), stdout=None)
    assert res.returncode == 2
    assert json.loads(res.stderr)["error"] == {
        "code": "io_error", "message": STDOUT_CLOSED.removeprefix("error: io_error: ").strip(),
        "details": {"streams": ["stdout"]}}
