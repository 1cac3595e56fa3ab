"""fairseq transformer_lm (decoder-only) as a pure function of named parameters.

Written from REFERENCE.md §2.2-2.3 and §2.7 and the parity contract (tests/parity/README.md),
independently of stretch's C++ code. Legend: B batch, T time, S keys, C model dim, H heads,
D head dim, F ffn dim, V vocab, L layers.

  LMConfig.from_fairseq(dict)         config from the checkpoint's __metadata__["config"] JSON
  param_shapes(cfg)                   {fairseq state-dict name: shape} the checkpoint must hold
  forward(cfg, params, src [B, T])    logits [B, T, V] (eval mode: no dropout)
  nll_sum(logits, target, pad)        (summed NLL in nats over non-pad targets, ntokens)
  TransformerLM                       params as float64 leaf tensors + the two calls above
  load_checkpoint(path)               (cfg, raw tensors) with names and shapes validated

Semantics (the contract): x = embed_scale * embed_tokens(src) (+ sinusoidal/learned positions
from make_positions) (then LN(x) with layernorm_embedding); pre-norm blocks r = x; x = r + attn(LN(x)); r = x; x = r + fc2(act(fc1(LN(x))))
or post-norm x = LN(r + attn(x)), x = LN(r + ffn(x)); a final LN iff pre-norm and not
no_decoder_final_norm; logits = x W_out^T (W_out = embed_tokens when tied). Attention: q =
(x Wq^T + bq) D^-1/2, head h owns channels [hD, (h+1)D), score = q k^T + bias_h(i, j), causal and
key-padding masks, softmax, P v, out_proj. A query row whose keys are all masked (possible only
with left padding) outputs zeros instead of NaN.
"""

import json
import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from . import adaptive as A
from . import alibi_variants as AV
from . import positions as P
from .errors import InputError
from .safetensors_io import load_file

POS_METHODS = ("alibi", "sinusoidal", "learned", "rope", "t5", "none")
# fairseq's --activation-fn choices (utils.get_activation_fn), each as torch writes it: "gelu" is the exact
# erf form, "gelu_accurate" (old name "gelu_fast") torch's tanh approximation, "linear" the identity.
ACTIVATIONS = {"relu": F.relu, "gelu": F.gelu, "gelu_accurate": lambda x: F.gelu(x, approximate="tanh"),
               "gelu_fast": lambda x: F.gelu(x, approximate="tanh"), "tanh": torch.tanh, "linear": lambda x: x}
LN_EPS = 1e-5  # fairseq LayerNorm, REFERENCE §2.1 and §7.1


def _as_bool(key, v):
    if isinstance(v, bool):
        return v
    if isinstance(v, (int, float)) and v in (0, 1):
        return bool(v)
    if isinstance(v, str) and v.lower() in ("true", "false", "1", "0"):
        return v.lower() in ("true", "1")
    raise InputError(f"config key '{key}'", f"expected a bool, got {v!r}", "write true or false")


def _as_int(key, v):
    if isinstance(v, bool) or not isinstance(v, (int, float, str)):
        raise InputError(f"config key '{key}'", f"expected an integer, got {v!r}")
    try:
        f = float(v)
    except ValueError:
        raise InputError(f"config key '{key}'", f"expected an integer, got {v!r}")
    if f != int(f):
        raise InputError(f"config key '{key}'", f"expected an integer, got {v!r}")
    return int(f)


def _as_float(key, v):
    try:
        return float(v)
    except (TypeError, ValueError):
        raise InputError(f"config key '{key}'", f"expected a number, got {v!r}")


