"""`opdesign new`: three files, deterministic bytes, no overwrite, runnable scaffold, CANNBot contract."""

from __future__ import annotations

import subprocess
import sys

import pytest
import yaml
from conftest import EXAMPLES, run_cli
from markdown_it import MarkdownIt

ZH_HEADINGS = ["算子契约", "计算图与 API 映射", "分解与模块边界", "范式与设计决策", "伪代码",
               "验证方案 / Verification Plan", "风险与开放问题"]


def _new(tmp_path, spec, *extra):
    out = tmp_path / spec
    res = run_cli("new", "--spec", str(EXAMPLES / f"{spec}.yaml"), "--out", str(out), *extra)
    assert res.returncode == 0, res.stderr
    return out


@pytest.mark.parametrize("spec", ["dense_fa_8192", "causal_gqa_tail"])
def test_new_writes_four_files_deterministically(tmp_path, spec):
    out = _new(tmp_path, spec)
    files = sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file())
    assert files == ["DESIGN.md", f"{spec}_kernel.py", f"{spec}_scaffold.py", "eval/module_interfaces.yaml"]
    first = {f: (out / f).read_bytes() for f in files}
    res = run_cli("new", "--spec", str(EXAMPLES / f"{spec}.yaml"), "--out", str(out), "--force")
    assert res.returncode == 0
    assert {f: (out / f).read_bytes() for f in files} == first
    text = first["DESIGN.md"].decode()
    for placeholder in ("<placeholder", "{placeholder}", "TODO", "TBD", "待补充"):
        assert placeholder not in text


def test_new_refuses_to_overwrite_without_force(tmp_path):
    out = _new(tmp_path, "causal_gqa_tail")
    design = out / "DESIGN.md"
    design.write_text("hand edits\n")
    res = run_cli("new", "--spec", str(EXAMPLES / "causal_gqa_tail.yaml"), "--out", str(out))
    assert res.returncode == 2
    assert "refusing to overwrite" in res.stderr and res.stderr.rstrip().endswith("(use --force)")
    assert design.read_text() == "hand edits\n"


def test_zh_output_passes_the_cannbot_structural_contract(tmp_path):
    out = _new(tmp_path, "causal_gqa_tail", "--lang", "zh")
    text = (out / "DESIGN.md").read_text(encoding="utf-8")
    assert text.startswith("---\n")
    front_text, _ = text[4:].split("\n---\n", 1)
    front = yaml.safe_load(front_text)
    assert front["schema_version"] == 1
    assert isinstance(front["op_name"], str) and front["op_name"]
    assert isinstance(front["dynamic_axes"], list) and front["dynamic_axes"]
    tokens = MarkdownIt().parse(text)
    headings = [tokens[i + 1].content.strip().lower() for i, t in enumerate(tokens) if t.type == "heading_open"]
    for heading in ZH_HEADINGS:
        assert heading.lower() in headings
    iface = yaml.safe_load((out / "eval" / "module_interfaces.yaml").read_text())
    assert set(iface) >= {"schema_version", "op", "primary_inputs", "modules", "final_outputs",
                          "composition_verification"}
    primary = {t["name"] for t in iface["primary_inputs"]}
    outputs = {}
    for index, module in enumerate(iface["modules"], start=1):
        assert module["id"] == index and module["inputs"] and module["outputs"]
        for inp in module["inputs"]:
            if inp["source"] == "primary":
                assert inp["name"] in primary
            else:
                j = int(inp["source"].removeprefix("module_"))
                assert j < index and inp["name"] in outputs[j]
        outputs[index] = {o["name"] for o in module["outputs"]}
        for o in module["outputs"]:
            assert o["dtype"] in {"float32", "float16", "bfloat16", "int32", "int64", "bool", "int", "int8"}
            for dim in o["shape"]:
                assert all(ch.isalnum() or ch in "_ +-*/" for ch in str(dim))
    for final in iface["final_outputs"]:
        assert final["name"] in outputs[int(final["source"].removeprefix("module_"))]
    assert "Decision: module_count = 1" in text and len(iface["modules"]) == 1


def _scaffold(out, spec):
    return subprocess.run([sys.executable, str(out / f"{spec}_scaffold.py")], capture_output=True, text=True,
                          timeout=300)


@pytest.mark.slow
def test_causal_scaffold_passes_and_covers_tails(tmp_path):
    out = _new(tmp_path, "causal_gqa_tail")
    res = _scaffold(out, "causal_gqa_tail")
    assert res.returncode == 0, res.stdout + res.stderr
    assert res.stdout.count("PASS") == 4  # the fourth config has seq_q > seq_kv under the causal mask
    assert "self-check: 4 of 4 configs within tolerance" in res.stdout


@pytest.mark.slow
def test_dense_8192_scaffold_passes(tmp_path):
    out = _new(tmp_path, "dense_fa_8192")
    res = _scaffold(out, "dense_fa_8192")
    assert res.returncode == 0, res.stdout + res.stderr
    assert "perf_s8192:" in res.stdout and "FAIL" not in res.stdout


@pytest.mark.parametrize("spec,old,new", [
    ("causal_gqa_tail", "oi = alpha * oi + beta * oij", "oi = oi + beta * oij"),  # dropped rescale
    ("causal_gqa_tail", "kv_h = h_idx // group", "kv_h = h_idx % x[\"num_kv_heads\"]"),  # wrong GQA mapping
    ("causal_gqa_tail", "ok = visible_mask(rows, kv_off + np.arange(KV_TILE), seq_q, seq_kv, mask_rows)",
     # kernel ignores the causal mask
     "ok = (rows[:, None] < seq_q) & ((kv_off + np.arange(KV_TILE))[None, :] < seq_kv)"),
    ("dense_fa_8192", "oi = alpha * oi + beta * oij", "oi = oi + beta * oij"),
])
@pytest.mark.slow
def test_scaffold_self_check_fails_on_a_broken_kernel(tmp_path, spec, old, new):
    out = _new(tmp_path, spec)
    path = out / f"{spec}_scaffold.py"
    code = path.read_text()
    assert code.count(old) >= 1
    code = code.replace(old, new)
    path.write_text(code)
    res = _scaffold(out, spec)
    assert res.returncode == 1, res.stdout
    assert "FAIL" in res.stdout
