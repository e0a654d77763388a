"""The scaffold self-check catches what it should (issue 14 item 4) and runs as asked (item 7).

Each mutation below is a text replacement in a generated scaffold that a correct self-check
must reject: the scaffold, run on small configs (already shrunk, so no --quick), exits 1. The
configs are chosen so the mutation shows: a KV length seq_q + 1 (mod 128) past seq_q puts the
last column a Q tile sees in the first row of a new KV tile (the KV-range upper bound), block
size 64 puts two pages in a 128-row KV tile so a -1 table entry sits inside the last tile, and
nine KV tiles give an accumulator in the input dtype nine roundings.
"""

from __future__ import annotations

import subprocess
import sys

import pytest
from conftest import EXAMPLES, REPO, spec_variant

from opdesign.render.design import render_scaffold
from opdesign.skeletons.registry import estimate
from opdesign.spec import load_spec


def _cfg(name, seed=0, **shape):
    return {"name": name, "type": "functional", "priority": "P0", "shape": shape, "seed": seed}


BASES = {  # name: (example SPEC, field changes: small typical configs that show the mutations)
    "causal": ("causal_gqa_tail", {"typical_configs": [
        _cfg("q200_kv1097", batch=1, num_heads=2, num_kv_heads=1, seq_q=200, seq_kv=1097),  # 1097 - 200 = 7 * 128 + 1
        _cfg("q200_kv329", 3, batch=2, num_heads=4, num_kv_heads=2, seq_q=200, seq_kv=329)]}),
    "paged_fp8": ("paged_fp8_decode", {"shape__block_size": 64, "typical_configs": [
        _cfg("decode_b2_kv1030", 9, batch=2, num_heads=4, num_kv_heads=2, seq_kv=1030)]}),
    "tnd": ("causal_gqa_tail", {"layout": "TND", "typical_configs": [  # packed: batches 200, drawn, tail 1 + 200 % 17
        _cfg("b3_q200_kv329", 1, batch=3, num_heads=4, num_kv_heads=2, seq_q=200, seq_kv=329)]}),
    # packed Q rows, K / V in 64-token pages (2 per KV tile) with per-batch kv_act_seqs
    "tnd_paged": ("causal_gqa_tail", {"layout": "TND", "kv_cache": "paged", "shape__block_size": 64,
                                      "typical_configs": [_cfg("b3_q200_kv329", 1, batch=3, num_heads=4,
                                                               num_kv_heads=2, seq_q=200, seq_kv=329)]}),
    # the PageAttn FP8 row on packed Q rows (a5): V in FP8 E4M3 with a per-batch, per-token inv_scale
    "tnd_paged_fp8": (REPO / "tests/fixtures/sk01/paged_fp8_tnd.yaml", {"shape__block_size": 64, "typical_configs": [
        _cfg("b3_q40_kv329", 1, batch=3, num_heads=4, num_kv_heads=2, seq_q=40, seq_kv=329)]}),
    # attn_mask [T_q, seq_kv]: one row per packed query token, columns into its own batch's KV
    "tnd_mask": (REPO / "tests/fixtures/sk01/tensor_mask_tnd.yaml", {"typical_configs": [
        _cfg("b3_q200_kv329", 1, batch=3, num_heads=4, num_kv_heads=2, seq_q=200, seq_kv=329)]}),
    # SK-02 fallback (run-time top-k): topk_indices [T_q, topk], indices into the token's own batch's KV
    "tnd_topk": (REPO / "tests/fixtures/sk01/sparse_topk_tnd_fallback.yaml", {"typical_configs": [
        _cfg("b3_q4_kv329", 1, batch=3, num_heads=4, num_kv_heads=1, seq_q=4, seq_kv=329)]}),
    "sk16": ("sk16_backward_lm", {"typical_configs": [
        _cfg("q200_kv300", batch=1, num_heads=2, num_kv_heads=1, seq_q=200, seq_kv=300)]}),
    "sk16_causal": ("sk16_backward_lm", {"mask": "causal", "typical_configs": [
        _cfg("q200_kv300", batch=1, num_heads=2, num_kv_heads=1, seq_q=200, seq_kv=300)]}),
    # packed varlen (TND) SPECs of tests/fixtures: batch 0 is the short batch, so every later batch's rows
    # start at a non-zero cumulative offset cum[b-1]
    "sk02_tnd": (REPO / "tests/fixtures/sk02/sparse_topk_tnd.yaml", {}),
    "sk16_tnd": (REPO / "tests/fixtures/sk16/backward_tnd.yaml", {}),
}

