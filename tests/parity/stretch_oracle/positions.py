"""Position methods of the transformer_lm family, written from REFERENCE.md §1.1, §2.7 and the
parity contract (tests/parity/README.md). Shapes use B batch, T time (queries), S keys, H heads,
D head dim, C model dim.

  alibi_slopes(n)                      list of n floats (Python double), §1.1 incl. non-power-of-2
  alibi_bias(slopes, T, dtype)         [H, T, T]  -m_h * (i - j)            (the paper's form)
  alibi_fork_bias(slopes, T, dtype)    [H, 1, T]  +m_h * j                  (the fork's form, §1.2)
  t5_bucket(rel, num_buckets, max_distance)   bucket ids for rel = j - i (causal, HF T5's
                                       _relative_position_bucket(bidirectional=False))
  t5_bias(table [num_buckets, H], T, ...)     [H, T, T]  table[bucket(j - i), h]
  rope_cos_sin(T, D, base, dtype)      ([T, D], [T, D])  GPT-NeoX rotate-half tables
  rope_apply(x [B, H, T, D], cos, sin) [B, H, T, D]
  make_positions(tokens [B, T], padding_idx)  [B, T]  fairseq make_positions (pads get padding_idx)
  sinusoidal_embedding(positions [B, T], C, padding_idx, dtype)  [B, T, C]  fairseq's variant

Nothing here is learned except the T5 table and the learned position table, which live in the
checkpoint and are passed in.
"""

import math

import torch


def _is_pow2(n: int) -> bool:
    return n > 0 and (n & (n - 1)) == 0


def alibi_slopes(n: int) -> list:
    """ALiBi head slopes m_0..m_{n-1}, REFERENCE §1.1.

    Power of two n: start = 2^(-2^(-(log2 n - 3))) = 2^(-8/n), slopes = start * start^i.
    Otherwise p = 2^floor(log2 n): slopes(p) followed by every other element (indices 0, 2, 4,
    ...) of slopes(2p), truncated to n - p extras. Not sorted. Computed in double; the fork
    rounds to float32 when it makes the tensor (use torch.tensor(..., dtype=float32) for that).
    """
    if not isinstance(n, int) or n < 1:
        raise ValueError(f"alibi_slopes: head count must be a positive int, got {n!r}")

    def pow2_slopes(p):
        start = 2.0 ** (-(2.0 ** -(math.log2(p) - 3)))
        return [start * start ** i for i in range(p)]

    if _is_pow2(n):
        return pow2_slopes(n)
    p = 2 ** int(math.floor(math.log2(n)))
    return pow2_slopes(p) + pow2_slopes(2 * p)[0::2][: n - p]


def alibi_bias(slopes, T: int, dtype=torch.float64) -> torch.Tensor:
    """[H, T, T] bias -m_h * (i - j); entries j > i are positive and must be masked by the caller."""
    m = torch.tensor(slopes, dtype=dtype)
    i = torch.arange(T, dtype=dtype)
    dist = i[:, None] - i[None, :]  # [T, T] i - j
    return -m[:, None, None] * dist[None]


def alibi_fork_bias(slopes, T: int, dtype=torch.float64) -> torch.Tensor:
    """[H, 1, T] the fork's bias +m_h * j (constant over the query i), REFERENCE §1.2."""
    m = torch.tensor(slopes, dtype=dtype)
    j = torch.arange(T, dtype=dtype)
    return (m[:, None] * j[None, :])[:, None, :]


