"""The roberta encoder (fairseq 0.12.2's RobertaModel: TransformerEncoder + RobertaLMHead, with the
masked_lm criterion) as a pure float64 function of named parameters, written from fairseq's
model description, not from stretch's C++.

  x = embed_tokens[src] (+ learned positions[make_positions] | + sinusoidal) ; layernorm_embedding
  per layer (post-norm, RoBERTa's default): x = LN(x + attn(x)); x = LN(x + fc2(gelu(fc1(x))))
            (pre-norm: x = x + attn(LN(x)); x = x + ffn(LN(x)); a final LayerNorm after the last)
  attention: every non-pad key; --pos alibi adds -m_h |i - j| (symmetric ALiBi) to q.k / sqrt(D)
  lm head: logits = LN(gelu(dense(x))) @ embed_tokens^T + lm_head.bias
  masked_lm loss: summed NLL over the positions whose target is not pad; sample size = their count
Learnable slopes: the checkpoint's encoder.sentence_encoder.layers.N.self_attn.alibi_slopes [H];
else the paper's slopes for H heads (positions.alibi_slopes). Dropout is 0 (the dumps use none).
"""
import json

import torch
import torch.nn.functional as F

from .errors import InputError
from .model import ACTIVATIONS
from .positions import alibi_slopes, make_positions, sinusoidal_embedding
from .safetensors_io import load_file

P = "encoder.sentence_encoder."


def load(path: str, dtype=torch.float64):
    """-> (config dict, {name: leaf tensor with requires_grad}) of a stretch roberta checkpoint."""
    tensors, meta = load_file(path)
    if "config" not in meta:
        raise InputError(path, "no __metadata__['config']", "the checkpoint must carry its config JSON")
    cfg = json.loads(meta["config"])
    if not str(cfg.get("arch", "")).startswith("roberta"):
        raise InputError(path, f"arch {cfg.get('arch')!r} is not a roberta encoder")
    params = {k: v.detach().to(dtype).clone().requires_grad_(True) for k, v in tensors.items()
              if k.startswith("encoder.")}
    if P + "embed_tokens.weight" not in params:
        raise InputError(path, "no encoder.sentence_encoder.embed_tokens.weight")
    return cfg, params


def _ln(x, p, name):
    return F.layer_norm(x, x.shape[-1:], p[name + ".weight"], p[name + ".bias"], eps=1e-5)


def _lin(x, p, name):
    return F.linear(x, p[name + ".weight"], p[name + ".bias"])


def _act(cfg, x):
    return ACTIVATIONS[cfg.get("activation_fn", "gelu")](x)


def _attention(cfg, p, layer, x, key_pad):
    B, T, C = x.shape
    H = int(cfg["encoder_attention_heads"])
    D = C // H
    name = f"{P}layers.{layer}.self_attn."
    q = _lin(x, p, name + "q_proj").view(B, T, H, D).transpose(1, 2) * D ** -0.5
    k = _lin(x, p, name + "k_proj").view(B, T, H, D).transpose(1, 2)
    v = _lin(x, p, name + "v_proj").view(B, T, H, D).transpose(1, 2)
    s = q @ k.transpose(-1, -2)  # [B, H, T, T]
    if cfg["pos"] == "alibi":
        if name + "alibi_slopes" in p:
            m = p[name + "alibi_slopes"]
        else:
            m = torch.tensor(alibi_slopes(H), dtype=torch.float32).to(x.dtype)  # stored as float32, as the model
        m = m * float(cfg.get("alibi_slope_scale", 1.0))  # position interpolation (eval-lm --alibi-interpolate)
        i = torch.arange(T, dtype=x.dtype)
        dist = (i[:, None] - i[None, :]).abs()  # |i - j|
        s = s - m[:, None, None] * dist[None]
    s = s.masked_fill(key_pad[:, None, None, :], float("-inf"))
    o = torch.softmax(s, dim=-1) @ v  # [B, H, T, D]
    return _lin(o.transpose(1, 2).reshape(B, T, C), p, name + "out_proj")


def features(cfg, p, src):
    """src [B, T] int64 -> [B, T, C]."""
    pad = int(cfg.get("padding_idx", 1))
    E = p[P + "embed_tokens.weight"]
    x = E[src]
    pos = make_positions(src, pad)
    if cfg["pos"] == "learned":
        x = x + p[P + "embed_positions.weight"][pos]
    elif cfg["pos"] == "sinusoidal":
        x = x + sinusoidal_embedding(pos, x.shape[-1], pad, dtype=x.dtype)
    x = _ln(x, p, P + "layernorm_embedding")
    key_pad = src.eq(pad)
    pre = bool(cfg.get("encoder_normalize_before", False))
    for layer in range(int(cfg["encoder_layers"])):
        name = f"{P}layers.{layer}."
        h = _ln(x, p, name + "self_attn_layer_norm") if pre else x
        x = x + _attention(cfg, p, layer, h, key_pad)
        if not pre:
            x = _ln(x, p, name + "self_attn_layer_norm")
        h = _ln(x, p, name + "final_layer_norm") if pre else x
        x = x + _lin(_act(cfg, _lin(h, p, name + "fc1")), p, name + "fc2")
        if not pre:
            x = _ln(x, p, name + "final_layer_norm")
    if pre:
        x = _ln(x, p, P + "layer_norm")
    return x


def lm_head(cfg, p, x):
    h = _ln(_act(cfg, _lin(x, p, "encoder.lm_head.dense")), p, "encoder.lm_head.layer_norm")
    return h @ p[P + "embed_tokens.weight"].t() + p["encoder.lm_head.bias"]


def masked_lm_loss(cfg, p, src, target):
    """-> (summed NLL over non-pad targets, their count, logits [B, T, V])."""
    pad = int(cfg.get("padding_idx", 1))
    logits = lm_head(cfg, p, features(cfg, p, src))
    V = logits.shape[-1]
    loss = F.cross_entropy(logits.reshape(-1, V), target.reshape(-1), ignore_index=pad, reduction="sum")
    return loss, int(target.ne(pad).sum()), logits