@dataclass
class LMConfig:
    layers: int
    embed_dim: int  # C
    ffn_dim: int  # F
    heads: int  # H
    vocab_size: int  # V
    pos: str
    normalize_before: bool = True
    no_final_norm: bool = False
    share_io: bool = False
    no_scale_embedding: bool = False
    layernorm_embedding: bool = False  # fairseq TransformerDecoder: LN after scale + positions, before dropout
    # NormFormer (fairseq 0.12.2 TransformerDecoderLayerBase): c_attn [H] scales the attention output's
    # D-channel groups after out_proj; attn_ln [C] follows it; ffn_layernorm [F] sits between the
    # activation and fc2; w_resid [C] scales the FFN's residual.
    scale_heads: bool = False
    scale_attn: bool = False
    scale_fc: bool = False
    scale_resids: bool = False
    activation: str = "relu"
    tokens_per_sample: int = 0
    max_target_positions: int = 0
    padding_idx: int = 1
    t5_num_buckets: int = 32
    t5_max_distance: int = 128
    rope_base: float = 10000.0
    dropout: float = 0.0
    attention_dropout: float = 0.0
    activation_dropout: float = 0.0
    adaptive_input: bool = False
    adaptive_input_cutoff: tuple = ()
    adaptive_input_factor: float = 4.0
    adaptive_softmax_cutoff: tuple = ()  # empty: full softmax
    adaptive_softmax_factor: float = 4.0
    tie_adaptive_weights: bool = False
    tie_adaptive_proj: bool = False
    criterion: str = "cross_entropy"
    # fairseq's decoder_input_dim / decoder_output_dim (0: C): the token table is [V, in_dim] and
    # decoder.project_in_dim [C, in_dim] (no bias) maps it to C after the embedding scale sqrt(C)
    # and before the positions; decoder.project_out_dim [out_dim, C] follows the final norm and the
    # output projection is [V, out_dim] (TransformerDecoderBase in fairseq 0.12.2).
    input_dim: int = 0
    output_dim: int = 0

    @property
    def in_dim(self) -> int:
        return self.input_dim or self.embed_dim

    @property
    def out_dim(self) -> int:
        return self.output_dim or self.embed_dim

    @property
    def adaptive_softmax(self) -> bool:
        return len(self.adaptive_softmax_cutoff) > 0
    # ALiBi variants (stretch_oracle/alibi_variants.py)
    alibi_slopes: str = ""
    alibi_slope_groups: str = ""
    alibi_layer_scale: str = ""
    alibi_no_bias_heads: str = ""
    alibi_learnable_slopes: bool = False
    alibi_shape: str = "linear"
    alibi_clip_distance: int = 0
    alibi_slope_warmup_updates: int = 0
    alibi_slope_warmup_init: float = 0.1
    alibi_slope_scale: float = 1.0  # position interpolation (eval-lm --alibi-interpolate): slopes x L_train / L_eval
    pos_upper: str = "same"
    pos_upper_from_layer: int = 0

    def layer_pos(self, layer: int) -> str:
        """The position method of one layer (hybrid stacks: pos_upper from pos_upper_from_layer)."""
        if self.pos_upper not in ("same", "") and layer >= self.pos_upper_from_layer:
            return self.pos_upper
        return self.pos

    @property
    def t5_anywhere(self) -> bool:
        return self.pos == "t5" or self.pos_upper == "t5"

    @property
    def head_dim(self) -> int:
        return self.embed_dim // self.heads

    @property
    def has_final_norm(self) -> bool:
        return self.normalize_before and not self.no_final_norm

    @staticmethod
    def from_fairseq(d: dict, where: str = "config") -> "LMConfig":
        required = ["decoder_layers", "decoder_embed_dim", "decoder_ffn_embed_dim",
                    "decoder_attention_heads", "vocab_size", "pos"]
        missing = [k for k in required if k not in d]
        if missing:
            raise InputError(where, f"missing keys {missing}",
                             "the checkpoint's __metadata__['config'] must use fairseq arg names (README)")
        g = lambda k, dflt: d.get(k, dflt) if d.get(k) is not None else dflt
        cfg = LMConfig(
            layers=_as_int("decoder_layers", d["decoder_layers"]),
            embed_dim=_as_int("decoder_embed_dim", d["decoder_embed_dim"]),
            ffn_dim=_as_int("decoder_ffn_embed_dim", d["decoder_ffn_embed_dim"]),
            heads=_as_int("decoder_attention_heads", d["decoder_attention_heads"]),
            vocab_size=_as_int("vocab_size", d["vocab_size"]),
            pos=str(d["pos"]),
            normalize_before=_as_bool("decoder_normalize_before", g("decoder_normalize_before", True)),
            no_final_norm=_as_bool("no_decoder_final_norm", g("no_decoder_final_norm", False)),
            share_io=_as_bool("share_decoder_input_output_embed", g("share_decoder_input_output_embed", False)),
            no_scale_embedding=_as_bool("no_scale_embedding", g("no_scale_embedding", False)),
            layernorm_embedding=_as_bool("layernorm_embedding", g("layernorm_embedding", False)),
            scale_heads=_as_bool("scale_heads", g("scale_heads", False)),
            scale_attn=_as_bool("scale_attn", g("scale_attn", False)),
            scale_fc=_as_bool("scale_fc", g("scale_fc", False)),
            scale_resids=_as_bool("scale_resids", g("scale_resids", False)),
            activation=str(g("activation_fn", "relu")),
            tokens_per_sample=_as_int("tokens_per_sample", g("tokens_per_sample", 0)),
            max_target_positions=_as_int("max_target_positions",
                                         g("max_target_positions", g("tokens_per_sample", 0))),
            padding_idx=_as_int("padding_idx", g("padding_idx", 1)),
            t5_num_buckets=_as_int("t5_num_buckets", g("t5_num_buckets", 32)),
            t5_max_distance=_as_int("t5_max_distance", g("t5_max_distance", 128)),
            rope_base=_as_float("rope_base", g("rope_base", 10000.0)),
            dropout=_as_float("dropout", g("dropout", 0.0)),
            attention_dropout=_as_float("attention_dropout", g("attention_dropout", 0.0)),
            activation_dropout=_as_float("activation_dropout", g("activation_dropout", 0.0)),
            adaptive_input=_as_bool("adaptive_input", g("adaptive_input", False)),
            adaptive_input_cutoff=tuple(A.parse_cutoff(g("adaptive_input_cutoff", ""))),
            adaptive_input_factor=_as_float("adaptive_input_factor", g("adaptive_input_factor", 4.0)),
            adaptive_softmax_cutoff=tuple(A.parse_cutoff(g("adaptive_softmax_cutoff", ""))),
            adaptive_softmax_factor=_as_float("adaptive_softmax_factor", g("adaptive_softmax_factor", 4.0)),
            tie_adaptive_weights=_as_bool("tie_adaptive_weights", g("tie_adaptive_weights", False)),
            tie_adaptive_proj=_as_bool("tie_adaptive_proj", g("tie_adaptive_proj", False)),
            criterion=str(g("criterion", "cross_entropy")),
            input_dim=_as_int("decoder_input_dim", g("decoder_input_dim", 0)),
            output_dim=_as_int("decoder_output_dim", g("decoder_output_dim", 0)),
            alibi_slopes=str(g("alibi_slopes", "")),
            alibi_slope_groups=str(g("alibi_slope_groups", "")),
            alibi_layer_scale=str(g("alibi_layer_scale", "")),
            alibi_no_bias_heads=str(g("alibi_no_bias_heads", "")),
            alibi_learnable_slopes=_as_bool("alibi_learnable_slopes", g("alibi_learnable_slopes", False)),
            alibi_shape=str(g("alibi_shape", "linear")),
            alibi_clip_distance=_as_int("alibi_clip_distance", g("alibi_clip_distance", 0)),
            alibi_slope_warmup_updates=_as_int("alibi_slope_warmup_updates", g("alibi_slope_warmup_updates", 0)),
            alibi_slope_warmup_init=_as_float("alibi_slope_warmup_init", g("alibi_slope_warmup_init", 0.1)),
            alibi_slope_scale=_as_float("alibi_slope_scale", g("alibi_slope_scale", 1.0)),
            pos_upper=str(g("pos_upper", "same")),
            pos_upper_from_layer=_as_int("pos_upper_from_layer", g("pos_upper_from_layer", 0)),
        )
        cfg.validate(where)
        return cfg

    def validate(self, where: str = "config"):
        if self.pos not in POS_METHODS:
            raise InputError(f"{where} key 'pos'", f"unknown position method {self.pos!r}", f"one of {POS_METHODS}")
        if self.activation not in ACTIVATIONS:
            raise InputError(f"{where} key 'activation_fn'", f"unsupported {self.activation!r}", f"one of {tuple(ACTIVATIONS)}")
        for k in ("layers", "embed_dim", "ffn_dim", "heads", "vocab_size"):
            if getattr(self, k) < 1:
                raise InputError(where, f"{k} = {getattr(self, k)} must be >= 1")
        if self.embed_dim % self.heads:
            raise InputError(where, f"decoder_embed_dim {self.embed_dim} is not divisible by "
                             f"decoder_attention_heads {self.heads}")
        if "rope" in (self.pos, self.pos_upper) and self.head_dim % 2:
            raise InputError(where, f"rope needs an even head dim, got {self.head_dim}")
        if self.pos == "sinusoidal" and self.embed_dim < 4:
            raise InputError(where, "sinusoidal positions need decoder_embed_dim >= 4")
        if self.pos == "learned" and self.max_target_positions < 1:
            raise InputError(where, "pos=learned needs max_target_positions (or tokens_per_sample) >= 1")
        if (self.adaptive_input or self.adaptive_softmax) and (self.in_dim, self.out_dim) != (self.embed_dim,) * 2:
            raise InputError(where, "decoder_input_dim / decoder_output_dim with an adaptive input or softmax "
                             "are not modelled by this oracle", "use them with the full softmax")
        if self.share_io and self.in_dim != self.out_dim:
            raise InputError(where, f"share_decoder_input_output_embed with decoder_input_dim {self.in_dim} != "
                             f"decoder_output_dim {self.out_dim}")

    def to_fairseq(self) -> dict:
        return {
            "decoder_layers": self.layers, "decoder_embed_dim": self.embed_dim,
            "decoder_ffn_embed_dim": self.ffn_dim, "decoder_attention_heads": self.heads,
            "decoder_normalize_before": self.normalize_before, "no_decoder_final_norm": self.no_final_norm,
            "share_decoder_input_output_embed": self.share_io, "no_scale_embedding": self.no_scale_embedding,
            "layernorm_embedding": self.layernorm_embedding,
            "scale_heads": self.scale_heads, "scale_attn": self.scale_attn, "scale_fc": self.scale_fc,
            "scale_resids": self.scale_resids,
            "activation_fn": self.activation, "pos": self.pos, "tokens_per_sample": self.tokens_per_sample,
            "max_target_positions": self.max_target_positions, "vocab_size": self.vocab_size,
            "padding_idx": self.padding_idx, "t5_num_buckets": self.t5_num_buckets,
            "t5_max_distance": self.t5_max_distance, "rope_base": self.rope_base,
            "dropout": self.dropout, "attention_dropout": self.attention_dropout,
            "activation_dropout": self.activation_dropout,
            "decoder_input_dim": self.input_dim, "decoder_output_dim": self.output_dim,
        }


