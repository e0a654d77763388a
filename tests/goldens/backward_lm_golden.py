"""Golden for flash-attention backward that reads the forward statistics.

Inputs follow the forward pass: q, k, v [B, N, S, D], its output o, the upstream
gradient d_o and the softmax statistics m (row max) and l (row sum) saved by
the forward kernel. P is rebuilt from m and l; nothing is recomputed online.
opdesign only parses this file; it is never imported.
"""

import numpy as np

Q_TILE = 128
KV_TILE = 128


def attention_bwd_golden(q, k, v, o, d_o, m, l, scale):
    """Returns (dq, dk, dv), each shaped like its input, in the input dtype."""
    batch, heads, seq_q, _ = q.shape
    seq_kv = k.shape[2]
    dq = np.zeros(q.shape, dtype=np.float32)
    dk = np.zeros(k.shape, dtype=np.float32)
    dv = np.zeros(v.shape, dtype=np.float32)
    for b in range(batch):
        for h in range(heads):
            # D = rowsum(dO * O): one value per query row, shared by every KV tile.
            delta = (d_o[b, h].astype(np.float32) * o[b, h].astype(np.float32)).sum(axis=-1)
            for qs in range(0, seq_q, Q_TILE):
                q_t = q[b, h, qs:qs + Q_TILE].astype(np.float32)
                do_t = d_o[b, h, qs:qs + Q_TILE].astype(np.float32)
                m_t = m[b, h, qs:qs + Q_TILE, None]
                l_t = l[b, h, qs:qs + Q_TILE, None]
                for ks in range(0, seq_kv, KV_TILE):
                    k_t = k[b, h, ks:ks + KV_TILE].astype(np.float32)
                    v_t = v[b, h, ks:ks + KV_TILE].astype(np.float32)
                    s = (q_t @ k_t.T) * scale
                    p = np.exp(s - m_t) / l_t
                    dp = do_t @ v_t.T
                    ds = p * (dp - delta[qs:qs + Q_TILE, None])
                    dv[b, h, ks:ks + KV_TILE] += p.T @ do_t
                    dq[b, h, qs:qs + Q_TILE] += (ds @ k_t) * scale
                    dk[b, h, ks:ks + KV_TILE] += (ds.T @ q_t) * scale
    return dq.astype(q.dtype), dk.astype(k.dtype), dv.astype(v.dtype)
