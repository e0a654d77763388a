"""One plan, four artifacts that agree (issue 30): the paged page-table contract (item 1) and the
typical configs the written kernel can run (item 6)."""

from __future__ import annotations

import ast
import math

import numpy as np
import pytest
from conftest import EXAMPLES, run_cli, spec_variant

from opdesign.errors import SpecError
from opdesign.plan.runnable import check_runnable
from opdesign.render.design import render_design, render_kernel, render_scaffold
from opdesign.skeletons.registry import estimate, static_axes
from opdesign.spec import load_spec
from opdesign.workflows.pin import pinned_plan


def _runnable(plan):
    check_runnable(plan, static_axes(plan))


def _cfg(name, seed=0, **shape):
    return {"name": name, "type": "functional", "priority": "P0", "shape": shape, "seed": seed}


def _paged32():
    """The issue's repro: a paged decode with 32-token pages and a config of seq_kv 130 (KV_TILE 128,
    4 pages per KV tile, a 5-page table)."""
    return spec_variant(load_spec(EXAMPLES / "paged_fp8_decode.yaml"), device="a3", quant="none",
                        shape__block_size=32, shape__seq_kv=300,
                        typical_configs=[_cfg("kv130", 3, batch=2, num_heads=8, num_kv_heads=2, seq_kv=130)])


def _gather_columns(kernel: str) -> list[ast.Subscript]:
    """Every ``block_table[...]`` read of the kernel proper (above the self-check line)."""
    proper = kernel.split("# --- self-check")[0]
    return [n for n in ast.walk(ast.parse(proper)) if isinstance(n, ast.Subscript)
            and isinstance(n.value, ast.Name) and n.value.id == "block_table"]


def _column_is_bounded(kernel: str, node: ast.Subscript) -> bool:
    """The column index is a name assigned ``(...).min(max_blocks - 1)`` with ``max_blocks =
    block_table.shape[1]`` (the table's own width), or such an expression itself."""
    proper = ast.parse(kernel.split("# --- self-check")[0])
    assigned = {t.id: n.value for n in ast.walk(proper) if isinstance(n, ast.Assign)
                for t in n.targets if isinstance(t, ast.Name)}
    col = node.slice.elts[1]
    if isinstance(col, ast.Name):
        col = assigned.get(col.id, col)
    if not (isinstance(col, ast.Call) and isinstance(col.func, ast.Attribute) and col.func.attr == "min"):
        return False
    bound = ast.unparse(col.args[0])
    return (bound == "max_blocks - 1"
            and ast.unparse(assigned.get("max_blocks", ast.Constant(None))) == "block_table.shape[1]")


@pytest.mark.parametrize("candidate", [None, 1])
def test_paged_page_reads_stay_inside_the_table(candidate):
    """Item 1: KV_TILE 128 over 32-token pages reads 4 columns per tile; the second tile of a 130-token
    row reaches columns 4..7 of a table of ceil(130 / 32) = 5 columns. The kernel clamps the column."""
    spec = _paged32()
    plan = (estimate(spec) if candidate is None
            else pinned_plan(spec, EXAMPLES / "paged_fp8_decode.yaml", candidate=candidate))
    assert plan.pages_per_tile >= 4 and plan.page_table is not None
    kernel = render_kernel(plan)
    reads = _gather_columns(kernel)
    assert reads, "no block_table read"
    assert all(_column_is_bounded(kernel, r) for r in reads), [ast.unparse(r) for r in reads]


def test_unbounded_page_read_is_caught_by_the_bound_check():
    """The check above can fail: the kernel as it was (column kj * PAGES_PER_TILE + i) is unbounded."""
    kernel = render_kernel(estimate(_paged32()))
    old = kernel.replace("block_table[b, col]", "block_table[b, kj * PAGES_PER_TILE + i]")
    assert old != kernel
    assert not all(_column_is_bounded(old, r) for r in _gather_columns(old))


