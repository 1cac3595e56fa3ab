"""The independent float64 oracle of the transformer_xl family: fairseq's transformer_xl, i.e.
HuggingFace's TransfoXLLMHeadModel, written from REFERENCE.md §6.1-6.3 and §6.6 (not from the C++).

Contract:
  XLConfig.from_json(d): the stretch/fairseq config keys (n_layer, d_model, n_head, d_head, d_inner,
    mem_len, clamp_len, same_length, untie_r, xl_original, vocab_size).
  param_shapes(cfg) -> {fairseq state-dict name: shape} (the output weight is the tied
    decoder.model.transformer.word_emb.emb_layers.0.weight; the output bias is
    decoder.model.crit.out_layers.0.bias).
  init_mems(cfg, B) -> HF's zeros [mem_len, B, C] per layer (xl_original: empty [0, B, C]).
  forward(cfg, p, src [B, T], mems, bug=None) -> (logits [B, T, V], new_mems): time-major inside, as HF:
    the score is AC + BD with BD from the literal `_rel_shift` of (q + r_r_bias)·r_net(pos_emb)ᵀ,
    pos_emb for positions klen−1 … 0 (clamped to clamp_len when > 0), the mask triu(1 + mlen) plus
    same_length's tril(−s), masked_fill with finfo.min, softmax over keys, post-norm blocks; the
    new memory is the last mem_len rows of [mem ‖ layer input], detached.
  Dropout is not modelled (the parity cases use 0). bug: a seeded mutation for the driver's
    self-check ("no_shift": BD without _rel_shift; "attached": memory keeps its graph;
    "window_off_by_one": same_length blocks one key too many).
"""

import json
import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F


@dataclass
class XLConfig:
    vocab_size: int
    n_layer: int
    d_model: int
    n_head: int
    d_head: int
    d_inner: int
    mem_len: int
    clamp_len: int
    same_length: bool
    untie_r: bool
    xl_original: bool

    @classmethod
    def from_json(cls, d):
        return cls(int(d["vocab_size"]), int(d["n_layer"]), int(d["d_model"]), int(d["n_head"]), int(d["d_head"]),
                   int(d["d_inner"]), int(d["mem_len"]), int(d["clamp_len"]), bool(d["same_length"]),
                   bool(d["untie_r"]), bool(d["xl_original"]))

    @property
    def shared_r(self):
        return self.xl_original or not self.untie_r


def param_shapes(cfg):
    C, H, D, HD, V, Fi = cfg.d_model, cfg.n_head, cfg.d_head, cfg.n_head * cfg.d_head, cfg.vocab_size, cfg.d_inner
    top = "decoder.model.transformer."
    s = {}
    if cfg.shared_r:
        s[top + "r_w_bias"] = (H, D)
        s[top + "r_r_bias"] = (H, D)
    s[top + "word_emb.emb_layers.0.weight"] = (V, C)
    for l in range(cfg.n_layer):
        a, f = f"{top}layers.{l}.dec_attn.", f"{top}layers.{l}.pos_ff."
        if not cfg.shared_r:
            s[a + "r_r_bias"] = (H, D)
            s[a + "r_w_bias"] = (H, D)
        s[a + "qkv_net.weight"] = (3 * HD, C)
        s[a + "o_net.weight"] = (C, HD)
        s[a + "layer_norm.weight"] = (C,)
        s[a + "layer_norm.bias"] = (C,)
        s[a + "r_net.weight"] = (HD, C)
        s[f + "CoreNet.0.weight"] = (Fi, C)
        s[f + "CoreNet.0.bias"] = (Fi,)
        s[f + "CoreNet.3.weight"] = (C, Fi)
        s[f + "CoreNet.3.bias"] = (C,)
        s[f + "layer_norm.weight"] = (C,)
        s[f + "layer_norm.bias"] = (C,)
    s["decoder.model.crit.out_layers.0.bias"] = (V,)
    return s


def init_mems(cfg, B, dtype=torch.float64):
    rows = 0 if cfg.xl_original else cfg.mem_len
    if cfg.mem_len <= 0:
        return None
    return [torch.zeros(rows, B, cfg.d_model, dtype=dtype) for _ in range(cfg.n_layer)]


def rel_shift(x):
    """HF's _rel_shift on [qlen, klen, ...]: pad a zero column, view as [klen + 1, qlen], drop row 0."""
    zero_pad = torch.zeros((x.size(0), 1) + x.size()[2:], dtype=x.dtype)
    x_padded = torch.cat([zero_pad, x], dim=1)
    x_padded = x_padded.view((x.size(1) + 1, x.size(0)) + x.size()[2:])
    return x_padded[1:].view_as(x)


