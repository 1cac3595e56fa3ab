"""ALiBi research variants (issue 15), written from the contract in docs/architecture.md
"ALiBi variants" (seed 002 §4-6), not from the C++ code. Legend: L layers, H heads, T time.

  layer_slopes(cfg)            [L] lists of H floats (None for a layer without ALiBi)
  warmup_factor(cfg, update)   w(u) = F + (1 - F) * min(1, u / N)   (1 when N = 0)
  shaped_distance(shape, d, D) f(d): linear d, log ln(1 + d), clipped min(d, D)
  bias(slopes [H] tensor, T, shape, D, factor)   [H, T, T]  -factor * m_h * f(i - j)

Base slopes: the explicit list (alibi_slopes), else the groups n1:s1,... (each group g's heads
get positions.alibi_slopes(n_g) * s_g, concatenated), else positions.alibi_slopes(H). Layer
factor r_l: the list r0,...,r_{L-1}, or linear:F = 1 + (F - 1) * l / (L - 1), else 1. A no-bias
head (layer:head) has slope 0. Layers >= pos_upper_from_layer use pos_upper when it is set.
"""

import torch

from . import positions as P


def _numbers(text):
    text = (text or "").strip()
    return [float(x) for x in text.split(",")] if text else []


def uses_alibi(cfg, layer):
    if cfg.pos != "alibi":
        return False
    return cfg.pos_upper in ("same", "") or layer < cfg.pos_upper_from_layer


def base_slopes(cfg):
    if (cfg.alibi_slopes or "").strip():
        m = _numbers(cfg.alibi_slopes)
        assert len(m) == cfg.heads, f"alibi_slopes has {len(m)} values for {cfg.heads} heads"
        return m
    if (cfg.alibi_slope_groups or "").strip():
        m = []
        for g in cfg.alibi_slope_groups.split(","):
            parts = g.split(":")
            n = int(parts[0])
            s = float(parts[1]) if len(parts) > 1 else 1.0
            m += [x * s for x in P.alibi_slopes(n)]
        assert len(m) == cfg.heads
        return m
    return P.alibi_slopes(cfg.heads)


def layer_factors(cfg):
    L = cfg.layers
    t = (cfg.alibi_layer_scale or "").strip()
    if not t:
        return [1.0] * L
    if t.startswith("linear:"):
        top = float(t[len("linear:"):])
        return [1.0 if L == 1 else 1.0 + (top - 1.0) * l / (L - 1) for l in range(L)]
    r = _numbers(t)
    assert len(r) == L
    return r


def layer_slopes(cfg):
    out = [None] * cfg.layers
    if cfg.pos != "alibi":
        return out
    m, r = base_slopes(cfg), layer_factors(cfg)
    for l in range(cfg.layers):
        if uses_alibi(cfg, l):
            out[l] = [mh * r[l] for mh in m]
    for item in (cfg.alibi_no_bias_heads or "").strip().split(","):
        if item.strip():
            l, h = (int(x) for x in item.split(":"))
            out[l][h] = 0.0
    return out


def warmup_factor(cfg, update):
    N = cfg.alibi_slope_warmup_updates
    if N <= 0:
        return 1.0
    F = cfg.alibi_slope_warmup_init
    return F + (1.0 - F) * min(1.0, update / N)


def shaped_distance(shape, d, clip):
    if shape == "linear":
        return d
    if shape == "log":
        return torch.log1p(d)
    if shape == "clipped":
        return torch.clamp(d, max=float(clip))
    raise ValueError(f"unknown alibi_shape {shape!r}")


def bias(slopes, T, shape="linear", clip=0, factor=1.0):
    """slopes [H] tensor (may require grad) -> [H, T, T] -factor * m_h * f(i - j); entries j > i
    (the future) are set to 0 here and masked by the caller."""
    i = torch.arange(T, dtype=slopes.dtype)
    d = (i[:, None] - i[None, :]).clamp(min=0)  # [T, T] i - j, 0 in the future
    f = shaped_distance(shape, d, clip)
    return -factor * slopes[:, None, None] * f[None]
