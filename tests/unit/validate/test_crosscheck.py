"""`opdesign validate DIR` compares the kernel with its DESIGN.md block (issue 30, Deliver 2)."""

from __future__ import annotations

import re
import shutil

import pytest
from conftest import EXAMPLES, REPO

from opdesign.validate import validate_paths
from opdesign.workflows.new import new_design

SPECS = sorted(EXAMPLES.glob("*.yaml")) + sorted((REPO / "tests/fixtures/generated").glob("*.yaml"))
#: drift a generated folder is known to carry (none since the performance-form causal kernel skips
#: fully masked KV tiles, issue 30 item 2)
KNOWN: dict[str, set[str]] = {}


def _xc(folder):
    return [f for f in validate_paths([folder]).findings if f.rule.startswith("OD-XC")]


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    root = tmp_path_factory.mktemp("xc")
    out = {}
    for spec in SPECS:
        new_design(spec, root / spec.stem, lang="en")
        out[spec.stem] = root / spec.stem
    return out


@pytest.mark.parametrize("name", [s.stem for s in SPECS])
def test_generated_folder_passes_the_cross_check(folders, name):
    assert {f.rule for f in _xc(folders[name])} == KNOWN.get(name, set()), _xc(folders[name])


DRIFT = [  # (example, kernel text, drifted text, rule)
    ("causal_gqa_tail", "\nQ_TILE = 64\n", "\nQ_TILE = 32\n", "OD-XC-01"),
    ("causal_gqa_tail", "\nKV_TILE = 128\n", "\nKV_TILE = 256\n", "OD-XC-01"),
    ("causal_gqa_tail", "\nHEAD_DIM = 128\n", "\nHEAD_DIM = 64\n", "OD-XC-01"),
    ("causal_gqa_tail", "\nGROUP = 4 ", "\nGROUP = 2 ", "OD-XC-01"),
    ("sk16_backward_lm", "\nNUM_HEADS = 8\n", "\nNUM_HEADS = 4\n", "OD-XC-01"),
    ("dense_fa_8192", "\nSEQ_KV = 8192\n", "\nSEQ_KV = 4096\n", "OD-XC-01"),
    ("causal_gqa_tail", "pypto.set_cube_tile_shapes([64, 64], [128, 128], [128, 128])\n                    s = ",
     "pypto.set_cube_tile_shapes([64, 64], [64, 64], [128, 128])\n                    s = ", "OD-XC-02"),
    ("causal_gqa_tail", "pypto.set_vec_tile_shapes(16, 128)", "pypto.set_vec_tile_shapes(32, 128)", "OD-XC-02"),
    ("causal_gqa_tail", "    v: pypto.Tensor(", "    v_other: pypto.Tensor(", "OD-XC-03"),
    ("dense_fa_8192", "for kj in range(KV_TILES):", "for kj in range(KV_TILES - 1):", "OD-XC-04"),
    # issue 30 item 2: the performance-form causal kernel as it was, running every KV tile (4 steps, plan 3)
    ("gen_perf_causal_tail", "for kj in range(kv_begin, kv_end):", "for kj in range(KV_TILES):", "OD-XC-04"),
    ("causal_gqa_tail", "def causal_gqa_tail_kernel(", "def other_op_kernel(", "OD-XC-05"),
]


@pytest.mark.parametrize("example,old,new,rule", DRIFT, ids=[f"{d[3]}-{i}" for i, d in enumerate(DRIFT)])
def test_seeded_drift_fails_naming_both_lines(folders, tmp_path, example, old, new, rule):
    folder = tmp_path / example
    shutil.copytree(folders[example], folder)
    kernel = folder / f"{example}_kernel.py"
    text = kernel.read_text()
    assert old in text, old
    kernel.write_text(text.replace(old, new, 1))
    found = [f for f in _xc(folder) if f.rule == rule]
    assert found, _xc(folder)
    report = validate_paths([folder])
    assert report.exit_code == 1
    for f in found:
        m = re.search(r"\(kernel line (\d+); (\S+) line (\d+)\)$", f.message)
        assert m, f.message
        assert int(m.group(1)) == f.line and f.file == str(kernel)
        assert m.group(2).endswith(("DESIGN.md", "module_interfaces.yaml")) and int(m.group(3)) > 1
    # the kernel line named is the edited one (or the function's, for a parameter / the op name)
    edited = text.replace(old, new, 1).splitlines()
    assert any(new.strip().splitlines()[0] in edited[f.line - 1] or "def " in edited[f.line - 1] for f in found), found


