"""`opdesign new --candidate N` / `--tiles`: the design of a ranked or hand-pinned candidate (issue 11 item 1)."""

from __future__ import annotations

import json
from functools import cache

import pytest
from conftest import EXAMPLES, REPO, run_cli

from opdesign.errors import InputError
from opdesign.workflows.pin import parse_tiles

TINY = REPO / "tests" / "fixtures" / "sk01" / "simrank_tiny.yaml"


@cache  # one `rank` run per (SPEC, top) for the module; the tests only read the rows
def _rank_rows(spec, top=400):
    res = run_cli("rank", "--spec", str(spec), "--top", str(top), "--json")
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout)


def _block(design_text: str) -> str:
    return design_text.split("This design is", 1)[1].split("\n", 1)[0]


def test_parse_tiles_reads_scalars_and_pairs():
    pins = parse_tiles("q_tile=64, kv_tile=512,qk_tile=128x256,pv_tile=512x128,vec_tile=16x256,streams=2")
    assert pins == {"q_tile": 64, "kv_tile": 512, "qk_tile": (128, 256), "pv_tile": (512, 128), "vec_tile": (16, 256),
                    "streams": 2}
    assert parse_tiles("qk_tile=128") == {"qk_tile": (128, 128)} and "kv_tile" not in parse_tiles("q_tile=32")


@pytest.mark.parametrize("text, says", [
    ("q_tile=0", "must be positive"), ("q_tile=abc", "not an integer"), ("tile=64", "key one of"),
    ("q_tile=64,q_tile=32", "given twice"), ("", "no tile given"), ("qk_tile=128x", "not an integer"),
    ("vec_tile=1x2x3", "expected M or MxN"),
])
def test_parse_tiles_refuses_bad_text(text, says):
    with pytest.raises(InputError, match=says):
        parse_tiles(text)


def test_candidate_n_is_rank_n_of_rank_and_round_trips(tmp_path):
    ranking = _rank_rows(TINY)
    row = ranking["rows"][4]  # rank 5
    out = tmp_path / "c5"
    res = run_cli("new", "--spec", str(TINY), "--candidate", "5", "--out", str(out), "-q")
    assert res.returncode == 0, res.stderr
    text = (out / "DESIGN.md").read_text()
    para = _block(text)
    assert f"candidate rank 5 of {ranking['legal']}" in para and f"rank {ranking['chosen_rank']})" in para
    assert f"score {row['score_cycles']} cycles" in para
    kernel = (out / "dense_tiny_kernel.py").read_text()
    assert f"Q_TILE = {row['q_tile']}" in kernel and f"KV_TILE = {row['kv_tile']}" in kernel
    res = run_cli("validate", str(out))
    assert res.returncode == 0 and "0 errors" in res.stdout, res.stdout


def test_tiles_name_their_rank_and_change(tmp_path):
    ranking = _rank_rows(TINY)
    row = ranking["rows"][0]
    mxn = lambda t: "x".join(map(str, t))  # noqa: E731
    pins = (f"q_tile={row['q_tile']},kv_tile={row['kv_tile']},qk_tile={mxn(row['qk_tile'])},"
            f"pv_tile={mxn(row['pv_tile'])},"
            f"vec_tile={row['vec_tile'][0]}x{row['vec_tile'][1]},unroll_factor={row['unroll_factor']}")
    out = tmp_path / "t"
    res = run_cli("new", "--spec", str(TINY), "--tiles", pins, "--out", str(out), "-q")
    assert res.returncode == 0, res.stderr
    para = _block((out / "DESIGN.md").read_text())
    assert "pinned by hand" in para and f"candidate rank 1 of {ranking['legal']}" in para
    assert f"q_tile: {ranking['chosen']['q_tile']} -> {row['q_tile']}" in para


