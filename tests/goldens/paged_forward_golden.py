"""Golden for paged-KV FP8 decode attention (PageAttn FP8) with GQA, BSND query.

K/V live in a block pool [num_blocks, block_size, num_kv_heads, D]; each batch
row reads its pages through block_table and stops at kv_lens[b]. The page loop
carries the online-softmax state in FP32 as in SK-01 with AT-17 loads; P is
quantized to FP8 E4M3 per row before PV (AT-08) and dequantized after (AT-06).
opdesign only parses this file; it is never imported.
"""

import math

import torch

FP8_E4M3_MAX = 448.0


def _quantize_rows_fp8(x):
    """AT-08: symmetric per-row FP8 E4M3; returns (x8, inv_scale) with inv_scale [rows, 1]."""
    row_amax = torch.amax(x.abs(), dim=-1, keepdim=True).clamp_min(1e-12)
    scale = FP8_E4M3_MAX / row_amax
    return (x * scale).to(torch.float8_e4m3fn), 1.0 / scale


def _page_update(m_prev, l_prev, o_prev, scores, v_page):
    """One AT-01 step: merge a page's scores into the running max, sum and weighted sum."""
    m_cur = torch.maximum(m_prev, torch.amax(scores, dim=-1))
    rescale = torch.exp(m_prev - m_cur)
    probs = torch.exp(scores - m_cur.unsqueeze(-1))
    l_cur = l_prev * rescale + probs.sum(dim=-1)
    p8, p_inv_scale = _quantize_rows_fp8(probs)
    pv = torch.matmul(p8.float(), v_page) * p_inv_scale
    o_cur = o_prev * rescale.unsqueeze(-1) + pv
    return m_cur, l_cur, o_cur


def paged_fp8_decode_attention_golden(query, key_cache, value_cache, block_table, kv_lens, scale=None):
    """query: [B, 1, N, D]; caches: [num_blocks, block_size, N_kv, D]; block_table: [B, max_pages]."""
    batch, _, heads, head_dim = query.shape
    block_size, kv_heads = key_cache.shape[1], key_cache.shape[2]
    group = heads // kv_heads
    if scale is None:
        scale = 1.0 / math.sqrt(head_dim)
    out = torch.empty((batch, 1, heads, head_dim), dtype=query.dtype)
    for b in range(batch):
        kv_len = int(kv_lens[b])
        num_pages = (kv_len + block_size - 1) // block_size
        for h in range(heads):
            kv_h = h // group
            q_row = query[b, 0, h].float().unsqueeze(0)
            m = torch.full((1,), float("-inf"))
            l = torch.zeros((1,))
            acc = torch.zeros((1, head_dim))
            for page in range(num_pages):
                block_id = max(int(block_table[b, page]), 0)
                valid = min(block_size, kv_len - page * block_size)
                k_page = key_cache[block_id, :valid, kv_h].float()
                v_page = value_cache[block_id, :valid, kv_h].float()
                scores = (q_row @ k_page.transpose(0, 1)) * scale
                m, l, acc = _page_update(m, l, acc, scores, v_page)
            out[b, 0, h] = (acc / l.unsqueeze(-1)).squeeze(0).to(query.dtype)
    return out