def positional_embedding(pos_seq, C, dtype):
    inv_freq = 1.0 / (10000 ** (torch.arange(0.0, C, 2.0, dtype=dtype) / C))
    sinusoid = torch.outer(pos_seq, inv_freq)
    return torch.cat([sinusoid.sin(), sinusoid.cos()], dim=-1)  # [klen, C]


def rel_attention(cfg, p, a, w, r, r_w_bias, r_r_bias, mask, mem, bug):
    qlen, B = w.size(0), w.size(1)
    H, D = cfg.n_head, cfg.d_head
    cat = torch.cat([mem, w], 0) if mem is not None else w
    w_heads = cat @ p[a + "qkv_net.weight"].t()
    r_head_k = r @ p[a + "r_net.weight"].t()
    q, k, v = torch.chunk(w_heads, 3, dim=-1)
    q = q[-qlen:]
    klen = k.size(0)
    q = q.view(qlen, B, H, D)
    k = k.view(klen, B, H, D)
    v = v.view(klen, B, H, D)
    r_head_k = r_head_k.view(r.size(0), H, D)
    AC = torch.einsum("ibnd,jbnd->ijbn", q + r_w_bias, k)
    BD = torch.einsum("ibnd,jnd->ijbn", q + r_r_bias, r_head_k)
    if bug != "no_shift":
        BD = rel_shift(BD)
    score = (AC + BD) * (1.0 / math.sqrt(D))
    score = score.masked_fill(mask[:, :, None, None], torch.finfo(score.dtype).min)
    prob = F.softmax(score, dim=1)
    vec = torch.einsum("ijbn,jbnd->ibnd", prob, v).contiguous().view(qlen, B, H * D)
    out = vec @ p[a + "o_net.weight"].t()
    return F.layer_norm(w + out, (cfg.d_model,), p[a + "layer_norm.weight"], p[a + "layer_norm.bias"], 1e-5)


def forward(cfg, p, src, mems, bug=None):
    """src [B, T] -> (logits [B, T, V], new mems)."""
    top = "decoder.model.transformer."
    C = cfg.d_model
    x = src.t()  # [T, B]
    qlen = x.size(0)
    emb_w = p[top + "word_emb.emb_layers.0.weight"]
    core = emb_w[x] * (C ** 0.5)  # [T, B, C]
    mlen = mems[0].size(0) if mems is not None else 0
    klen = mlen + qlen
    ones = torch.ones(qlen, klen, dtype=torch.bool)
    if cfg.same_length:
        mask_len = klen - cfg.mem_len
        shift = qlen - mask_len if mask_len > 0 else qlen
        if bug == "window_off_by_one":
            shift -= 1
        mask = torch.triu(ones, 1 + mlen) | torch.tril(ones, -shift)
    else:
        mask = torch.triu(ones, 1 + mlen)
    pos_seq = torch.arange(klen - 1, -1, -1.0, dtype=core.dtype)
    if cfg.clamp_len > 0:
        pos_seq = pos_seq.clamp(max=cfg.clamp_len)
    r = positional_embedding(pos_seq, C, core.dtype)  # [klen, C]
    hids = []
    for l in range(cfg.n_layer):
        hids.append(core)
        a, f = f"{top}layers.{l}.dec_attn.", f"{top}layers.{l}.pos_ff."
        rw = p[top + "r_w_bias"] if cfg.shared_r else p[a + "r_w_bias"]
        rr = p[top + "r_r_bias"] if cfg.shared_r else p[a + "r_r_bias"]
        core = rel_attention(cfg, p, a, core, r, rw, rr, mask, mems[l] if mems is not None else None, bug)
        h = F.relu(core @ p[f + "CoreNet.0.weight"].t() + p[f + "CoreNet.0.bias"])
        h = h @ p[f + "CoreNet.3.weight"].t() + p[f + "CoreNet.3.bias"]
        core = F.layer_norm(core + h, (C,), p[f + "layer_norm.weight"], p[f + "layer_norm.bias"], 1e-5)
    new_mems = None
    if mems is not None:
        end = mlen + qlen
        beg = max(0, end - cfg.mem_len)
        new_mems = []
        for l in range(cfg.n_layer):
            cat = torch.cat([mems[l], hids[l]], 0)[beg:end]
            new_mems.append(cat if bug == "attached" else cat.detach())
    hidden = core.transpose(0, 1)  # [B, T, C]
    logits = hidden @ emb_w.t() + p["decoder.model.crit.out_layers.0.bias"]
    return logits, new_mems


def config_of(meta_config: str):
    return XLConfig.from_json(json.loads(meta_config))
