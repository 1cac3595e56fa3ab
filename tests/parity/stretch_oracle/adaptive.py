"""fairseq's AdaptiveInput, AdaptiveSoftmax and adaptive_loss as pure functions of named parameters.

Written from REFERENCE.md §2.4-2.6 (fairseq 0.12.2 modules/adaptive_input.py, adaptive_softmax.py,
criterions/adaptive_loss.py), independently of stretch's C++ code. Legend: N rows (B*T), C model
dim, V vocab; bands [0, c0), [c0, c1), ..., [c_last, V) with V appended when V > c_last.

  bands(cutoffs, V)                     [(start, end)] per band
  band_dim(dim, factor, i)              int(dim // factor**i)
  input_param_shapes / softmax_param_shapes   {fairseq name: shape}
  adaptive_input(cfg, p, src)           [B, T, C] (before the embedding scale)
  head_and_tails(cfg, p, x)             the head logits [N, c0 + k - 1] and a tail function
  log_probs(cfg, p, x)                  full log-probabilities [N, V] (get_log_prob without a target)
  adaptive_loss(cfg, p, x, target, pad) (summed loss with fairseq's ignore_index quirk, ntokens)
  exact_nll(cfg, p, x, target, pad)     summed exact NLL (fairseq's cross_entropy criterion)

Tied weights (tie_adaptive_weights): the head's word rows are the input's band-0 table
decoder.embed_tokens.embeddings.0.0.weight, tail i's output is embeddings.{i+1}.0.weight; tied
projections (tie_adaptive_proj): tail i's projection is embeddings.{i+1}.1.weight [C, d] applied as
x @ P (transposed use). Dropout is 0 here (the parity cases run without it).
"""

import math

import torch
import torch.nn.functional as F

ADAPTIVE_IN = "decoder.embed_tokens.embeddings."
ADAPTIVE_SM = "decoder.adaptive_softmax."


def parse_cutoff(text):
    s = str(text).strip().strip("[]()")
    return [int(x) for x in s.split(",") if x.strip()]


def bands(cutoffs, V):
    ends = list(cutoffs) + ([V] if V > cutoffs[-1] else [])
    return [(0 if i == 0 else ends[i - 1], e) for i, e in enumerate(ends)]


