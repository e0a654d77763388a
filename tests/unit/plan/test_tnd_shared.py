"""Layout TND (packed varlen), the part every skeleton shares: the cumulative length tensors, their
offsets and the packed interface shapes (Q [T_q, N, D], K/V [T_kv, N_kv, D], T <= batch * seq)."""

from __future__ import annotations

import copy

import pytest
import yaml
from conftest import EXAMPLES

from opdesign.plan.fields import batch_lengths, cumulative_ends, cumulative_lengths, packed_rows
from opdesign.plan.interfaces import io_tensors
from opdesign.spec import parse_spec

BASE = yaml.safe_load((EXAMPLES / "causal_gqa_tail.yaml").read_text())


def _spec(**changes):
    data = copy.deepcopy(BASE) | changes
    return parse_spec(data)


def test_tnd_always_reads_both_cumulative_lengths_even_with_uniform_axes():
    spec = _spec(layout="TND")  # the example's seq axes are uniform: true
    assert batch_lengths(spec) == {"seq_q": "actual_seq_q", "seq_kv": "actual_seq_kv"}
    assert cumulative_lengths(spec) == ("actual_seq_q", "actual_seq_kv")
    assert batch_lengths(_spec()) == {} and cumulative_lengths(_spec()) == ()


def test_tnd_with_paged_kv_keeps_kv_act_seqs_as_per_batch_lengths():
    spec = _spec(layout="TND", kv_cache="paged", shape=BASE["shape"] | {"block_size": 128})
    assert batch_lengths(spec) == {"seq_q": "actual_seq_q", "seq_kv": "kv_act_seqs"}
    assert cumulative_lengths(spec) == ("actual_seq_q",)


def test_non_tnd_varlen_lengths_are_not_cumulative():
    axes = [{"name": "seq_q", "range": [1, 4096], "uniform": False},
            {"name": "seq_kv", "range": [1, 4096], "uniform": False}]
    spec = _spec(layout="BSND", dynamic_axes=axes)
    assert batch_lengths(spec) == {"seq_q": "actual_seq_q", "seq_kv": "actual_seq_kv"}
    assert cumulative_lengths(spec) == ()


def test_cumulative_ends_and_packed_rows_round_trip():
    lengths = [1, 4096, 0, 17]
    cum = cumulative_ends(lengths)
    assert cum == [1, 4097, 4097, 4114]
    assert [packed_rows(cum, b) for b in range(4)] == [(0, 1), (1, 4096), (4097, 0), (4097, 17)]
    with pytest.raises(ValueError, match="negative: -1"):
        cumulative_ends([3, -1])


def test_tnd_interface_shapes_are_packed_with_the_batch_upper_bound():
    inputs, outputs = io_tensors(_spec(layout="TND"))
    shapes = {t.name: (t.shape, t.dtype) for t in inputs + outputs}
    assert shapes == {
        "q": (["batch * seq_q", "num_heads", "head_dim"], "bfloat16"),
        "k": (["batch * seq_kv", "num_kv_heads", "head_dim"], "bfloat16"),
        "v": (["batch * seq_kv", "num_kv_heads", "head_dim"], "bfloat16"),
        "actual_seq_q": (["batch"], "int32"),
        "actual_seq_kv": (["batch"], "int32"),
        "attn_out": (["batch * seq_q", "num_heads", "head_dim"], "bfloat16"),
    }
    assert [t.name for t in inputs] == ["q", "k", "v", "actual_seq_q", "actual_seq_kv"]


def test_tnd_fp8_scales_and_topk_indices_follow_the_packed_token_axis():
    fp8 = _spec(layout="TND", device="a5", quant="fp8")
    assert {t.name: t.shape for t in io_tensors(fp8)[0]}["v_inv_scale"] == ["num_kv_heads", "batch * seq_kv"]
    topk = _spec(layout="TND", mask="topk", shape=BASE["shape"] | {"topk": 64})
    assert {t.name: t.shape for t in io_tensors(topk)[0]}["topk_indices"] == ["batch * seq_q", "topk"]


def test_the_schema_says_what_tnd_means():
    from opdesign.spec import Spec

    text = Spec.model_fields["layout"].description
    for fact in ("T_q, num_heads, head_dim", "[cum[b-1], cum[b])", "actual_seq_q / actual_seq_kv", "batch * seq"):
        assert fact in text, fact
