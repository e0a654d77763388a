"""Golden for dense (contiguous KV) flash-attention forward, BNSD layout.

Written the way SK-01 runs it: the KV axis is walked in KV_TILE steps and the
online-softmax state (running max, running sum, weighted sum) is carried from
one step to the next. opdesign only parses this file; it is never imported.
"""

import numpy as np

KV_TILE = 128


def dense_attention_fwd_golden(q, k, v, scale=None, causal=False):
    """q: [B, N, Sq, D]; k, v: [B, N, Skv, D] -> out: [B, N, Sq, D] in q's dtype."""
    batch, heads, seq_q, head_dim = q.shape
    seq_kv = k.shape[2]
    if scale is None:
        scale = 1.0 / np.sqrt(head_dim)
    out = np.zeros(q.shape, dtype=np.float32)
    for b in range(batch):
        for h in range(heads):
            q_bh = q[b, h].astype(np.float32)
            m = np.full((seq_q,), -np.inf, dtype=np.float32)
            l = np.zeros((seq_q,), dtype=np.float32)
            acc = np.zeros((seq_q, head_dim), dtype=np.float32)
            for start in range(0, seq_kv, KV_TILE):
                k_tile = k[b, h, start:start + KV_TILE].astype(np.float32)
                v_tile = v[b, h, start:start + KV_TILE].astype(np.float32)
                s = (q_bh @ k_tile.T) * scale
                if causal:
                    cols = start + np.arange(k_tile.shape[0])
                    s = np.where(cols[None, :] > np.arange(seq_q)[:, None], -np.inf, s)
                m_new = np.maximum(m, s.max(axis=-1))
                alpha = np.exp(m - m_new)
                p = np.exp(s - m_new[:, None])
                l = l * alpha + p.sum(axis=-1)
                acc = acc * alpha[:, None] + p @ v_tile
                m = m_new
            out[b, h] = acc / l[:, None]
    return out.astype(q.dtype)
