"""Adaptive Span (fairseq's port, examples/adaptive_span) as an independent PyTorch model in float64.

Written from REFERENCE.md §5 (5.1-5.4 the original, 5.6 what fairseq's port changes), not from
fairseq's code: attention indexes the key at each distance directly (no _skew/_unskew), the trim
and cache sizes come from the formulas of §5.2 (the same ones as
src/models/adaptive_span/span_sizes.h). It is the parity oracle for stretch's `--arch
adaptive_span` family; tests/parity/check_adaptive_span_fairseq.py checks it against real fairseq.
Legend: B batch, M block (queries), S span after trimming, C model dim, H heads, D head dim,
F ffn dim, V vocab, L attn_span, R ramp.

Parameters (fairseq 0.12.2 state-dict names, `decoder.model.` prefix):
  in_emb.weight [V, C]         out_emb.weight [V, C], out_emb.bias [V]      key_pe [1, D, L]
  layers.l.attn.proj_{query,key,val,out}.weight [C, C] (no bias)
  layers.l.attn.attn.adaptive_span._mask.current_val [H, 1, 1] (or [1] with adapt_span_layer)
  layers.l.norm1.{weight,bias} [C]   layers.l.ff.fc1.{weight [F, C], bias [F]}
  layers.l.ff.fc2.{weight [C, F], bias [C]}   layers.l.norm2.{weight,bias} [C]

One block (AdaptiveSpanLM.forward_block), per layer l with span parameter z_l:
  sizes     from z_l as it is (possibly outside [0, 1] after an optimizer step):
            max_size = clamp(ceil(max z_l · L) + R, 0, L); trim = 64·floor(min(L−1, L−max_size)/64);
            cache_size = min(L, L − trim + 64); S = L − trim
  next cache  the last rows of [cache_l ‖ h_in] (at most cache_size; fewer while the old cache is
            short), detached; h_in is layer l's input
  clamp     then z_l ← clamp(z_l, 0, 1) in place (fairseq clamps inside the forward, after trimming;
            clamp="after_step" is the original: no clamp here, clamp_spans() after each step)
  keys      the cache trimmed to its last S rows, or left-padded with zeros to S rows, then the
            block: kv = [cache (S) ‖ h (M)], query i at row S + i sees rows S + i − d, d = 1..S
  score     (q_i·k_{S+i−d} + q_i·key_pe[:, L − d]) / sqrt(D); softmax over d; then × m_z(d) =
            clamp((R + z·L − (d−1))/R, 0, 1) per head, not renormalised (renormalise=True: the
            original's p / (Σp + 1e-8)); no dropout (eval/parity mode)
  layer     post-norm: h = LN1(h + W_out·attn); h = LN2(h + fc2(relu(fc1 h))), LN eps 1e-5
Model: h = in_emb(x) (no scaling); layers; log_softmax(out_emb(h)). Loss of a block (criterion
adaptive_span_loss): Σ NLL over non-pad targets / ntokens (ntokens = B·M, the task's padded last
target included), aux = aux_loss_scaler · Σ_l L·mean(z_l) (the clamped z), total = loss + aux.
"""
import math

import torch
import torch.nn.functional as F

LN_EPS = 1e-5
GRANULARITY = 64
PREFIX = "decoder.model."


class Config:
    def __init__(self, vocab_size, d_model=256, n_head=4, d_inner=1024, n_layer=8, attn_span=1024,
                 adapt_span_ramp=32, adapt_span_init=0.0, aux_loss_scaler=2e-6, adapt_span_layer=False,
                 renormalise=False, clamp="forward"):
        assert clamp in ("forward", "after_step")
        assert d_model % n_head == 0
        self.vocab_size, self.d_model, self.n_head, self.d_inner = vocab_size, d_model, n_head, d_inner
        self.n_layer, self.attn_span, self.ramp, self.init = n_layer, attn_span, adapt_span_ramp, adapt_span_init
        self.aux_loss_scaler, self.adapt_span_layer, self.renormalise = aux_loss_scaler, adapt_span_layer, renormalise
        self.head_dim = d_model // n_head
        self.clamp = clamp  # "forward": fairseq's port; "after_step": the original (clamp_spans() after each step)