def t5_bucket(rel: torch.Tensor, num_buckets: int = 32, max_distance: int = 128) -> torch.Tensor:
    """T5 unidirectional (causal) bucket of rel = j - i (int64 tensor, any shape).

    n = max(-rel, 0) (keys in the future all fall in bucket 0; they are masked anyway).
    Buckets 0..max_exact-1 (max_exact = num_buckets // 2) hold n exactly; above, n is log-spaced:
      max_exact + floor(ln(n / max_exact) / ln(max_distance / max_exact) * (num_buckets - max_exact)),
    clamped to num_buckets - 1. Computed in float64 (HF uses float32 and truncation; for the
    default 32/128 the log term is an exact integer only at n = 16 and n = 128, where both agree).
    """
    n = torch.clamp(-rel.to(torch.int64), min=0)
    max_exact = num_buckets // 2
    nf = n.to(torch.float64).clamp(min=1.0)  # log(0) guarded; small n take the exact branch
    large = max_exact + torch.floor(
        torch.log(nf / max_exact) / math.log(max_distance / max_exact) * (num_buckets - max_exact)
    ).to(torch.int64)
    large = torch.clamp(large, max=num_buckets - 1)
    return torch.where(n < max_exact, n, large)


def t5_bias(table: torch.Tensor, T: int, num_buckets: int, max_distance: int) -> torch.Tensor:
    """table [num_buckets, H] -> [H, T, T] bias table[bucket(j - i), h]."""
    i = torch.arange(T)
    rel = i[None, :] - i[:, None]  # [T, T] j - i
    b = t5_bucket(rel, num_buckets, max_distance)
    return table[b].permute(2, 0, 1)  # [T, T, H] -> [H, T, T]


def rope_cos_sin(T: int, D: int, base: float = 10000.0, dtype=torch.float64):
    """cos, sin tables [T, D] for positions 0..T-1: inv_freq_k = base^(-2k/D), k < D/2, the
    angles pos * inv_freq duplicated as [a || a]."""
    if D % 2:
        raise ValueError(f"rope needs an even head dim, got D = {D}")
    k = torch.arange(D // 2, dtype=torch.float64)
    inv_freq = base ** (-2.0 * k / D)
    ang = torch.arange(T, dtype=torch.float64)[:, None] * inv_freq[None, :]  # [T, D/2]
    ang = torch.cat([ang, ang], dim=-1)  # [T, D]
    return torch.cos(ang).to(dtype), torch.sin(ang).to(dtype)


def rope_apply(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """x [B, H, T, D] -> x*cos + rotate_half(x)*sin, rotate_half([x1 || x2]) = [-x2 || x1]."""
    half = x.shape[-1] // 2
    x1, x2 = x[..., :half], x[..., half:]
    rot = torch.cat([-x2, x1], dim=-1)
    return x * cos + rot * sin


def make_positions(tokens: torch.Tensor, padding_idx: int) -> torch.Tensor:
    """[B, T] -> [B, T]: non-pad tokens get padding_idx + 1, + 2, ... (counting non-pads only);
    pad tokens get padding_idx."""
    mask = tokens.ne(padding_idx).to(torch.int64)
    return torch.cumsum(mask, dim=1) * mask + padding_idx


def sinusoidal_embedding(positions: torch.Tensor, C: int, padding_idx: int,
                         dtype=torch.float64) -> torch.Tensor:
    """fairseq's sinusoidal variant, REFERENCE §2.7: half = C/2, freq_k = exp(-k ln(10000)/(half-1)),
    emb(pos) = [sin(pos freq) || cos(pos freq)] (+ a zero column when C is odd), and the zero
    vector at pos == padding_idx. positions [B, T] -> [B, T, C]."""
    half = C // 2
    if half < 2:
        raise ValueError(f"sinusoidal positions need C >= 4 (half - 1 > 0), got C = {C}")
    k = torch.arange(half, dtype=torch.float64)
    freq = torch.exp(k * -(math.log(10000.0) / (half - 1)))
    ang = positions.to(torch.float64)[..., None] * freq  # [B, T, half]
    emb = torch.cat([torch.sin(ang), torch.cos(ang)], dim=-1)
    if C % 2:
        emb = torch.cat([emb, torch.zeros_like(emb[..., :1])], dim=-1)
    emb = emb * positions.ne(padding_idx)[..., None].to(emb.dtype)
    return emb.to(dtype)
