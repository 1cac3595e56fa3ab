"""XL-style memory for the transformer_lm oracle (--mem-len), written from REFERENCE.md §6.3 and
the contract of stretch's models/transformer_lm/hidden_memory.h, independently of the C++ code.

  features_with_memory(cfg, p, src [B, T], mem)  -> (hidden [B, T, C], next memory)

A memory is (per-layer inputs [L] of [B, S, C], pad [B, S] bool, mem_len); None = empty. Layer l
of a segment attends over the keys [memory_l ‖ x_l] (layer norm applied to both in pre-norm), the
segment's T queries sitting at absolute positions S .. S+T-1 of the key axis; a key j is visible
to query i iff j <= S + i and j is not padding. Bias: ALiBi −m_h·(S + i − j) (the distance in the
stream, across the memory boundary), T5 table[bucket(j − (S + i))], none 0. The next memory is the
last mem_len rows of [memory_l ‖ x_l], DETACHED (no gradient reaches an earlier segment), and the
same rows of the padding. Pad keys are masked in the current segment too. Eval mode: no dropout.
Supports --pos alibi (the variants' per-layer slopes), t5 and none, pre/post norm, relu/gelu,
final norm, tied or untied output; not the adaptive input/softmax.
"""

import math

import torch
import torch.nn.functional as F

from . import alibi_variants as AV
from . import positions as P
from .model import ACTIVATIONS, LN_EPS


def _ln(p, name, x):
    return F.layer_norm(x, (x.shape[-1],), p[name + ".weight"], p[name + ".bias"], eps=LN_EPS)


def _bias(cfg, p, n, T, S, dtype, bug=None):
    """[H, T, S+T] score bias of layer n for queries at key positions S..S+T-1.
    bug="x242": the seeded mistake of lucidrains/x-transformers#242 (queries counted from 0)."""
    pos = cfg.layer_pos(n)
    qpos = torch.arange(T, dtype=torch.int64) + (0 if bug == "x242" else S)  # absolute position of query i
    kpos = torch.arange(S + T, dtype=torch.int64)      # absolute position of key j
    dist = qpos[:, None] - kpos[None, :]               # [T, S+T] p_i − j (negative: future, masked)
    if pos == "alibi":
        name = f"decoder.layers.{n}.self_attn.alibi_slopes"
        m = p[name] if name in p else torch.tensor(AV.layer_slopes(cfg)[n], dtype=dtype)
        d = dist.clamp(min=0).to(dtype)
        if cfg.alibi_shape == "log":
            d = torch.log1p(d)
        elif cfg.alibi_shape == "clipped":
            d = d.clamp(max=cfg.alibi_clip_distance)
        return -m[:, None, None] * d[None]
    if pos == "t5":
        b = P.t5_bucket(-dist, cfg.t5_num_buckets, cfg.t5_max_distance)  # rel = j − p_i
        return p["decoder.relative_attention_bias.weight"][b].permute(2, 0, 1)
    if pos == "none":
        return None
    raise ValueError(f"memory oracle: --pos {pos} is not supported with memory")


def features_with_memory(cfg, p, src_tokens, mem, bug=None):
    """bug (the driver's self-check that the comparison can fail): "x242" positions from the
    segment start; "attached" the memory keeps its gradient (no detach)."""
    src = src_tokens.to(torch.int64)
    B, T = src.shape
    pad = cfg.padding_idx
    x = F.embedding(src, p["decoder.embed_tokens.weight"], padding_idx=pad)
    dtype = x.dtype
    if not cfg.no_scale_embedding:
        x = x * math.sqrt(cfg.embed_dim)
    mems, mem_pad, mem_len = mem
    S = 0 if mems is None else mems[0].shape[1]
    seg_pad = src.eq(pad)                                           # [B, T]
    key_pad = seg_pad if S == 0 else torch.cat([mem_pad, seg_pad], 1)  # [B, S+T]
    causal = (torch.arange(S + T)[None, :] <= (torch.arange(T) + S)[:, None])  # [T, S+T]
    allowed = causal[None, None] & ~key_pad[:, None, None, :]      # [B, 1, T, S+T]
    row_ok = allowed.any(-1, keepdim=True)
    H, D, C = cfg.heads, cfg.head_dim, cfg.embed_dim
    act = ACTIVATIONS[cfg.activation]
    inputs = []
    for n in range(cfg.layers):
        pre = f"decoder.layers.{n}."
        inputs.append(x)
        kv_in = x if S == 0 else torch.cat([mems[n], x], 1)          # [B, S+T, C]
        r = x
        if cfg.normalize_before:
            q_in = _ln(p, pre + "self_attn_layer_norm", x)
            kv_in = _ln(p, pre + "self_attn_layer_norm", kv_in)
        else:
            q_in = x
        a = pre + "self_attn."
        q = F.linear(q_in, p[a + "q_proj.weight"], p[a + "q_proj.bias"]) * (D ** -0.5)
        k = F.linear(kv_in, p[a + "k_proj.weight"], p[a + "k_proj.bias"])
        v = F.linear(kv_in, p[a + "v_proj.weight"], p[a + "v_proj.bias"])
        q = q.view(B, T, H, D).transpose(1, 2)
        k = k.view(B, S + T, H, D).transpose(1, 2)
        v = v.view(B, S + T, H, D).transpose(1, 2)
        scores = q @ k.transpose(-1, -2)                             # [B, H, T, S+T]
        bias = _bias(cfg, p, n, T, S, dtype, bug)
        if bias is not None:
            scores = scores + bias[None]
        scores = scores.masked_fill(~allowed, float("-inf")).masked_fill(~row_ok, 0.0)
        probs = torch.softmax(scores, -1) * row_ok.to(dtype)
        att = (probs @ v).transpose(1, 2).reshape(B, T, C)
        x = r + F.linear(att, p[a + "out_proj.weight"], p[a + "out_proj.bias"])
        if not cfg.normalize_before:
            x = _ln(p, pre + "self_attn_layer_norm", x)
        r = x
        h = _ln(p, pre + "final_layer_norm", x) if cfg.normalize_before else x
        h = act(F.linear(h, p[pre + "fc1.weight"], p[pre + "fc1.bias"]))
        x = r + F.linear(h, p[pre + "fc2.weight"], p[pre + "fc2.bias"])
        if not cfg.normalize_before:
            x = _ln(p, pre + "final_layer_norm", x)
    if cfg.has_final_norm:
        x = _ln(p, "decoder.layer_norm", x)
    keep = min(S + T, mem_len)
    nxt = [(t if S == 0 else torch.cat([mems[n], t], 1))[:, -keep:] for n, t in enumerate(inputs)]
    if bug != "attached":
        nxt = [t.detach() for t in nxt]
    nxt_pad = key_pad[:, -keep:]
    return x, (nxt, nxt_pad, mem_len)


def empty_memory(mem_len):
    return (None, None, mem_len)