def param_shapes(cfg: LMConfig) -> dict:
    """{name: shape} of every parameter, in a fixed order (fairseq state-dict names)."""
    C, F_, V, H = cfg.embed_dim, cfg.ffn_dim, cfg.vocab_size, cfg.heads
    s = A.input_param_shapes(cfg) if cfg.adaptive_input else {"decoder.embed_tokens.weight": (V, cfg.in_dim)}
    if cfg.in_dim != C:
        s["decoder.project_in_dim.weight"] = (C, cfg.in_dim)
    if cfg.pos == "learned":
        s["decoder.embed_positions.weight"] = (cfg.max_target_positions + cfg.padding_idx + 1, C)
    if cfg.layernorm_embedding:
        s["decoder.layernorm_embedding.weight"] = (C,)
        s["decoder.layernorm_embedding.bias"] = (C,)
    if cfg.t5_anywhere:
        s["decoder.relative_attention_bias.weight"] = (cfg.t5_num_buckets, H)
    for n in range(cfg.layers):
        p = f"decoder.layers.{n}."
        if cfg.scale_heads:  # a layer's own parameters come before its modules' (torch named_parameters)
            s[p + "c_attn"] = (H,)
        if cfg.scale_resids:
            s[p + "w_resid"] = (C,)
        for proj in ("q", "k", "v", "out"):
            s[p + f"self_attn.{proj}_proj.weight"] = (C, C)
            s[p + f"self_attn.{proj}_proj.bias"] = (C,)
        if cfg.scale_attn:
            s[p + "attn_ln.weight"] = (C,)
            s[p + "attn_ln.bias"] = (C,)
        s[p + "self_attn_layer_norm.weight"] = (C,)
        s[p + "self_attn_layer_norm.bias"] = (C,)
        if cfg.scale_fc:
            s[p + "ffn_layernorm.weight"] = (F_,)
            s[p + "ffn_layernorm.bias"] = (F_,)
        s[p + "fc1.weight"] = (F_, C)
        s[p + "fc1.bias"] = (F_,)
        s[p + "fc2.weight"] = (C, F_)
        s[p + "fc2.bias"] = (C,)
        s[p + "final_layer_norm.weight"] = (C,)
        s[p + "final_layer_norm.bias"] = (C,)
    if cfg.has_final_norm:
        s["decoder.layer_norm.weight"] = (C,)
        s["decoder.layer_norm.bias"] = (C,)
    if cfg.out_dim != C:
        s["decoder.project_out_dim.weight"] = (cfg.out_dim, C)
    if cfg.adaptive_softmax:
        s.update(A.softmax_param_shapes(cfg))
    elif not cfg.share_io:
        s["decoder.output_projection.weight"] = (V, cfg.out_dim)
    if cfg.alibi_learnable_slopes:
        for n in range(cfg.layers):
            if AV.uses_alibi(cfg, n):
                s[f"decoder.layers.{n}.self_attn.alibi_slopes"] = (H,)
    return s