def param_shapes(cfg):
    C, V, F_, D, L = cfg.d_model, cfg.vocab_size, cfg.d_inner, cfg.head_dim, cfg.attn_span
    shapes = {"in_emb.weight": (V, C), "out_emb.weight": (V, C), "out_emb.bias": (V,), "key_pe": (1, D, L)}
    for l in range(cfg.n_layer):
        p = f"layers.{l}."
        for proj in ("query", "key", "val", "out"):
            shapes[p + f"attn.proj_{proj}.weight"] = (C, C)
        shapes[p + "attn.attn.adaptive_span._mask.current_val"] = (1,) if cfg.adapt_span_layer else (cfg.n_head, 1, 1)
        shapes[p + "norm1.weight"], shapes[p + "norm1.bias"] = (C,), (C,)
        shapes[p + "ff.fc1.weight"], shapes[p + "ff.fc1.bias"] = (F_, C), (F_,)
        shapes[p + "ff.fc2.weight"], shapes[p + "ff.fc2.bias"] = (C, F_), (C,)
        shapes[p + "norm2.weight"], shapes[p + "norm2.bias"] = (C,), (C,)
    return {PREFIX + k: v for k, v in shapes.items()}


def span_size(cfg, z):
    """clamp(ceil(z·L) + R, 0, L) for a python float z (max or mean of a layer's z)."""
    return max(0, min(cfg.attn_span, math.ceil(z * cfg.attn_span) + cfg.ramp))


