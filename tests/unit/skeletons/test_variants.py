"""SK-01 variants of issue 4: paged KV (AT-17), FP8 P.V (AT-08/06), sliding window, mask tensor, balance."""

from __future__ import annotations

import subprocess
import sys
from math import ceil

import numpy as np
import pytest
import yaml
from conftest import EXAMPLES, REPO, run_cli

from opdesign.plan.blocks import balance, greedy_balance, kv_block_ranges, lpt_balance, typical_lengths
from opdesign.render.phrases import say
from opdesign.skeletons.registry import estimate
from opdesign.spec import load_spec


def _new(tmp_path, spec_path, name):
    out = tmp_path / name
    res = run_cli("new", "--spec", str(spec_path), "--out", str(out))
    assert res.returncode == 0, res.stderr
    return out / f"{name}_scaffold.py"


def _run(path):
    return subprocess.run([sys.executable, str(path)], capture_output=True, text=True, timeout=600)


def _spec_file(tmp_path, base, name, **changes):
    data = yaml.safe_load((EXAMPLES / f"{base}.yaml").read_text())
    data["op_name"] = name
    for key, value in changes.items():
        if key == "shape":
            data["shape"].update(value)
        else:
            data[key] = value
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


@pytest.mark.parametrize("name", ["paged_fp8_decode", "causal_gqa_fai", "sliding_window_512"])
@pytest.mark.slow
def test_variant_examples_pass_their_self_check(tmp_path, name):
    res = _run(_new(tmp_path, EXAMPLES / f"{name}.yaml", name))
    assert res.returncode == 0, res.stdout + res.stderr
    assert "FAIL" not in res.stdout and "self-check:" in res.stdout


def test_paged_fp8_plan():
    plan = estimate(load_spec(EXAMPLES / "paged_fp8_decode.yaml"))
    assert plan.variant == "PageAttn FP8"
    assert [a.id for a in plan.atoms][-3:] == ["AT-17", "AT-08", "AT-06"]
    assert plan.unroll.candidates == [8, 4, 2, 1]
    # smallest typical KV length 1000 -> 8 tiles of 128: the factor 8 runs one full group
    assert plan.unroll_factor == 8 and plan.kv_loop == "loop_unroll" and plan.unroll.unroll_list == [8]
    assert plan.config["runtime_options"]["ready_on_host_tensors"] == ["block_table", "kv_act_seqs"]
    assert plan.config["pass_options"]["vec_nbuffer_setting"] == {-1: 6}
    assert plan.kv_tile % plan.block_size == 0
    counts = {d.name: d.value for d in plan.counts}
    assert counts["seq_kv_paged"] == 4096 and counts["pages_per_kv_tile"] == 1
    assert plan.cube_tiles["C2"].operand_dtype == "fp8"
    assert (plan.rtol, plan.atol) == (0.125, 0.0625)  # 2u and u of E4M3, u = 2**-4
    names = [t.name for t in plan.primary_inputs]
    assert names == ["q", "k_cache", "v_cache", "block_table", "kv_act_seqs", "v_inv_scale"]
    # V is FP8 E4M3 (int8 only stores its bytes in the interface file); one inv_scale per token and KV head
    v_cache, v_scale = plan.primary_inputs[2], plan.primary_inputs[-1]
    assert (v_cache.dtype, v_cache.storage_of) == ("int8", "float8_e4m3")
    assert v_scale.shape == ["num_blocks", "num_kv_heads", "block_size"]


def test_mask_tensor_takes_the_fa_score_candidates(tmp_path):
    spec = load_spec(_spec_file(tmp_path, "causal_gqa_tail", "score", mask="tensor"))
    plan = estimate(spec)
    assert plan.variant == "FA Score" and plan.unroll.candidates == [4, 2, 1]
    assert plan.unroll_factor == 4  # smallest typical config has 6 KV tiles
    assert plan.primary_inputs[-1].name == "attn_mask"