def _attention(cfg, p, pre, x, allowed, row_ok, bias, rope):
    """x [B, T, C]; allowed [B, 1, T, S] bool; row_ok [B, 1, T, 1]; bias [H, T, S] or None;
    rope (cos [T, D], sin [T, D]) or None -> [B, T, C]."""
    B, T, C = x.shape
    H, D = cfg.heads, cfg.head_dim
    q = F.linear(x, p[pre + "q_proj.weight"], p[pre + "q_proj.bias"]) * (D ** -0.5)
    k = F.linear(x, p[pre + "k_proj.weight"], p[pre + "k_proj.bias"])
    v = F.linear(x, p[pre + "v_proj.weight"], p[pre + "v_proj.bias"])
    q, k, v = (t.view(B, T, H, D).transpose(1, 2) for t in (q, k, v))  # [B, H, T, D]
    if rope is not None:
        q, k = P.rope_apply(q, *rope), P.rope_apply(k, *rope)
    scores = q @ k.transpose(-1, -2)  # [B, H, T, S]
    if bias is not None:
        scores = scores + bias[None]
    scores = scores.masked_fill(~allowed, float("-inf")).masked_fill(~row_ok, 0.0)
    probs = torch.softmax(scores, dim=-1) * row_ok.to(scores.dtype)
    out = (probs @ v).transpose(1, 2).reshape(B, T, C)
    return F.linear(out, p[pre + "out_proj.weight"], p[pre + "out_proj.bias"])