MUTATIONS = {  # name: (base, original text, mutated text); every occurrence is replaced
    "causal_mask_le_to_lt": ("causal", "ok &= kv_cols[None, :] <= diag", "ok &= kv_cols[None, :] < diag"),
    "accumulator_in_input_dtype": ("causal", "oi = alpha * oi + beta * oij",
                                   "oi = round_to_input(alpha * oi + beta * oij)"),
    "kv_range_upper_bound_off_by_one": ("causal", "hi = min(seq_kv, q_off + q_valid + seq_kv - seq_q)",
                                        "hi = min(seq_kv, q_off + q_valid + seq_kv - seq_q - 1)"),
    # issue 30 Deliver 3: a fully masked KV tile run (every tile instead of the visible ones); the output
    # stays right (its P is 0), so only the tile count against the golden's mask can catch it
    "masked_tile_run": ("causal", "first, n_kv = kv_block_range(q_off, q_valid, seq_q, seq_kv)",
                        "first, n_kv = 0, -(-seq_kv // KV_TILE)"),
    "kv_range_ceil_to_floor": ("causal", "-(-hi // KV_TILE) - lo // KV_TILE", "hi // KV_TILE - lo // KV_TILE"),
    "block_table_clamp_removed": ("paged_fp8", "block_id = max(int(table_row[logical]), 0)",
                                  "block_id = int(table_row[logical])"),
    # issue 30 item 1: a KV tile of two 64-token pages reaches column 17 of the 17-column table of
    # seq_kv 1030 (ceil(1030 / 64)); the kernel clamps the column to the table's last one
    "page_table_overrun": ("paged_fp8", "logical = min(kv_off // BLOCK_SIZE + page, table_row.shape[0] - 1)",
                           "logical = kv_off // BLOCK_SIZE + page"),
    # unused entries carry a block id the gather cannot clamp (the contract's pad id is -1)
    "page_table_wrong_padding_value": ("paged_fp8", "PAD_ID = -1", "PAD_ID = 1 << 20"),
    "fp8_p_not_rounded": ("paged_fp8", "pij_c = to_e4m3(pij_v * p_scale)", "pij_c = pij_v * p_scale"),
    "fp8_output_scaled_0_8": ("paged_fp8", "round_to_input(o_tile[:q_valid])",
                              "round_to_input(0.8 * o_tile[:q_valid])"),
    "fp8_v_scale_dropped": ("paged_fp8", "pij_v = pij * vs[None, :]", "pij_v = pij"),
    "tnd_batch_offset_one_row_early": ("tnd", "start = int(cum[b - 1]) if b > 0 else 0",
                                       "start = int(cum[b - 1]) - 1 if b > 0 else 0"),
    "tnd_paged_q_offset_one_row_early": ("tnd_paged", "start = int(cum[b - 1]) if b > 0 else 0",
                                         "start = int(cum[b - 1]) - 1 if b > 0 else 0"),
    # paged TND: batch b's K / V pages are block_table row b; the previous batch's row reads its tokens
    "tnd_paged_block_table_row_of_the_previous_batch": ("tnd_paged", 'x["block_table"][b_idx]',
                                                        'x["block_table"][max(b_idx - 1, 0)]'),
    "tnd_paged_fp8_q_offset_one_row_early": ("tnd_paged_fp8", "start = int(cum[b - 1]) if b > 0 else 0",
                                             "start = int(cum[b - 1]) - 1 if b > 0 else 0"),
    "tnd_paged_fp8_p_not_rounded": ("tnd_paged_fp8", "pij_c = to_e4m3(pij_v * p_scale)", "pij_c = pij_v * p_scale"),
    # TND mask tensor: the mask rows of batch b start at its packed offset cum[b-1], not at 0
    "tnd_mask_rows_without_the_batch_offset": ("tnd_mask", 'x["attn_mask"][q_start + np.minimum(rows, seq_q - 1)]',
                                               'x["attn_mask"][np.minimum(rows, seq_q - 1)]'),
    "tnd_mask_q_offset_one_row_early": ("tnd_mask", "start = int(cum[b - 1]) if b > 0 else 0",
                                        "start = int(cum[b - 1]) - 1 if b > 0 else 0"),
    # TND top-k: the picks of batch b's tokens are rows cum[b-1] + r, not rows r
    "tnd_topk_rows_without_the_batch_offset": ("tnd_topk", 'x["attn_mask"][q_start + np.minimum(rows, seq_q - 1)]',
                                               'x["attn_mask"][np.minimum(rows, seq_q - 1)]'),
    "sk16_dq_accumulated_in_input_dtype": ("sk16", "dq_acc += dqi", "dq_acc = round_to_input(dq_acc + dqi)"),
    "sk16_causal_mask_le_to_lt": ("sk16_causal", "ok &= kv_cols[None, :] <= q_rows[:, None] + (seq_kv - seq_q)",
                                  "ok &= kv_cols[None, :] < q_rows[:, None] + (seq_kv - seq_q)"),
    # TND: a per-batch offset that is not cum[b-1] reads (and writes) another batch's rows
    # a 1 % output error: model_err 1.0e-2 against the bound 9.8e-4 (the elementwise check may catch it too)
    "sk02_tnd_output_scaled_0_99": ("sk02_tnd", "round_to_input(oij[:q_valid])",
                                    "round_to_input(0.99 * oij[:q_valid])"),
    "sk02_tnd_kv_offset_zero": ("sk02_tnd", "kv_start = int(actual_seq_kv[b_idx - 1]) if b_idx > 0 else 0",
                                "kv_start = 0"),
    "sk02_tnd_q_offset_one_row_early": ("sk02_tnd", "q_start = int(actual_seq_q[b_idx - 1]) if b_idx > 0 else 0",
                                        "q_start = int(actual_seq_q[b_idx - 1]) - 1 if b_idx > 0 else 0"),
    "sk02_tnd_kv_len_is_the_cumulative_end": ("sk02_tnd", "kv_len = int(actual_seq_kv[b_idx]) - kv_start",
                                              "kv_len = int(actual_seq_kv[b_idx])"),
    "sk16_tnd_kv_offset_zero": ("sk16_tnd", "kv_start = int(actual_seq_kv[b_idx - 1]) if b_idx > 0 else 0",
                                "kv_start = 0"),
    "sk16_tnd_q_offset_one_row_early": ("sk16_tnd", "q_start = int(actual_seq_q[b_idx - 1]) if b_idx > 0 else 0",
                                        "q_start = int(actual_seq_q[b_idx - 1]) - 1 if b_idx > 0 else 0"),
}