@pytest.mark.parametrize("spec,old,new", [
    # block_size 64 puts two pages in a 128-row KV tile, so a tile can hold an unused (-1) entry
    # no clamp
    ("paged_fp8_decode", "block_id = max(int(table_row[logical]), 0)", "block_id = int(table_row[logical])"),
    ("paged_fp8_decode", "oij = (pij_c @ vj) / p_scale\n", "oij = (pij_c @ vj) * p_scale\n"),  # FP8 scale inverted
    ("sliding_window_512", "ok &= kv_cols[None, :] > diag - WINDOW", "ok &= kv_cols[None, :] > diag - 2 * WINDOW"),
])
@pytest.mark.slow
def test_broken_variant_fails_its_self_check(tmp_path, spec, old, new):
    if spec == "paged_fp8_decode":
        path = _new(tmp_path, _spec_file(tmp_path, spec, "paged64", shape={"block_size": 64}), "paged64")
        assert "PAGES_PER_TILE = 2" in (tmp_path / "paged64" / "DESIGN.md").read_text()
        good = _run(path)
        assert good.returncode == 0, good.stdout
    else:
        path = _new(tmp_path, EXAMPLES / f"{spec}.yaml", spec)
    code = path.read_text()
    assert old in code
    assert "def golden_visible(" in code  # the golden's own mask: breaking the kernel's leaves the golden true
    path.write_text(code.replace(old, new, 1))
    res = _run(path)
    assert res.returncode == 1, res.stdout
    assert "FAIL" in res.stdout


@pytest.mark.parametrize("mask,extra", [("causal", {}), ("sliding_window", {"window": 64}), ("tensor", {})])
@pytest.mark.slow
def test_fully_masked_rows_are_zero_not_nan(tmp_path, mask, extra):
    # seq_q > seq_kv: with bottom-right alignment the first rows see no column at all
    path = _spec_file(tmp_path, "causal_gqa_tail", f"fm_{mask}", mask=mask, shape=dict(extra),
                      typical_configs=[{"name": "q300_kv100", "type": "functional", "priority": "P0",
                                        "shape": {"batch": 1, "seq_q": 300, "seq_kv": 100}}])
    scaffold = _new(tmp_path, path, f"fm_{mask}")
    res = _run(scaffold)
    assert res.returncode == 0, res.stdout + res.stderr
    sys.path.insert(0, str(scaffold.parent))
    try:
        module = __import__(scaffold.stem)
        x = module.make_inputs(module.CONFIGS[0])
        got = module.kernel(module.device_view(x))
    finally:
        sys.path.pop(0)
    assert np.isfinite(got).all()
    if mask != "tensor":
        assert np.all(got[:, :, :200] == 0)  # rows 0..199 see no key (c <= r - 200)
        assert np.any(got[:, :, 200:] != 0)
    else:
        assert np.all(got[0, :, 0] == 0)  # the forced fully masked row


