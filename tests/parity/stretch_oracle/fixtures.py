"""Fixtures for the self-tests (and for hand experiments): small configs, random parameters,
checkpoints in the contract's format, and stand-in parity dumps / trajectories computed by the
oracle itself in float32 (which play the part of stretch's fp32 C++ output).

  small_config(pos, **overrides)             LMConfig
  random_params(cfg, seed, dtype)            {name: tensor} (LN weights near 1, biases nonzero)
  random_batch(cfg, B, T, seed, pad_tail)    (src [B, T] int32, target [B, T] int32); the last
                                             `pad_tail` positions of the last row are padding
  write_checkpoint(path, cfg, params)        safetensors + __metadata__['config']
  make_dump(cfg, params, src, target, dtype) {'src_tokens','target','logits','loss','grad.<name>'}
"""

import json
import math

import torch

from .model import LMConfig, TransformerLM, param_shapes
from .safetensors_io import save_file


def small_config(pos: str = "alibi", **kw) -> LMConfig:
    d = dict(layers=2, embed_dim=12, ffn_dim=16, heads=3, vocab_size=11, pos=pos,
             tokens_per_sample=8, max_target_positions=8)
    d.update(kw)
    cfg = LMConfig(**d)
    cfg.validate()
    return cfg


def random_params(cfg: LMConfig, seed: int = 0, dtype=torch.float32) -> dict:
    g = torch.Generator().manual_seed(seed)
    out = {}
    for name, shape in param_shapes(cfg).items():
        if name.endswith("layer_norm.weight"):
            t = 1.0 + 0.2 * torch.randn(shape, generator=g, dtype=torch.float64)
        elif name.endswith(".bias"):
            t = 0.1 * torch.randn(shape, generator=g, dtype=torch.float64)
        elif name == "decoder.relative_attention_bias.weight":
            t = 0.5 * torch.randn(shape, generator=g, dtype=torch.float64)
        elif name in ("decoder.embed_tokens.weight", "decoder.embed_positions.weight",
                      "decoder.output_projection.weight"):
            t = torch.randn(shape, generator=g, dtype=torch.float64) * cfg.embed_dim ** -0.5
        else:  # Linear [out, in]
            t = torch.randn(shape, generator=g, dtype=torch.float64) * shape[1] ** -0.5
        out[name] = t.to(dtype)
    return out


def random_batch(cfg: LMConfig, B: int, T: int, seed: int = 0, pad_tail: int = 0):
    """Tokens in [2, V) (never pad); the stream is shifted so target = next token."""
    g = torch.Generator().manual_seed(seed)
    stream = torch.randint(2, cfg.vocab_size, (B, T + 1), generator=g)
    src, tgt = stream[:, :-1].clone(), stream[:, 1:].clone()
    if pad_tail:
        src[-1, T - pad_tail:] = cfg.padding_idx
        tgt[-1, T - pad_tail:] = cfg.padding_idx
    return src.to(torch.int32), tgt.to(torch.int32)


def write_checkpoint(path: str, cfg: LMConfig, params: dict):
    save_file(path, {k: v.to(torch.float32) for k, v in params.items()},
              {"config": json.dumps(cfg.to_fairseq())})


def make_dump(cfg: LMConfig, params: dict, src, target, dtype=torch.float32) -> dict:
    """What stretch's C++ side writes, computed by the oracle in `dtype`."""
    m = TransformerLM(cfg, params, dtype)
    loss, _, logits = m.loss(src, target)
    loss.backward()
    d = {"src_tokens": src.to(torch.int32), "target": target.to(torch.int32),
         "logits": logits.detach().float(), "loss": loss.detach().float().reshape(1)}
    for k, t in m.params.items():
        d["grad." + k] = t.grad.float()
    return d


def stream_batches(cfg: LMConfig, steps: int, B: int, T: int, seed: int = 0):
    """(src [steps, B, T], target [steps, B, T]) int32 from a repetitive token stream (so the
    loss can fall within a few steps)."""
    g = torch.Generator().manual_seed(seed)
    period = max(3, min(7, cfg.vocab_size - 2))
    motif = torch.randint(2, cfg.vocab_size, (period,), generator=g)
    n = steps * B * (T + 1)
    stream = motif.repeat(math.ceil(n / period))[:n].view(steps, B, T + 1)
    noise = torch.rand(stream.shape, generator=g) < 0.1
    stream = torch.where(noise, torch.randint(2, cfg.vocab_size, stream.shape, generator=g), stream)
    return stream[..., :-1].to(torch.int32).contiguous(), stream[..., 1:].to(torch.int32).contiguous()