def test_candidate_and_tiles_are_mutually_exclusive(tmp_path):
    res = run_cli("new", "--spec", str(TINY), "--candidate", "1", "--tiles", "q_tile=64", "--out", str(tmp_path / "x"))
    assert res.returncode == 2 and "mutually exclusive" in res.stderr
    assert not (tmp_path / "x").exists()


@pytest.mark.parametrize("flag", [["--candidate", "1"], ["--tiles", "q_tile=64"]])
def test_other_skeletons_are_refused(tmp_path, flag):
    res = run_cli("new", "--spec", str(EXAMPLES / "sk16_backward_lm.yaml"), *flag, "--out", str(tmp_path / "x"))
    assert res.returncode == 2 and "ranking covers SK-01" in res.stderr and "SK-16" in res.stderr


def test_an_illegal_pin_names_the_broken_rule(tmp_path):
    res = run_cli("new", "--spec", str(EXAMPLES / "causal_gqa_fai.yaml"), "--tiles",
                  "q_tile=512,kv_tile=1024,vec_tile=64x128", "--out", str(tmp_path / "x"))
    assert res.returncode == 2 and "error: invalid_input: pinned tiles break C-TILE-03" in res.stderr
    assert "C-TILE-03: C-TILE-03" not in res.stderr, res.stderr  # the rule id once, then its reason
    res = run_cli("new", "--spec", str(EXAMPLES / "dense_fa_8192.yaml"), "--tiles", "kv_tile=128",
                  "--out", str(tmp_path / "y"))
    assert res.returncode == 2 and "SK-01-P2" in res.stderr and "gives 64" in res.stderr
    assert res.stderr.count("SK-01-P2") == 1, res.stderr
    assert not (tmp_path / "x").exists() and not (tmp_path / "y").exists()


def test_a_rank_beyond_the_legal_space_is_refused(tmp_path):
    legal = _rank_rows(TINY, 1)["legal"]
    res = run_cli("new", "--spec", str(TINY), "--candidate", str(legal + 1), "--out", str(tmp_path / "x"))
    assert res.returncode == 2 and f"has {legal} legal candidates" in res.stderr
    res = run_cli("new", "--spec", str(TINY), "--candidate", "0", "--out", str(tmp_path / "x"))
    assert res.returncode == 2 and "ranks start at 1" in res.stderr


def test_rectangular_tiles_pin_the_row_with_those_tiles(tmp_path):
    """--tiles qk_tile=MxN,pv_tile=MxN (rank's own notation) pins the best legal row with those tiles, and the
    kernel sets that row's cube TileShapes; tiles no candidate has are refused, naming rank --show-rejected."""
    rows = _rank_rows(TINY)["rows"]
    row = next(r for r in rows if r["qk_tile"][0] != r["qk_tile"][1])
    mxn = lambda t: "x".join(map(str, t))  # noqa: E731
    out = tmp_path / "r"
    res = run_cli("new", "--spec", str(TINY), "--tiles", f"q_tile={row['q_tile']},kv_tile={row['kv_tile']},"
                  f"qk_tile={mxn(row['qk_tile'])},pv_tile={mxn(row['pv_tile'])}", "--out", str(out), "-q")
    assert res.returncode == 0, res.stderr
    first = next(r for r in rows if (r["q_tile"], r["kv_tile"], r["qk_tile"], r["pv_tile"]) ==
                 (row["q_tile"], row["kv_tile"], row["qk_tile"], row["pv_tile"]))
    assert f"candidate rank {first['rank']} of" in _block((out / "DESIGN.md").read_text())
    c1 = first["cube_tiles"]["C1"]
    assert f"set_cube_tile_shapes({c1['m']}, {c1['k']}, {c1['n']})" in (out / "dense_tiny_kernel.py").read_text()
    res = run_cli("new", "--spec", str(TINY), "--tiles", "qk_tile=16x48,pv_tile=32x48", "--out", str(tmp_path / "n"))
    assert res.returncode == 2 and "no candidate of dense_tiny's space has qk_tile=16x48" in res.stderr
    assert not (tmp_path / "n").exists()


