"""A faithful ALiBi patch of REAL fairseq 0.12.2's TransformerDecoder, applied at run time (no
fairseq source is changed), per REFERENCE §1 (the ALiBi fork, ofirpress/attention_with_linear_biases):
  * positions are computed but never added (§1.4): SinusoidalPositionalEmbedding returns zeros,
    which x += positions then adds exactly as "not added";
  * the self-attention mask of every layer is the fork's future mask (§1.2): causal −inf above
    the diagonal plus m_h · j for key j, tiled over the batch so that row b·H + h uses slope
    m_h — the (B·H, T, T) form F.multi_head_attention_forward takes. Under softmax m·j equals
    the paper's −m·(i−j) (§1.3).
  * slopes m_h (§1.1): the geometric sequence starting at 2^(−8/n) for n a power of two, else
    those of the nearest lower power of two followed by every other slope of 2n.
Used by fairseq_eval.py when STRETCH_FAIRSEQ_ALIBI=1.
"""
import math

import torch


def alibi_slopes(n):
    def power_of_2(k):
        start = 2.0 ** (-8.0 / k)
        return [start ** (i + 1) for i in range(k)]

    if math.log2(n).is_integer():
        return power_of_2(n)
    c = 2 ** math.floor(math.log2(n))
    return power_of_2(c) + alibi_slopes(2 * c)[0::2][: n - c]


def apply():
    from fairseq.models.transformer import transformer_decoder as td
    from fairseq.modules import sinusoidal_positional_embedding as spe

    original = spe.SinusoidalPositionalEmbedding.forward

    def positions_not_added(self, *args, **kwargs):
        return torch.zeros_like(original(self, *args, **kwargs))

    def alibi_future_mask(self, x):  # x: [T, B, C] at this point of extract_features
        T, B = x.size(0), x.size(1)
        H = self.layers[0].self_attn.num_heads
        m = torch.tensor(alibi_slopes(H), dtype=torch.float32)            # [H]
        j = torch.arange(T, dtype=torch.float32)
        bias = m[:, None, None] * j[None, None, :]                          # [H, 1, T]
        causal = torch.triu(torch.full((T, T), float("-inf")), 1)           # [T, T]
        return (bias + causal[None]).repeat(B, 1, 1).to(x)                   # [B·H, T, T]

    spe.SinusoidalPositionalEmbedding.forward = positions_not_added
    td.TransformerDecoderBase.buffered_future_mask = alibi_future_mask