def _layer_norm(p, pre, x):
    return F.layer_norm(x, (x.shape[-1],), p[pre + ".weight"], p[pre + ".bias"], eps=LN_EPS)


def features(cfg: LMConfig, params: dict, src_tokens: torch.Tensor, update=None) -> torch.Tensor:
    """params {name: tensor} (any float dtype, all the same); src_tokens [B, T] int -> hidden
    [B, T, out_dim] (C unless decoder_output_dim gives project_out_dim).
    update: the training update number (ALiBi slope warm-up); None = evaluation (target slopes)."""
    p = params
    src = src_tokens.to(torch.int64)
    B, T = src.shape
    pad = cfg.padding_idx
    if cfg.adaptive_input:
        x = A.adaptive_input(cfg, p, src)  # [B, T, C]
    else:
        x = F.embedding(src, p["decoder.embed_tokens.weight"], padding_idx=pad)  # [B, T, C]
    dtype = x.dtype
    if not cfg.no_scale_embedding:
        x = x * math.sqrt(cfg.embed_dim)  # sqrt(C), not sqrt(in_dim)
    if cfg.in_dim != cfg.embed_dim:
        x = F.linear(x, p["decoder.project_in_dim.weight"])  # [B, T, in_dim] -> [B, T, C]
    if cfg.pos in ("sinusoidal", "learned"):
        pos = P.make_positions(src, pad)
        if cfg.pos == "sinusoidal":
            x = x + P.sinusoidal_embedding(pos, cfg.embed_dim, pad, dtype)
        else:
            table = p["decoder.embed_positions.weight"]
            if int(pos.max()) >= table.shape[0]:
                raise InputError("src_tokens", f"position {int(pos.max())} exceeds the learned table "
                                 f"({table.shape[0]} rows = max_target_positions + 2)",
                                 "use windows no longer than max_target_positions")
            x = x + F.embedding(pos, table, padding_idx=pad)
    if cfg.layernorm_embedding:  # fairseq transformer_decoder.py: after the positions, before dropout
        x = _layer_norm(p, "decoder.layernorm_embedding", x)

    causal = torch.ones(T, T, dtype=torch.bool).tril()  # [T, S] key j visible iff j <= i
    allowed = causal[None, None] & src.ne(pad)[:, None, None, :]  # [B, 1, T, S]
    row_ok = allowed.any(dim=-1, keepdim=True)  # [B, 1, T, 1]
    def layer_bias(n):
        """(bias [H, T, S] or None, rope tables or None) of layer n."""
        pos = cfg.layer_pos(n)
        if pos == "alibi":
            name = f"decoder.layers.{n}.self_attn.alibi_slopes"
            m = p[name] if name in p else torch.tensor(AV.layer_slopes(cfg)[n], dtype=dtype)
            factor = (1.0 if update is None else AV.warmup_factor(cfg, update)) * cfg.alibi_slope_scale
            return AV.bias(m, T, cfg.alibi_shape, cfg.alibi_clip_distance, factor), None
        if pos == "t5":
            return P.t5_bias(p["decoder.relative_attention_bias.weight"], T, cfg.t5_num_buckets,
                             cfg.t5_max_distance), None
        if pos == "rope":
            return None, P.rope_cos_sin(T, cfg.head_dim, cfg.rope_base, dtype)
        return None, None

    act = ACTIVATIONS[cfg.activation]
    for n in range(cfg.layers):
        pre = f"decoder.layers.{n}."
        r = x
        if cfg.normalize_before:
            x = _layer_norm(p, pre + "self_attn_layer_norm", x)
        bias, rope = layer_bias(n)
        a = _attention(cfg, p, pre + "self_attn.", x, allowed, row_ok, bias, rope)  # after out_proj
        if cfg.scale_heads:  # [B, T, H, D] · c_attn[h]
            B_, T_, _ = a.shape
            a = (a.view(B_, T_, cfg.heads, cfg.head_dim) * p[pre + "c_attn"].view(1, 1, -1, 1)).reshape(B_, T_, -1)
        if cfg.scale_attn:
            a = _layer_norm(p, pre + "attn_ln", a)
        x = r + a
        if not cfg.normalize_before:
            x = _layer_norm(p, pre + "self_attn_layer_norm", x)
        r = x
        if cfg.normalize_before:
            x = _layer_norm(p, pre + "final_layer_norm", x)
        h = act(F.linear(x, p[pre + "fc1.weight"], p[pre + "fc1.bias"]))
        if cfg.scale_fc:
            h = _layer_norm(p, pre + "ffn_layernorm", h)
        if cfg.scale_resids:
            r = r * p[pre + "w_resid"]
        x = r + F.linear(h, p[pre + "fc2.weight"], p[pre + "fc2.bias"])
        if not cfg.normalize_before:
            x = _layer_norm(p, pre + "final_layer_norm", x)
    if cfg.has_final_norm:
        x = _layer_norm(p, "decoder.layer_norm", x)
    if cfg.out_dim != cfg.embed_dim:
        x = F.linear(x, p["decoder.project_out_dim.weight"])  # [B, T, C] -> [B, T, out_dim]
    return x