@pytest.mark.parametrize("text, says", [
    ("q_tile=99999999999999999999999", "is outside 1..1048576"),  # was internal_error (OverflowError), exit 3
    ("q_tile=" + "9" * 5000, "is outside 1..1048576"),  # int() refuses over 4300 digits
    ("kv_tile=2097152", "kv_tile=2097152 is outside 1..1048576"), ("qk_tile=128x99999999", "is outside 1..1048576"),
    ("q_tile=１２８", "not an integer"), ("q_tile=1_28", "not an integer"),  # int() would take both
])
def test_parse_tiles_refuses_values_int_would_take_or_overflow_on(text, says):
    with pytest.raises(InputError, match=says):
        parse_tiles(text)


def test_a_huge_pin_is_an_input_error_not_a_bug(tmp_path):
    res = run_cli("new", "--spec", str(TINY), "--tiles", "q_tile=99999999999999999999999", "--out", str(tmp_path / "x"))
    assert res.returncode == 2 and "error: invalid_input: --tiles: q_tile=" in res.stderr, res.stderr
    assert "internal_error" not in res.stderr and not (tmp_path / "x").exists()


@pytest.mark.parametrize("pins, key", [("unroll_factor=3", "unroll_factor"), ("streams=100", "streams"),
                                        ("q_tile=64,head_group=3", "head_group")])
def test_a_knob_value_no_legal_row_has_is_named_not_blamed_on_a_rejected_row(tmp_path, pins, key):
    """A pinned unroll / head group / stream count outside the ranking's values used to be refused with the
    reason of whichever rejected tile geometry came first (e.g. "C-TILE-03: UB ... B > ... B")."""
    legal = sorted({r[key] for r in _rank_rows(TINY, 100000)["rows"]})
    res = run_cli("new", "--spec", str(TINY), "--tiles", pins, "--out", str(tmp_path / "x"))
    assert res.returncode == 2, res.stderr
    value = pins.rsplit("=", 1)[1]
    assert f"--tiles: {key}={value}: no legal candidate of dense_tiny has it" in res.stderr, res.stderr
    assert f"take {key} {', '.join(map(str, legal))})" in res.stderr and "C-TILE" not in res.stderr
    assert not (tmp_path / "x").exists()


def test_a_form_breaking_rank_points_to_within_form_numbering(tmp_path):
    """dense_fa_8192's rank 1 breaks SK-01-P1 (q_tile != seq_q / 2) and SK-01-P2 (16 KV tiles): refused by name;
    --within-form counts as `rank --within-form` does and writes that list's rank 1."""
    spec = EXAMPLES / "dense_fa_8192.yaml"
    full = _rank_rows(spec, top=1)["rows"][0]
    assert full["form_rules"] == ["SK-01-P1", "SK-01-P2"]
    res = run_cli("new", "--spec", str(spec), "--candidate", "1", "--out", str(tmp_path / "x"))
    assert res.returncode == 2 and not (tmp_path / "x").exists()
    assert "rank 1 breaks the performance form (SK-01-P1" in res.stderr and "--within-form" in res.stderr
    inside = json.loads(run_cli("rank", "--spec", str(spec), "--top", "1", "--json", "--within-form").stdout)["rows"][0]
    out = tmp_path / "w1"
    res = run_cli("new", "--spec", str(spec), "--candidate", "1", "--within-form", "--out", str(out), "-q")
    assert res.returncode == 0, res.stderr
    kernel = (out / "dense_fa_8192_kernel.py").read_text()
    assert f"Q_TILE = {inside['q_tile']}" in kernel and f"KV_TILE = {inside['kv_tile']}" in kernel
    res = run_cli("validate", str(out))
    assert res.returncode == 0 and "0 errors" in res.stdout, res.stdout
    res = run_cli("new", "--spec", str(spec), "--within-form", "--out", str(tmp_path / "y"))
    assert res.returncode == 2 and "give --candidate N" in res.stderr
