"""Paths by handle, all-or-nothing writes and the documented limits (issue 16 part A).

Races run a few dozen rounds here; ``benchmarks/stress_reliability.py`` runs thousands and prints figures.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from conftest import EXAMPLES, REPO, run_cli

from opdesign.agent.base import MAX_FILE_BYTES, MAX_REQUEST_BYTES, MAX_TEXT_BYTES
from opdesign.agent.tools import call_tool, parse_request
from opdesign.errors import InputError, TooLargeError

DENSE = (EXAMPLES / "dense_fa_8192.yaml").read_text(encoding="utf-8")
GOLDEN = (REPO / "tests/goldens/dense_forward_golden.py").read_text(encoding="utf-8")


def _padded(text: str, size: int) -> str:
    """``text`` plus a comment line, ``size`` bytes long in all."""
    pad = size - len(text.encode()) - 3
    return text + "#" + "x" * pad + "\n\n"


def _code(name, args, root):
    payload, ok = call_tool(name, args, root)
    return "ok" if ok else payload["error"]["code"]


# --- limits at N-1, N, N+1 ---


@pytest.mark.parametrize(("delta", "code"), [(-1, "ok"), (0, "ok"), (1, "too_large")])
def test_spec_and_golden_file_limits(tmp_path, delta, code):
    (tmp_path / "s.yaml").write_text(_padded(DENSE, MAX_FILE_BYTES + delta))
    (tmp_path / "g.py").write_text(_padded(GOLDEN, MAX_FILE_BYTES + delta))
    assert os.path.getsize(tmp_path / "s.yaml") == MAX_FILE_BYTES + delta
    assert _code("estimate_design", {"spec_path": "s.yaml"}, tmp_path) == code
    assert _code("estimate_golden", {"golden_path": "g.py"}, tmp_path) == code
    (tmp_path / "sg.yaml").write_text(DENSE + "golden: g.py\n")  # the golden named inside a SPEC
    assert _code("estimate_design", {"spec_path": "sg.yaml"}, tmp_path) == code
    res = run_cli("estimate", "--spec", str(tmp_path / "s.yaml"))
    assert res.returncode == (0 if code == "ok" else 2) and ("too_large" in res.stderr) == (code != "ok")


@pytest.mark.parametrize(("delta", "code"), [(-1, "ok"), (0, "ok"), (1, "too_large")])
def test_text_and_design_file_limits_are_utf8_bytes(tmp_path, delta, code):
    size = MAX_TEXT_BYTES + delta
    text = "# d\n\n" + "é" * ((size - 6) // 2) + "x" * ((size - 6) % 2) + "\n"  # two-byte characters
    assert len(text.encode()) == size
    assert _code("validate_design", {"text": text}, tmp_path) == code
    (tmp_path / "DESIGN.md").write_text(text, encoding="utf-8")
    assert _code("validate_design", {"design_path": "DESIGN.md"}, tmp_path) == code
    assert _code("validate_design", {"design_path": "."}, tmp_path) == code


@pytest.mark.parametrize("delta", [-1, 0, 1])
def test_request_limit(delta):
    raw = b"{}" + b" " * (MAX_REQUEST_BYTES + delta - 2)
    if delta > 0:
        with pytest.raises(TooLargeError):
            parse_request(raw)
    else:
        assert parse_request(raw) == {}


@pytest.mark.parametrize("raw,key", [
    (b'{"id": "SK-01", "id": "SK-02"}', "id"), (b'{"a": {"b": 1, "b": 2}}', "b"),
    (b'{"top": NaN}', "top"), (b'{"top": -Infinity}', "top"), (b'{"top": 1e999}', "top"),
    (b'{"configs": ["x", [Infinity]]}', "configs"), (b"[NaN]", None),
])
def test_duplicate_keys_and_non_finite_numbers_are_refused_naming_the_key(raw, key):
    with pytest.raises(InputError) as err:
        parse_request(raw)
    assert err.value.code == "invalid_input" and (err.value.details or {}).get("field") == key
    assert (f"{key!r}" in err.value.message) if key else "is not a finite JSON number" in err.value.message
    assert parse_request(b'{"top": 1.5, "nested": {"top": 2}}') == {"top": 1.5, "nested": {"top": 2}}


@pytest.mark.parametrize("raw,message", [
    (b'{"top": 1e999}', "malformed JSON: 'top': 1e999 is not a finite JSON number"),
    (b'{"top": -Infinity}', "malformed JSON: 'top': -Infinity is not a finite JSON number"),
    (b'{"configs": [1, [NaN, 1e400]]}', "malformed JSON: 'configs': NaN is not a finite JSON number"),
    (b"[2e308]", "malformed JSON: 2e308 is not a finite JSON number"),
])
def test_a_non_finite_number_is_quoted_as_written(raw, message):
    # 1e999 is a valid JSON number that no float holds: the message says which token, not "NaN or Infinity"
    with pytest.raises(InputError) as err:
        parse_request(raw)
    assert err.value.message.startswith(message) and "beyond the float range" in err.value.message


def test_tool_call_refuses_a_duplicate_key_with_invalid_input(tmp_path):
    res = run_cli("tool", "call", "get_pattern", input='{"id": "SK-01", "id": "AT-17"}', cwd=tmp_path)
    assert res.returncode == 2 and '"code": "invalid_input"' in res.stdout and "'id' is given twice" in res.stdout


# --- only regular files; loops are not_found ---


def test_fifo_directory_and_devices_are_invalid_input_without_waiting(tmp_path):
    os.mkfifo(tmp_path / "fifo.yaml")
    os.mkfifo(tmp_path / "g.py")
    (tmp_path / "dir.yaml").mkdir()
    (tmp_path / "sg.yaml").write_text(DENSE + "golden: g.py\n")
    for args in ({"spec_path": "fifo.yaml"}, {"spec_path": "dir.yaml"}, {"spec_path": "sg.yaml"}):
        assert _code("estimate_design", args, tmp_path) == "invalid_input", args  # the golden FIFO too
    assert _code("validate_design", {"design_path": "fifo.yaml"}, tmp_path) == "invalid_input"
    assert _code("estimate_golden", {"golden_path": "g.py"}, tmp_path) == "invalid_input"
    for argv in (["estimate", "--spec", "fifo.yaml"], ["estimate", "--spec", "/dev/zero"],
                 ["estimate", "--spec", "dir.yaml"], ["estimate", "--spec", "sg.yaml"], ["new", "--spec", "sg.yaml"],
                 ["tool", "call", "list_rules", "--input", "fifo.yaml"],
                 ["tool", "call", "list_rules", "--input", "/dev/zero"]):
        res = run_cli(*argv, cwd=tmp_path, timeout=300)  # before: blocked forever on the FIFO
        assert res.returncode == 2 and "invalid_input" in res.stdout + res.stderr, (argv, res.stderr)
        assert "MemoryError" not in res.stderr
    res = run_cli("validate", "fifo.yaml", cwd=tmp_path, timeout=300)
    assert res.returncode == 2 and "not a regular file" in res.stdout


def test_symlink_loops_are_not_found(tmp_path):
    os.symlink("loop_b", tmp_path / "loop_a")
    os.symlink("loop_a", tmp_path / "loop_b")
    (tmp_path / "sg.yaml").write_text(DENSE + "golden: loop_a.py\n")
    os.symlink("loop_a.py", tmp_path / "loop_a.py")
    assert _code("estimate_design", {"spec_path": "loop_a"}, tmp_path) == "not_found"
    assert _code("validate_design", {"design_path": "loop_a"}, tmp_path) == "not_found"
    assert _code("new_design", {"spec_path": "sg.yaml", "out_dir": "loop_a/op"}, tmp_path) == "not_found"
    assert _code("estimate_design", {"spec_path": "sg.yaml"}, tmp_path) == "not_found"
    res = run_cli("estimate", "--spec", "loop_a", cwd=tmp_path)
    assert res.returncode == 2 and "not_found" in res.stderr


# --- races: the root check and the use are one descriptor ---


def _flipper(link: Path, inside: Path, outside: Path, stop: threading.Event) -> threading.Thread:
    """Swap ``link`` between a real folder inside the root and a symlink to ``outside``, atomically."""
    def run():
        n = 0
        while not stop.is_set():
            n += 1
            tmp = link.with_name(f".flip{n}")
            if n % 2:
                os.symlink(outside, tmp)
            else:
                os.symlink(inside.name, tmp)
            os.replace(tmp, link)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def test_paths_swapped_for_outside_symlinks_never_escape(tmp_path):
    root, outside = tmp_path / "root", tmp_path / "outside"
    (root / "real").mkdir(parents=True)
    outside.mkdir()
    (root / "real" / "s.yaml").write_text(DENSE)
    (outside / "s.yaml").write_text(DENSE.replace("op_name: dense_fa_8192", "op_name: escaped_op"))
    (outside / "g.py").write_text("def broken(:\n")  # parsing it would be a spec_invalid syntax error
    (root / "real" / "g.py").write_text(GOLDEN)
    (root / "sg.yaml").write_text(DENSE + "golden: d/g.py\n")
    stop = threading.Event()
    thread = _flipper(root / "d", root / "real", outside, stop)
    try:
        for _ in range(10):
            payload, ok = call_tool("estimate_design", {"spec_path": "d/s.yaml"}, root)
            assert not ok or payload["op_name"] == "dense_fa_8192"
            payload, ok = call_tool("estimate_design", {"spec_path": "sg.yaml"}, root)
            assert ok or "syntax error" not in payload["error"]["message"], payload
            call_tool("new_design", {"spec_path": "real/s.yaml", "out_dir": "d/op", "force": True}, root)
    finally:
        stop.set()
        thread.join()
    assert sorted(p.name for p in outside.iterdir()) == ["g.py", "s.yaml"]


# --- all-or-nothing writes ---


def _render(lang):
    from opdesign.render.design import render_all
    from opdesign.workflows.new import plan_from_spec_file

    return render_all(plan_from_spec_file(EXAMPLES / "dense_fa_8192.yaml", tuning=True), lang)


def _folder_state(folder: Path) -> dict[str, str]:
    return {p.relative_to(folder).as_posix(): p.read_text(encoding="utf-8")
            for p in sorted(folder.rglob("*")) if p.is_file()}


def test_two_writers_never_mix_files(tmp_path):
    from opdesign.errors import OutputExistsError
    from opdesign.io.publish import write_artifacts

    renders = {lang: _render(lang) for lang in ("en", "zh")}
    for force in (False, True):
        for round_ in range(8):
            out = tmp_path / f"{force}-{round_}"
            barrier, outcomes = threading.Barrier(2), []

            def writer(lang, barrier=barrier, out=out, force=force, outcomes=outcomes):
                barrier.wait()
                try:
                    write_artifacts(renders[lang], out, force=force)
                    outcomes.append("ok")
                except OutputExistsError:
                    outcomes.append("output_exists")

            threads = [threading.Thread(target=writer, args=(lang,)) for lang in renders]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            assert sorted(outcomes) == (["ok", "ok"] if force else ["ok", "output_exists"])
            assert _folder_state(out) in list(renders.values())
            assert not [p for p in tmp_path.iterdir() if p.name.startswith(".opdesign-staging-")]


def test_force_keeps_other_files_and_a_failed_publish_leaves_the_old_output(tmp_path, monkeypatch):
    from opdesign.io import publish as write

    out = tmp_path / "op"
    en, zh = _render("en"), _render("zh")
    write.write_artifacts(en, out)
    (out / "notes.txt").write_text("mine")
    (out / "eval" / "extra.yaml").write_text("mine too")
    write.write_artifacts(zh, out, force=True)  # other files present: renamed in one by one
    assert _folder_state(out) == {**zh, "notes.txt": "mine", "eval/extra.yaml": "mine too"}

    real_rename, calls = os.rename, []

    def failing_rename(*args, **kwargs):
        calls.append(args)
        if len(calls) == 4:  # halfway through the file-by-file publish
            raise PermissionError(13, "Permission denied")
        return real_rename(*args, **kwargs)

    monkeypatch.setattr(write.os, "rename", failing_rename)
    with pytest.raises(Exception, match="cannot write artifacts"):
        write.write_artifacts(en, out, force=True)
    monkeypatch.undo()
    assert _folder_state(out) == {**zh, "notes.txt": "mine", "eval/extra.yaml": "mine too"}
    assert not [p for p in out.rglob(".opdesign-staging-*")]


def test_a_staging_folder_left_by_a_killed_run_is_removed_by_the_next(tmp_path):
    from opdesign.io.publish import write_artifacts

    out = tmp_path / "op"
    stale = tmp_path / ".opdesign-staging-0123456789abcdef"
    (stale / "eval").mkdir(parents=True)
    (stale / "DESIGN.md").write_text("half")
    write_artifacts(_render("en"), out)
    assert not stale.exists() and _folder_state(out) == _render("en")


def test_new_with_stdout_on_dev_full_writes_nothing(tmp_path):
    if not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full")
    with open("/dev/full", "w") as full:
        res = subprocess.run([sys.executable, "-m", "opdesign", "new", "--spec", str(EXAMPLES / "dense_fa_8192.yaml"),
                              "--out", "op"], cwd=tmp_path, stdout=full, stderr=subprocess.PIPE, text=True,
                             timeout=300)
    assert res.returncode == 2 and "io_error" in res.stderr
    assert list(tmp_path.iterdir()) == []


def test_new_design_into_the_root_itself_and_a_symlinked_eval_inside(tmp_path):
    shutil.copy(EXAMPLES / "dense_fa_8192.yaml", tmp_path / "s.yaml")
    assert _code("new_design", {"spec_path": "s.yaml", "out_dir": "."}, tmp_path) == "ok"
    assert (tmp_path / "DESIGN.md").is_file() and (tmp_path / "s.yaml").is_file()
    (tmp_path / "op" / "real_eval").mkdir(parents=True)
    os.symlink("real_eval", tmp_path / "op" / "eval")
    assert _code("new_design", {"spec_path": "s.yaml", "out_dir": "op"}, tmp_path) == "ok"
    assert (tmp_path / "op" / "real_eval" / "module_interfaces.yaml").is_file()


def test_a_file_by_file_publish_killed_halfway_is_rolled_back_by_the_next_run(tmp_path, monkeypatch):
    from opdesign.io import publish as write

    out = tmp_path / "op"
    en, zh = _render("en"), _render("zh")
    write.write_artifacts(en, out)
    (out / "notes.txt").write_text("mine")  # other files: the file-by-file publish
    real_rename, calls = os.rename, []

    class Killed(BaseException):
        pass

    def dying_rename(*args, **kwargs):
        calls.append(args)
        if len(calls) == 4:
            raise Killed  # as a SIGKILL would: no rollback runs
        return real_rename(*args, **kwargs)

    monkeypatch.setattr(write.os, "rename", dying_rename)
    monkeypatch.setattr(write, "_rollback", lambda *a: None)
    monkeypatch.setattr(write, "rmtree_at", lambda *a: None)
    with pytest.raises(Killed):
        write.write_artifacts(zh, out, force=True)
    monkeypatch.undo()
    assert _folder_state(out) not in (en, zh)  # mixed: the window the README names
    fd = os.open(out, os.O_RDONLY | os.O_DIRECTORY)
    try:
        write._clean_stale(fd, inside_target=True)  # what the next run does first, under the lock
    finally:
        os.close(fd)
    assert _folder_state(out) == {**en, "notes.txt": "mine"}