def forward(cfg: LMConfig, params: dict, src_tokens: torch.Tensor, update=None) -> torch.Tensor:
    """-> logits [B, T, V]; with an adaptive softmax the full log-probabilities [B, T, V]."""
    x = features(cfg, params, src_tokens, update)
    if cfg.adaptive_softmax:
        B, T, C = x.shape
        return A.log_probs(cfg, params, x.reshape(B * T, C)).reshape(B, T, -1)
    W_out = params["decoder.embed_tokens.weight"] if cfg.share_io else params["decoder.output_projection.weight"]
    return x @ W_out.t()


def nll_sum(logits: torch.Tensor, target: torch.Tensor, padding_idx: int):
    """logits [B, T, V], target [B, T] -> (sum of -log p(target) over non-pad targets (nats), ntokens)."""
    V = logits.shape[-1]
    tgt = target.to(torch.int64).reshape(-1)
    loss = F.cross_entropy(logits.reshape(-1, V), tgt, ignore_index=padding_idx, reduction="sum")
    return loss, int(tgt.ne(padding_idx).sum())


def check_params(cfg: LMConfig, tensors: dict, where: str):
    """Raises InputError unless tensors hold exactly the parameters of cfg with the right shapes."""
    want = param_shapes(cfg)
    missing = [k for k in want if k not in tensors]
    extra = [k for k in tensors if k not in want]
    bad = [f"{k} {tuple(tensors[k].shape)} != {want[k]}" for k in want
           if k in tensors and tuple(tensors[k].shape) != tuple(want[k])]
    if missing or extra or bad:
        raise InputError(where, f"parameters do not match the config: missing {missing}, "
                         f"unexpected {extra}, wrong shape {bad}",
                         "names and shapes are listed in tests/parity/README.md")