def _brute_force_blocks(mask, sq, skv, qt, kt, window=None):
    rows = np.arange(sq)[:, None]
    cols = np.arange(skv)[None, :]
    ok = np.ones((sq, skv), bool)
    if mask in ("causal", "sliding_window"):
        ok &= cols <= rows + skv - sq
    if mask == "sliding_window":
        ok &= cols > rows + skv - sq - window
    return [len({c // kt for c in np.nonzero(ok[i * qt:(i + 1) * qt].any(axis=0))[0]}) for i in range(ceil(sq / qt))]


@pytest.mark.parametrize("mask,sq,skv,qt,kt,window", [
    ("causal", 1000, 1000, 128, 128, None), ("causal", 300, 700, 64, 128, None),
    ("sliding_window", 4096, 4096, 128, 128, 512), ("sliding_window", 300, 1000, 128, 64, 100),
    ("causal", 300, 100, 128, 128, None),
])
def test_kv_block_ranges_match_brute_force(mask, sq, skv, qt, kt, window):
    counts = [n for _, n in kv_block_ranges(mask, sq, skv, qt, kt, window)]
    assert counts == _brute_force_blocks(mask, sq, skv, qt, kt, window)


def test_balance_weights_equal_a_brute_force_count():
    spec = load_spec(EXAMPLES / "causal_gqa_fai.yaml")
    plan = estimate(spec)
    s = spec.shape
    per_block = _brute_force_blocks("causal", s.seq_q, s.seq_kv, plan.q_tile, plan.kv_tile)
    weights = per_block * (s.batch * s.num_heads)
    assert plan.balance is not None and plan.balance.cores == 32
    assert plan.balance.total_valid_blocks == sum(weights)
    start = 0
    for core in plan.balance.per_core:  # contiguous ranges of (batch, head, q block)
        assert core.weight == sum(weights[start:start + core.q_blocks])
        start += core.q_blocks
    assert start == len(weights)
    mean = sum(weights) / 32
    assert plan.balance.imbalance == pytest.approx(max(c.weight for c in plan.balance.per_core) / mean, abs=1e-4)


def _naive_greedy(weights, cores):
    total = sum(weights)
    loads, counts = [0] * cores, [0] * cores
    prefix = 0
    for w in weights:
        core = min(cores - 1, (2 * prefix + w) * cores // (2 * total)) if total else 0
        loads[core] += w
        counts[core] += 1
        prefix += w
    return (loads, counts) if total else ([0] * cores, [0] * cores)


@pytest.mark.parametrize("seed", range(12))
def test_closed_form_greedy_equals_the_block_by_block_split(seed):
    rng = np.random.default_rng(seed)
    pattern = [int(x) for x in rng.integers(0, 9, size=int(rng.integers(1, 12)))]
    repeats, cores = int(rng.integers(1, 40)), int(rng.integers(1, 33))
    assert greedy_balance(pattern, cores, repeats) == _naive_greedy(pattern * repeats, cores)


def test_balance_says_when_fewer_cores_do_as_well():
    # one heavy q block (weight 10) dominates: 2 cores reach the same busiest-core weight as 8
    result = balance([10, 1, 1, 1], 8)
    assert max(c.weight for c in result.per_core) == 10
    assert result.fewer_cores == 2 and "fewer cores would do as well" in say(result.note)
    assert greedy_balance([0, 0], 4) == ([0, 0, 0, 0], [0, 0, 0, 0])


VARLEN_DECODE = REPO / "tests" / "fixtures" / "sk01" / "varlen_paged_decode.yaml"


def test_varlen_paged_decode_balances_tasks_by_kv_length(tmp_path):
    spec = load_spec(VARLEN_DECODE)
    plan = estimate(spec)
    s, bal = spec.shape, plan.balance
    # 24 AIC: a3's SKU Ascend910C4 (hicann/pypto 910PR_9363.ini cube_core_cnt, as A2A3.ini), was 20 (issue 31)
    assert plan.kv_tile == 128 and bal is not None and bal.method == "lpt" and bal.cores == 24
    lengths = [8192, 7169, 6145, 5121, 4097, 3073, 2049, 1025]  # 1 + ceil(8191 x (8 - b) / 8)
    assert typical_lengths(1, s.seq_kv, s.batch) == lengths
    weights = [ceil(n / 128) for n in lengths for _ in range(s.num_heads)]
    assert bal.total_valid_blocks == sum(weights) == 9440
    assert sum(c.q_blocks for c in bal.per_core) == s.batch * s.num_heads
    worst = max(c.weight for c in bal.per_core)
    assert worst == 394 and bal.imbalance == pytest.approx(394 / (9440 / 24), abs=1e-4) and bal.imbalance <= 1.2
    # the length-blind contiguous split in (batch, head) order, which the note compares against, is worse
    contiguous = max(greedy_balance(weights, 24)[0]) / (sum(weights) / 24)
    assert contiguous > 1.08 and f"contiguous split in (batch, head) order: {contiguous:.3f}" in say(bal.note)
    # the design prints the schedule PyPTO's dynamic placement gives (issue 31), not the static split:
    # 256 roots on 24 AIC = 11 waves, 9440 steps at the modelled lengths, the longest chain 64 KV tiles
    sched = plan.schedule
    assert ((sched.waves, sched.tail_roots, sched.steps, sched.longest_chain, sched.step_rounds)
            == (11, 16, 9440, 64, 394))
    design = (_new(tmp_path, VARLEN_DECODE, "varlen_paged_decode").parent / "DESIGN.md").read_text(encoding="utf-8")
    assert "| core_waves | 11 |" in design and "| longest_chain | 64 |" in design
    assert "| cores | q blocks each |" not in design and "core_imbalance" not in design


def test_long_per_batch_length_lists_count_batches_not_q_blocks():
    # 13 batches: the shortened list of per-batch KV lengths says how many batches it stands for
    lengths = typical_lengths(1, 4096, 13)
    note = say(lpt_balance([ceil(n / 128) for n in lengths], 4, lengths).note)
    shown = f"[{', '.join(map(str, lengths[:6]))}, ..., {lengths[-2]}, {lengths[-1]}] (13 batches)"
    assert shown in note and "q blocks)" not in note


def test_lpt_puts_the_longest_task_first_on_the_least_loaded_core():
    # 5 -> c0, 4 -> c1, 3 -> c1 (7), 3 -> c0 (8), 3 -> c1 (10): loads [8, 10], mean 9
    result = lpt_balance([3, 5, 3, 4, 3], 2, [0])
    assert [(c.q_blocks, c.weight) for c in result.per_core] == [(2, 8), (3, 10)]
    assert result.imbalance == pytest.approx(10 / 9, abs=1e-4) and result.fewer_cores is None
    # one task longer than all the rest: a single core reaches the same busiest-core weight
    assert lpt_balance([10, 1, 1, 1], 4, [0]).fewer_cores == 2
    assert typical_lengths(1, 1, 3) == [1, 1, 1] and typical_lengths(500, 100, 2) == [100, 100]


@pytest.mark.slow
def test_sk02_fallback_is_an_sk01_sparse_design_that_runs(tmp_path):
    # topk 16384 cannot stay resident in UB (SK-02 condition 2): SK-01 takes over with a top-k mask
    path = _spec_file(tmp_path, "sparse_topk_2048", "topk_fallback", shape={"topk": 16384, "seq_kv": 4096},
                      typical_configs=[{"name": "f1", "type": "functional", "priority": "P0",
                                        "shape": {"batch": 2, "seq_kv": 600, "topk": 16384}}])
    plan = estimate(load_spec(path))
    assert plan.skeleton.id == "SK-01" and plan.fallback_from == "SK-02" and plan.variant == "Sparse Attn"
    failed = [c.id for c in plan.skeleton_checks if not c.passed]
    assert failed == ["SK-02-COND-2"]
    assert plan.primary_inputs[-1].name == "topk_indices"
    scaffold = _new(tmp_path, path, "topk_fallback")
    assert "SK-02-COND-2 fails" in (scaffold.parent / "DESIGN.md").read_text()
    res = _run(scaffold)
    assert res.returncode == 0, res.stdout + res.stderr


@pytest.mark.slow
def test_long_context_plan_builds_and_validates(tmp_path):
    # 64 x 64 heads, causal 128K: Q_TILE 64 on a3 (the FAI UB items leave no room for 128), 8.4 million roots
    # and 4.3e9 tasks (counts above 2^31 are legitimate); q tile i (1-based) sees ceil(i / 2) KV tiles of 128;
    # the config keeps the SPEC's group of 8 query heads per KV head (the kernel's GROUP, issue 30 item 6)
    path = _spec_file(tmp_path, "causal_gqa_fai", "longctx", device="a3",
                      shape={"batch": 64, "num_heads": 64, "num_kv_heads": 8, "seq_q": 131072, "seq_kv": 131072},
                      dynamic_axes=[{"name": "seq_q", "range": [1, 131072]}, {"name": "seq_kv", "range": [1, 131072]}],
                      typical_configs=[{"name": "c1", "type": "functional", "priority": "P0",
                                        "shape": {"batch": 1, "num_heads": 8, "num_kv_heads": 1, "seq_q": 300,
                                                  "seq_kv": 300}}])
    plan = estimate(load_spec(path))
    assert plan.q_tile == 64 and plan.kv_tile == 128
    assert plan.root_count == 64 * 64 * 2048 and plan.task_count == 64 * 64 * sum(-(-i // 2) for i in range(1, 2049))
    assert plan.balance.total_valid_blocks == plan.task_count
    out = tmp_path / "longctx"
    assert run_cli("new", "--spec", str(path), "--out", str(out)).returncode == 0
    res = run_cli("validate", str(out))
    assert res.returncode == 0 and "0 errors, 0 warnings" in res.stdout