def test_kernel_selfcheck_scaffold_and_contract_agree_on_the_table():
    """The kernel's self-check, the numpy scaffold and DESIGN.md use the plan's page_table: width
    ceil(seq_kv / block_size) (5 for seq_kv 130, block 32), padding -1, reads clamped to the last column."""
    torch = pytest.importorskip("torch")
    plan = estimate(_paged32())
    assert (plan.page_table.min_width, plan.page_table.pad_id) == ("ceil(seq_kv / block_size)", -1)
    # the kernel's self-check (host side, torch only): exec it without the kernel proper
    host = render_kernel(plan).split("# --- self-check")[1].split("\n", 1)[1]
    ns = {"__name__": "selfcheck"}
    exec(compile("import math\nimport torch\n" + host.split('\nif __name__ == "__main__":')[0], "k", "exec"), ns)  # noqa: S102
    case = ns["make_case"]("kv130")
    table = next(v for v in case["args"] if isinstance(v, torch.Tensor) and v.dtype == torch.int32 and v.dim() == 2)
    assert tuple(table.shape) == (2, math.ceil(130 / 32))
    assert int(table.min()) == -1  # the short batch's unused entries carry the pad id
    # the scaffold: same width, same padding
    sns = {"__name__": "scaffold"}
    exec(compile(render_scaffold(plan), "s", "exec"), sns)  # noqa: S102
    cfg = dict(plan.typical_configs[0]["shape"], seed=3)
    x = sns["make_inputs"](cfg)
    assert x["block_table"].shape == (2, math.ceil(130 / 32)) and x["block_table"].dtype == np.int32
    design_lines = [line for line in render_design(plan).splitlines()
                    if "max_blocks_per_seq >= ceil(seq_kv / block_size)" in line]
    assert design_lines and "max_blocks_per_seq - 1" in design_lines[0]


def _dense_with(**shape):
    spec = load_spec(EXAMPLES / "dense_fa_8192.yaml")
    return spec_variant(spec, typical_configs=[c.model_dump(mode="json", exclude_none=True)
                                               for c in spec.typical_configs]
                        + [_cfg("func_s2048", 1, batch=1, **shape)])


def test_new_refuses_a_config_the_performance_kernel_cannot_run(tmp_path):
    """Item 6: the performance form compiles SEQ_Q = SEQ_KV = 8192; a typical config at seq 2048 is refused."""
    with pytest.raises(SpecError) as err:
        _runnable(estimate(_dense_with(seq_q=2048, seq_kv=2048)))
    assert err.value.message.startswith("typical_configs[2].shape.seq_q: config 'func_s2048' has seq_q 2048")
    assert "SEQ_Q = 8192" in err.value.message
    assert err.value.details["field"] == "typical_configs[2].shape.seq_q"


def test_new_refuses_a_config_with_other_heads_cli(tmp_path):
    """Item 6 through the CLI: exit 2, spec_invalid, the config and the field named; nothing written."""
    import yaml

    data = yaml.safe_load((EXAMPLES / "sk16_backward_lm.yaml").read_text())
    data["typical_configs"].append({"name": "heads4", "type": "functional", "priority": "P1",
                                    "shape": {"num_heads": 4, "num_kv_heads": 1}})
    spec = tmp_path / "s.yaml"
    spec.write_text(yaml.safe_dump(data))
    res = run_cli("new", "--spec", str(spec), "--out", str(tmp_path / "out"))
    assert res.returncode == 2, res.stderr
    assert "error: spec_invalid:" in res.stderr
    assert "typical_configs[3].shape.num_heads: config 'heads4' has num_heads 4" in res.stderr
    assert "NUM_HEADS = 8" in res.stderr
    assert not (tmp_path / "out").exists()


def test_sk01_group_is_fixed():
    spec = load_spec(EXAMPLES / "causal_gqa_tail.yaml")
    bad = spec_variant(spec, typical_configs=[_cfg("g2", batch=1, num_heads=4, num_kv_heads=2, seq_q=64, seq_kv=64)])
    with pytest.raises(SpecError) as err:
        _runnable(estimate(bad))
    assert ("typical_configs[0].shape.num_heads: config 'g2' has num_heads / num_kv_heads = 4 / 2 (group 2)"
            in err.value.message)
    assert "GROUP = 4" in err.value.message


@pytest.mark.parametrize("path", sorted(EXAMPLES.glob("*.yaml")), ids=lambda p: p.stem)
def test_every_example_is_runnable(path):
    _runnable(estimate(load_spec(path)))  # no SpecError
