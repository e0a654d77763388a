"""Ctrl-C: every command exits 130 with no traceback, the generated numpy scaffold included.

Each test sends a real SIGINT at a known point: the command blocks at a test hook
(``OPDESIGN_PAUSE=<point>:<fifo>``, :func:`opdesign.cli.output.pause`) reading a FIFO, and the
signal goes out once the test has opened the FIFO's other end, which is possible only while the
command holds it open at that point. No sleep decides when the signal is sent.
"""

from __future__ import annotations

import errno
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import EXAMPLES

SPEC = str(EXAMPLES / "causal_gqa_tail.yaml")
#: seconds a command may take to reach its pause point before the test fails (not a timing assertion:
#: a guard against a command that never gets there)
REACH = 120.0


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)  # as a terminal starts a program (a test runner may ignore it)


def _start(argv: list[str], cwd: Path, env: dict[str, str]) -> subprocess.Popen:
    return subprocess.Popen(argv, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=_default_sigint)


def _interrupt_at_pause(proc: subprocess.Popen, fifo: Path) -> tuple[int, str, str]:
    """Wait until ``proc`` holds the FIFO open (it is blocked at its pause point), send SIGINT, then
    close our end; (exit code, stdout, stderr)."""
    deadline = time.monotonic() + REACH
    while True:
        try:
            fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)  # fails with ENXIO while no reader has it open
            break
        except OSError as err:
            if err.errno != errno.ENXIO:
                raise
        if proc.poll() is not None or time.monotonic() > deadline:
            out, err_text = proc.communicate()
            proc.kill()
            pytest.fail(f"the command never reached its pause point (rc {proc.returncode}): {err_text[-2000:]}")
        time.sleep(0.01)  # polling for the reader; the signal itself waits for nothing but this open
    try:
        proc.send_signal(signal.SIGINT)
        out, err_text = proc.communicate(timeout=REACH)
    finally:
        os.close(fd)
    return proc.returncode, out, err_text


def _env(point: str, fifo: Path) -> dict[str, str]:
    return dict(os.environ, OPDESIGN_PAUSE=f"{point}:{fifo}")


@pytest.fixture()
def design(tmp_path: Path) -> Path:
    out = tmp_path / "design"
    subprocess.run([sys.executable, "-m", "opdesign", "new", "--spec", SPEC, "--out", str(out)], check=True,
                   capture_output=True)
    return out


def _command(name: str, tmp_path: Path, design: Path) -> tuple[str, list[str]]:
    """(pause point, command line) of each interrupted command."""
    out = str(tmp_path / "new_out")
    return {
        "new (fast path)": ("new", ["new", "--spec", SPEC, "--out", out]),
        "new (Typer tree)": ("new", ["new", f"--spec={SPEC}", "--out", out]),
        "validate (fast path)": ("validate", ["validate", str(design)]),
        "validate (Typer tree)": ("validate", ["validate", "--format=json", str(design)]),
        "rank": ("rank", ["rank", "--spec", SPEC, "--top", "3"]),
        "verify": ("verify", ["verify", str(design), "--quick"]),
    }[name]


@pytest.mark.parametrize("name", ["new (fast path)", "new (Typer tree)", "validate (fast path)",
                                  "validate (Typer tree)", "rank", "verify"])
def test_ctrl_c_exits_130_without_a_traceback(tmp_path: Path, design: Path, name: str) -> None:
    fifo = tmp_path / "pause"
    os.mkfifo(fifo)
    point, args = _command(name, tmp_path, design)
    proc = _start([sys.executable, "-m", "opdesign", *args], tmp_path, _env(point, fifo))
    code, out, err = _interrupt_at_pause(proc, fifo)
    assert code == 130, (out, err)
    assert "Traceback" not in err and "internal_error" not in err, err
    assert out == ""
    assert not (tmp_path / "new_out").exists()  # `new` interrupted before publishing writes nothing


def test_without_the_hook_the_commands_run_through(tmp_path: Path, design: Path) -> None:
    """The hook is inert unless it names the point: a paused point that is not this command's is ignored."""
    fifo = tmp_path / "pause"
    os.mkfifo(fifo)
    done = subprocess.run([sys.executable, "-m", "opdesign", "validate", str(design)], cwd=tmp_path,
                          env=_env("rank", fifo), capture_output=True, text=True, timeout=REACH)
    assert done.returncode == 0 and "0 errors" in done.stdout


_SCAFFOLD_PROBE = """
import runpy, sys
fifo, scaffold = sys.argv[1], sys.argv[2]


class Pausing:
    '''stderr that blocks on the FIFO when the scaffold says it starts the kernel of its first config.'''

    def __init__(self, real):
        self.real, self.done = real, False

    def write(self, text):
        if not self.done and text.endswith(": kernel"):
            self.done = True
            with open(fifo, "rb") as pipe:
                pipe.read()
        return self.real.write(text)

    def __getattr__(self, name):
        return getattr(self.real, name)


sys.stderr = Pausing(sys.stderr)
sys.argv = [scaffold, "--quick"]
runpy.run_path(scaffold, run_name="__main__")
"""


def test_ctrl_c_in_the_numpy_scaffold_exits_130_without_a_traceback(tmp_path: Path, design: Path) -> None:
    fifo = tmp_path / "pause"
    os.mkfifo(fifo)
    scaffold = next(design.glob("*_scaffold.py"))
    proc = _start([sys.executable, "-c", _SCAFFOLD_PROBE, str(fifo), str(scaffold)], tmp_path, dict(os.environ))
    code, out, err = _interrupt_at_pause(proc, fifo)
    assert code == 130, (out, err)
    assert "Traceback" not in err and err.rstrip().endswith("interrupted"), err
    assert "PASS" not in out and "FAIL" not in out  # no config finished