def load_checkpoint(path: str):
    """-> (LMConfig, {name: tensor}) from a safetensors checkpoint with __metadata__['config']."""
    tensors, meta = load_file(path)
    if "config" not in meta:
        raise InputError(path, "no __metadata__['config']", "the checkpoint must carry its config JSON")
    try:
        d = json.loads(meta["config"])
    except json.JSONDecodeError as e:
        raise InputError(path, f"__metadata__['config'] is not JSON ({e})")
    if not isinstance(d, dict):
        raise InputError(path, "__metadata__['config'] is not a JSON object")
    cfg = LMConfig.from_fairseq(d, where=f"{path} config")
    params = {k: v for k, v in tensors.items() if k in param_shapes(cfg) or k.startswith("decoder.")}
    check_params(cfg, params, path)
    return cfg, params


class TransformerLM:
    """The oracle model: float64 (by default) leaf parameters with requires_grad."""

    def __init__(self, cfg: LMConfig, params: dict, dtype=torch.float64):
        check_params(cfg, params, "parameters")
        self.cfg = cfg
        self.params = {k: params[k].detach().to(dtype).clone().requires_grad_(True)
                       for k in param_shapes(cfg)}

    @classmethod
    def from_checkpoint(cls, path: str, dtype=torch.float64) -> "TransformerLM":
        cfg, params = load_checkpoint(path)
        return cls(cfg, params, dtype)

    def forward(self, src_tokens: torch.Tensor, update=None) -> torch.Tensor:
        return forward(self.cfg, self.params, src_tokens, update)

    def loss(self, src_tokens: torch.Tensor, target: torch.Tensor, update=None):
        """-> (summed NLL (nats) as a 0-d tensor, ntokens, logits [B, T, V]); with an adaptive
        softmax the criterion's loss (adaptive_loss: fairseq's, with its ignore_index quirk;
        cross_entropy: the exact NLL) and the full log-probabilities."""
        cfg = self.cfg
        if not cfg.adaptive_softmax:
            logits = self.forward(src_tokens, update)
            loss, ntok = nll_sum(logits, target, cfg.padding_idx)
            return loss, ntok, logits
        x = features(cfg, self.params, src_tokens, update)
        B, T, C = x.shape
        flat, tgt = x.reshape(B * T, C), target.to(torch.int64).reshape(-1)
        lp = A.log_probs(cfg, self.params, flat)
        if cfg.criterion == "adaptive_loss":
            loss, ntok = A.adaptive_loss(cfg, self.params, flat, tgt, cfg.padding_idx)
        else:
            loss = F.nll_loss(lp, tgt, ignore_index=cfg.padding_idx, reduction="sum")
            ntok = int(tgt.ne(cfg.padding_idx).sum())
        return loss, ntok, lp.reshape(B, T, -1)

    def zero_grad(self):
        for t in self.params.values():
            t.grad = None