def test_folder_without_the_block_is_not_cross_checked(tmp_path):
    """Hand-written kernels beside a DESIGN.md without the `opdesign:` block are not judged against it."""
    from opdesign.validate.rules.crosscheck import cross_check

    assert cross_check("DESIGN.md", {"op_name": "x"}, lambda *p: 1, None, "i.yaml", lambda *p: 1,
                       [("a_impl.py", "Q_TILE = 3\n")]) == []


def test_new_force_removes_another_operators_artifacts_and_keeps_other_files(folders, tmp_path):
    """Item 7: `new --force` into a folder of another operator removes that operator's kernel and scaffold
    (recognised by the header opdesign writes), keeps every other file; validate then passes."""
    folder = tmp_path / "op"
    shutil.copytree(folders["causal_gqa_tail"], folder)
    (folder / "notes.txt").write_text("mine\n")
    hand = '"""my_kernel: hand-written\n\nnot generated\n"""\n'
    (folder / "my_kernel.py").write_text(hand)  # no header marker: not opdesign's
    new_design(EXAMPLES / "sliding_window_512.yaml", folder, lang="en", force=True)
    names = sorted(p.name for p in folder.iterdir())
    assert names == ["DESIGN.md", "eval", "my_kernel.py", "notes.txt", "sliding_window_512_kernel.py",
                     "sliding_window_512_scaffold.py"]
    assert (folder / "my_kernel.py").read_text() == hand and (folder / "notes.txt").read_text() == "mine\n"


def test_new_force_puts_the_old_artifacts_back_when_publishing_fails(folders, tmp_path):
    folder = tmp_path / "op"
    shutil.copytree(folders["causal_gqa_tail"], folder)
    before = {p.name: p.read_bytes() for p in folder.iterdir() if p.is_file()}

    def boom(_paths):
        raise RuntimeError("stop")

    with pytest.raises(RuntimeError):
        new_design(EXAMPLES / "sliding_window_512.yaml", folder, lang="en", force=True, before_publish=boom)
    assert {p.name: p.read_bytes() for p in folder.iterdir() if p.is_file()} == before


def test_artifact_of_another_operator_is_an_error(folders, tmp_path):
    """A scaffold and a kernel that opdesign wrote for another op, beside this op's DESIGN.md: OD-XC-05."""
    folder = tmp_path / "op"
    shutil.copytree(folders["causal_gqa_tail"], folder)
    shutil.copy(folders["dense_fa_8192"] / "dense_fa_8192_scaffold.py", folder)
    shutil.copy(folders["dense_fa_8192"] / "dense_fa_8192_kernel.py", folder)
    found = {(f.file.rsplit("/", 1)[-1], f.rule) for f in _xc(folder)}
    assert ("dense_fa_8192_scaffold.py", "OD-XC-05") in found and ("dense_fa_8192_kernel.py", "OD-XC-05") in found
    assert validate_paths([folder]).exit_code == 1


def test_thirty_drawn_specs_pass_the_cross_check(tmp_path):
    """30 Hypothesis-drawn SPECs (benchmarks/verify_generated_specs.py's generator, every variant): `new`
    writes them (each typical config runnable by its kernel) and the folder passes the cross-check."""
    import sys

    sys.path.insert(0, str(REPO / "benchmarks"))
    import verify_generated_specs as gen
    import yaml

    drawn = gen.draw_specs(30, 3)
    assert len(drawn) == 30
    for i, (variant, spec) in enumerate(drawn):
        path = tmp_path / f"s{i}.yaml"
        path.write_text(yaml.safe_dump(spec), encoding="utf-8")
        folder = tmp_path / f"op{i}"
        new_design(path, folder, lang="en")
        bad = [f for f in validate_paths([folder]).findings
               if f.rule.startswith("OD-XC") or f.rule == "OD-DOC-21"]
        assert bad == [], (variant, gen.describe(spec), bad)