def trim_len(cfg, max_size):
    L = cfg.attn_span
    return GRANULARITY * (min(L - 1, L - max_size) // GRANULARITY)


def cache_size(cfg, trim):
    return min(cfg.attn_span, cfg.attn_span - trim + GRANULARITY)


def soft_mask(cfg, z, S):
    """m_z(d) for d = 1..S: [H or 1, S] (distance d in column d − 1)."""
    d = torch.arange(1, S + 1, dtype=torch.float64)
    zz = z.reshape(-1, 1)
    return ((cfg.ramp + zz * cfg.attn_span - (d - 1)) / cfg.ramp).clamp(0, 1)


def attention(cfg, q, kv_k, kv_v, key_pe, z, S):
    """q [B, H, M, D]; kv_k, kv_v [B, H, S+M, D]; key_pe [D, L]; z [H or 1]. Returns [B, H, M, D]."""
    B, H, M, D = q.shape
    L = cfg.attn_span
    d = torch.arange(1, S + 1)                                  # [S]
    rows = torch.arange(M).reshape(M, 1) + S - d.reshape(1, S)  # [M, S]: key row of (i, d)
    k_at = kv_k[:, :, rows, :]                                  # [B, H, M, S, D]
    v_at = kv_v[:, :, rows, :]
    content = (q.unsqueeze(3) * k_at).sum(-1)                   # [B, H, M, S]
    pe = key_pe[:, L - d]                                       # [D, S]: column L − d is distance d
    position = torch.einsum("bhmd,ds->bhms", q, pe)
    p = torch.softmax((content + position) / math.sqrt(D), dim=-1)
    mask = soft_mask(cfg, z, S)                                 # [H or 1, S]
    p = p * mask.reshape(1, mask.shape[0], 1, S)
    if cfg.renormalise:
        p = p / (p.sum(-1, keepdim=True) + 1e-8)
    return (p.unsqueeze(-1) * v_at).sum(3)                      # [B, H, M, D]


class AdaptiveSpanLM:
    """params: {state-dict name: float64 leaf tensor}; the caches persist across blocks."""

    def __init__(self, cfg, params):
        self.cfg = cfg
        shapes = param_shapes(cfg)
        missing = sorted(set(shapes) - set(params))
        extra = sorted(set(params) - set(shapes))
        if missing or extra:
            raise ValueError(f"parameters: missing {missing[:5]}, unexpected {extra[:5]}")
        for k, s in shapes.items():
            if tuple(params[k].shape) != s:
                raise ValueError(f"{k}: shape {tuple(params[k].shape)}, expected {s}")
        self.p = params
        self.caches = None
        self.last_sizes = []

    def z(self, l):
        return self.p[PREFIX + f"layers.{l}.attn.attn.adaptive_span._mask.current_val"]

    def init_caches(self, B):
        cfg = self.cfg
        self.caches = []
        for l in range(cfg.n_layer):
            size = cache_size(cfg, trim_len(cfg, span_size(cfg, float(self.z(l).max()))))
            self.caches.append(torch.zeros(B, size, cfg.d_model, dtype=torch.float64))

    def forward_block(self, x):
        """x [B, M] token ids -> log-probs [B, M, V]; advances the caches."""
        cfg, P = self.cfg, self.p
        B, M = x.shape
        H, D, C = cfg.n_head, cfg.head_dim, cfg.d_model
        if self.caches is None:
            self.init_caches(B)
        h = P[PREFIX + "in_emb.weight"][x]                           # [B, M, C]
        key_pe = P[PREFIX + "key_pe"][0]                              # [D, L]
        self.last_sizes = []
        for l in range(cfg.n_layer):
            pre = PREFIX + f"layers.{l}."
            z = self.z(l)
            # Sizes from z as it is, before the clamp.
            trim = trim_len(cfg, span_size(cfg, float(z.max())))
            size = cache_size(cfg, trim)
            S = cfg.attn_span - trim
            cache = self.caches[l]                                    # [B, rows, C]
            self.caches[l] = torch.cat([cache, h], 1)[:, -size:].detach() if size > M else h[:, -size:].detach()
            if cache.shape[1] >= S:
                kept = cache[:, cache.shape[1] - S:]
            else:
                kept = torch.cat([torch.zeros(B, S - cache.shape[1], C, dtype=h.dtype), cache], 1)
            self.last_sizes.append({"trim_len": trim, "cache_size": size, "span": S, "cache_rows_in": cache.shape[1]})
            if cfg.clamp == "forward":
                with torch.no_grad():
                    z.clamp_(0, 1)
            kv = torch.cat([kept, h], 1)                              # [B, S+M, C]

            def heads(t):                                             # [B, T, C] -> [B, H, T, D]
                return t.reshape(B, t.shape[1], H, D).transpose(1, 2)

            q = heads(h @ P[pre + "attn.proj_query.weight"].T)
            k = heads(kv @ P[pre + "attn.proj_key.weight"].T)
            v = heads(kv @ P[pre + "attn.proj_val.weight"].T)
            zz = z.reshape(-1)
            o = attention(cfg, q, k, v, key_pe, zz, S)                # [B, H, M, D]
            o = o.transpose(1, 2).reshape(B, M, C) @ P[pre + "attn.proj_out.weight"].T
            h = F.layer_norm(h + o, (C,), P[pre + "norm1.weight"], P[pre + "norm1.bias"], LN_EPS)
            ff = F.relu(h @ P[pre + "ff.fc1.weight"].T + P[pre + "ff.fc1.bias"])
            ff = ff @ P[pre + "ff.fc2.weight"].T + P[pre + "ff.fc2.bias"]
            h = F.layer_norm(h + ff, (C,), P[pre + "norm2.weight"], P[pre + "norm2.bias"], LN_EPS)
        logits = h @ P[PREFIX + "out_emb.weight"].T + P[PREFIX + "out_emb.bias"]
        return torch.log_softmax(logits, -1)

    def aux_loss(self):
        cfg = self.cfg
        return cfg.aux_loss_scaler * sum(cfg.attn_span * self.z(l).mean() for l in range(cfg.n_layer))

    def loss(self, lprobs, target, pad):
        """(nll / ntokens, aux, total) for one block; ntokens = B·M."""
        nll = F.nll_loss(lprobs.reshape(-1, lprobs.shape[-1]), target.reshape(-1), ignore_index=pad, reduction="sum")
        loss = nll / target.numel()
        aux = self.aux_loss()
        return loss, aux, loss + aux

    def adagrad_step(self, state, lr, clip):
        """One update of every parameter by §5.5's AdagradWithGradClip (weight decay 0, lr_decay 0):
        per tensor clr = lr, scaled by clip/(‖g‖ + 1e-10) when ‖g‖ > clip; sum += g² (unclipped);
        p −= clr·g/(sqrt(sum) + 1e-10). state: {name: sum tensor}, filled on first use."""
        with torch.no_grad():
            for k, p in self.p.items():
                if p.grad is None:
                    continue
                g = p.grad
                clr = lr
                norm = float(g.norm())
                if clip > 0 and norm > clip:
                    clr = clr * clip / (norm + 1e-10)
                s = state.setdefault(k, torch.zeros_like(p))
                s += g * g
                p -= clr * g / (s.sqrt() + 1e-10)

    def clamp_spans(self):
        """The original's clamp_param() on every layer, called after each optimizer step (§5.1)."""
        with torch.no_grad():
            for l in range(self.cfg.n_layer):
                self.z(l).clamp_(0, 1)

    def spans(self):
        """(avg_span, max_span) as fairseq logs them: avg over layers of the mean-z size, max over layers."""
        cfg = self.cfg
        avg = sum(span_size(cfg, float(self.z(l).float().mean())) for l in range(cfg.n_layer)) / cfg.n_layer
        mx = max(span_size(cfg, float(self.z(l).max())) for l in range(cfg.n_layer))
        return avg, mx