def band_dim(dim, factor, i):
    return int(dim // (factor ** i))


def input_param_shapes(cfg):
    out = {}
    for i, (s, e) in enumerate(bands(cfg.adaptive_input_cutoff, cfg.vocab_size)):
        d = band_dim(cfg.embed_dim, cfg.adaptive_input_factor, i)
        out[f"{ADAPTIVE_IN}{i}.0.weight"] = (e - s, d)
        out[f"{ADAPTIVE_IN}{i}.1.weight"] = (cfg.embed_dim, d)
    return out


def softmax_param_shapes(cfg):
    C = cfg.embed_dim
    bs = bands(cfg.adaptive_softmax_cutoff, cfg.vocab_size)
    k = len(bs)
    out = {}
    if cfg.tie_adaptive_weights:
        out[ADAPTIVE_SM + "head.class_proj.weight"] = (k - 1, C)
    else:
        out[ADAPTIVE_SM + "head.weight"] = (bs[0][1] + k - 1, C)
    for i in range(1, k):
        if cfg.tie_adaptive_weights:
            d = band_dim(C, cfg.adaptive_input_factor, i)
            if not cfg.tie_adaptive_proj:
                out[f"{ADAPTIVE_SM}tail.{i - 1}.0.weight"] = (d, C)
        else:
            d = band_dim(C, cfg.adaptive_softmax_factor, i)
            out[f"{ADAPTIVE_SM}tail.{i - 1}.0.weight"] = (d, C)
            out[f"{ADAPTIVE_SM}tail.{i - 1}.2.weight"] = (bs[i][1] - bs[i][0], d)
    return out


def adaptive_input(cfg, p, src):
    """src [B, T] int64 -> [B, T, C]: each token's band table row, projected to C."""
    B, T = src.shape
    out = None
    for i, (s, e) in enumerate(bands(cfg.adaptive_input_cutoff, cfg.vocab_size)):
        table, proj = p[f"{ADAPTIVE_IN}{i}.0.weight"], p[f"{ADAPTIVE_IN}{i}.1.weight"]
        if out is None:
            out = torch.zeros(B, T, cfg.embed_dim, dtype=table.dtype)
        mask = (src >= s) & (src < e)
        if not bool(mask.any()):
            continue
        local = (src[mask] - s)
        # band 0 has padding_idx: the pad row gets no gradient from the input side
        emb = F.embedding(local, table, padding_idx=cfg.padding_idx if i == 0 else None)
        out = out.index_put((mask,), emb @ proj.t())  # out-of-place: differentiable
    return out


def _weights(cfg, p):
    """-> (head weight [c0 + k - 1, C], [(proj_fn, out [size, d])] per tail)."""
    bs = bands(cfg.adaptive_softmax_cutoff, cfg.vocab_size)
    tied = cfg.tie_adaptive_weights
    if tied:
        head = torch.cat([p[f"{ADAPTIVE_IN}0.0.weight"], p[ADAPTIVE_SM + "head.class_proj.weight"]], dim=0)
    else:
        head = p[ADAPTIVE_SM + "head.weight"]
    tails = []
    for i in range(1, len(bs)):
        if tied and cfg.tie_adaptive_proj:
            P_ = p[f"{ADAPTIVE_IN}{i}.1.weight"]  # [C, d]
            proj = (lambda x, P_=P_: x @ P_)
        else:
            W = p[f"{ADAPTIVE_SM}tail.{i - 1}.0.weight"]  # [d, C]
            proj = (lambda x, W=W: x @ W.t())
        out = p[f"{ADAPTIVE_IN}{i}.0.weight"] if tied else p[f"{ADAPTIVE_SM}tail.{i - 1}.2.weight"]
        tails.append((proj, out))
    return bs, head, tails


def log_probs(cfg, p, x):
    """x [N, C] -> log p [N, V]: log p(w) = lsm(head)[w] (w < c0), lsm(head)[c0+i-1] + lsm(tail_i)[w - start_i]."""
    bs, head, tails = _weights(cfg, p)
    c0 = bs[0][1]
    hl = torch.log_softmax(x @ head.t(), dim=-1)
    parts = [hl[:, :c0]]
    for i, (proj, out) in enumerate(tails, start=1):
        tl = torch.log_softmax(proj(x) @ out.t(), dim=-1)
        parts.append(tl + hl[:, c0 + i - 1:c0 + i])
    return torch.cat(parts, dim=-1)


def _split_targets(bs, target, pad):
    c0 = bs[0][1]
    head_t = target.clone()
    per_band = []
    for i in range(1, len(bs)):
        s, e = bs[i]
        m = (target >= s) & (target < e)
        head_t[m] = c0 + i - 1
        per_band.append((m.nonzero().squeeze(1), target[m] - s))
    return head_t, per_band


def adaptive_loss(cfg, p, x, target, pad):
    """x [N, C], target [N] -> (Σ CE(head) + Σ CE(tail_i), ignore_index = pad everywhere (the quirk), ntokens)."""
    bs, head, tails = _weights(cfg, p)
    head_t, per_band = _split_targets(bs, target, pad)
    loss = F.cross_entropy(x @ head.t(), head_t, ignore_index=pad, reduction="sum")
    for (proj, out), (rows, local) in zip(tails, per_band):
        if rows.numel():
            loss = loss + F.cross_entropy(proj(x[rows]) @ out.t(), local, ignore_index=pad, reduction="sum")
    return loss, int(target.ne(pad).sum())


def quirk_count(cfg, target, pad):
    """How many targets have the tail-local index pad (no within-cluster loss under adaptive_loss)."""
    bs = bands(cfg.adaptive_softmax_cutoff, cfg.vocab_size)
    return sum(int(((target >= s) & (target < e) & (target - s == pad)).sum()) for s, e in bs[1:])