def _spec(base: str):
    example, changes = BASES[base]
    path = EXAMPLES / f"{example}.yaml" if isinstance(example, str) else example
    return spec_variant(load_spec(path), **changes)


def _script(base: str) -> str:
    return render_scaffold(estimate(_spec(base)))


def _run(script: str, tmp_path, *args: str) -> subprocess.CompletedProcess:
    path = tmp_path / "op_scaffold.py"
    path.write_text(script, encoding="utf-8")
    return subprocess.run([sys.executable, str(path), *args], capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("base", sorted(BASES))
def test_unmutated_scaffold_passes(base, tmp_path):
    res = _run(_script(base), tmp_path)
    assert res.returncode == 0, res.stdout + res.stderr
    n = len(_spec(base).typical_configs)
    assert res.stdout.splitlines()[-1] == f"self-check: {n} of {n} configs within tolerance"
    # SK-16 checks three gradients against its rounding model, SK-01 and SK-02 one output (issue 30 item 8:
    # the SK-02 scaffold printed no model_err)
    assert res.stdout.count(" model_err=") == n * (3 if base.startswith("sk16") else 1)


@pytest.mark.parametrize("name", sorted(MUTATIONS))
def test_mutation_fails_the_self_check(name, tmp_path):
    base, old, new = MUTATIONS[name]
    script = _script(base)
    assert old in script, old
    res = _run(script.replace(old, new), tmp_path)
    assert res.returncode == 1, res.stdout + res.stderr
    assert any(line.endswith(" FAIL") for line in res.stdout.splitlines()), res.stdout


def test_config_quick_and_progress(tmp_path):
    example, changes = BASES["causal"]
    big = dict(changes, typical_configs=changes["typical_configs"] + [
        _cfg("perf_s4096", 7, batch=1, num_heads=4, num_kv_heads=1, seq_q=4096, seq_kv=4096)])
    script = render_scaffold(estimate(spec_variant(load_spec(EXAMPLES / f"{example}.yaml"), **big)))
    res = _run(script, tmp_path, "--config", "perf_s4096", "--quick")
    assert res.returncode == 0, res.stdout + res.stderr
    lines = res.stdout.splitlines()
    assert len(lines) == 2 and lines[-1] == "self-check: 1 of 1 configs within tolerance"
    assert lines[0].startswith("perf_s4096: ") and lines[0].endswith(
        " [quick: seq_q 4096 -> 384, seq_kv 4096 -> 384] PASS")
    assert res.stderr.splitlines()[:3] == ["[1/1] perf_s4096 (quick: seq_q 4096 -> 384, seq_kv 4096 -> 384)",
                                           "perf_s4096: kernel", "perf_s4096: golden"]
    bad = _run(script, tmp_path, "--config", "nope")
    assert bad.returncode == 2 and bad.stdout == ""
    assert bad.stderr == ("error: invalid_input: --config: unknown config nope; the scaffold has "
                          "q200_kv1097, q200_kv329, perf_s4096\n")


def test_scaffold_flags_match_the_kernel_self_check():
    """Same names and meaning as `<op>_kernel.py` / `opdesign verify`: --config NAME (repeatable), --quick."""
    from opdesign.pypto_run import selfcheck

    script = _script("causal")
    assert 'parser.add_argument("--config", action="append"' in script
    assert 'parser.add_argument("--quick", action="store_true"' in script
    text = open(selfcheck.__file__, encoding="utf-8").read()
    assert 'parser.add_argument("--config", action="append"' in text
    assert 'parser.add_argument("--quick", action="store_true"' in text
