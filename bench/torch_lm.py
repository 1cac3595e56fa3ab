#!/usr/bin/env python3
"""PyTorch anchors for stretch's benchmarks: a fairseq-style transformer_lm in torch (float32).

The model is what /work/shared/MEASURED.md measured: 4 layers, d = 256, 4 heads, FFN 1024,
pre-norm with a final LayerNorm, untied output projection, dropout 0.1 (attention and
activation dropout 0, fairseq's defaults), attention through F.multi_head_attention_forward
with separate q/k/v weights as fairseq's MultiheadAttention calls it, and for ALiBi the fork's
materialised mask [B*H, T, T] = causal(-inf above the diagonal) + m_h * j, built once per shape
(fairseq's buffered_future_mask). --pos sinusoidal|learned|none use fairseq's positions and a
[T, T] causal mask.

  train    tokens/s of full training steps (forward, summed cross-entropy, backward, grads /
           ntokens, clip 0.1, Nesterov SGD step) at --batch B x --tokens-per-sample T
  eval     tokens/s and peak RSS of scoring (no grad, B = 1, full log_softmax over V as
           fairseq's scorer does) for each of --lengths (each length in a fresh process so
           the peak RSS is that length's own)
  sliding  scored tokens/s of stride-1 sliding-window evaluation (--context-window L-1): one
           forward of length L per scored token, the output layer over all L positions as
           fairseq does (--last-only: the output layer for the last position alone)

Each measurement prints one JSON line, with tokens per wall second and per CPU second of the
process (on a shared host the second is the steadier figure for 1 thread). The allocator and BLAS matter (MEASURED.md: Debian's
pthread OpenBLAS + glibc malloc is 1.5-3x slower): train and sliding re-execute the script
with tcmalloc preloaded when libtcmalloc_minimal is installed (--malloc system to skip). eval
keeps glibc malloc: it scores at the same speed, and glibc returns large freed blocks to the OS,
so VmHWM is the live peak; tcmalloc keeps freed spans resident and reports ~1.5x (2.5 GB instead
of 1.7 GB at T = 4096). The BLAS library loaded is reported too (scripts/setup.sh installs the
OpenMP OpenBLAS, which becomes the system libblas.so.3).

The model class FairseqStyleLM doubles as a second, structurally different implementation
that tests/parity/test_oracle_selftest.py checks against the oracle on the same weights.

Example (the MEASURED.md rows):
  build/pyenv/bin/python bench/torch_lm.py train --threads 2 --vocab 33280 --tokens-per-sample 512
  build/pyenv/bin/python bench/torch_lm.py eval --threads 2 --lengths 512,1024,2048,4096,8192
  build/pyenv/bin/python bench/torch_lm.py sliding --threads 2 --tokens-per-sample 512
"""

import argparse
import json
import math
import os
import subprocess
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

PAD = 1
TCMALLOC = "/usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4"


def alibi_slopes(n):
    """REFERENCE §1.1 (kept separate from the oracle's so the two implementations stay independent)."""
    def p2(k):
        return [2.0 ** (-8.0 * (h + 1) / k) for h in range(k)]
    if n & (n - 1) == 0:
        return p2(n)
    p = 1 << (n.bit_length() - 1)
    return p2(p) + p2(2 * p)[0::2][: n - p]


def sinusoidal_table(num, C, padding_idx):
    """fairseq SinusoidalPositionalEmbedding.get_embedding: [num, C], row padding_idx zero (kept
    in float64 and cast at use, so the double-precision cross-check is exact)."""
    half = C // 2
    f = torch.exp(torch.arange(half, dtype=torch.float64) * -(math.log(10000.0) / (half - 1)))
    ang = torch.arange(num, dtype=torch.float64)[:, None] * f[None, :]
    emb = torch.cat([torch.sin(ang), torch.cos(ang)], dim=1)
    if C % 2:
        emb = torch.cat([emb, torch.zeros(num, 1, dtype=torch.float64)], dim=1)
    emb[padding_idx] = 0
    return emb


class Layer(nn.Module):
    """fairseq TransformerDecoderLayer, pre-norm, no encoder attention."""

    def __init__(self, C, H, F_, dropout, normalize_before, attn="mha"):
        super().__init__()
        self.H, self.dropout, self.normalize_before, self.attn = H, dropout, normalize_before, attn
        self.q_proj, self.k_proj, self.v_proj, self.out_proj = (nn.Linear(C, C) for _ in range(4))
        self.self_attn_layer_norm = nn.LayerNorm(C, eps=1e-5)
        self.fc1, self.fc2 = nn.Linear(C, F_), nn.Linear(F_, C)
        self.final_layer_norm = nn.LayerNorm(C, eps=1e-5)
        self.act = F.relu

    def attention_2x(self, x, bias):
        """PyTorch 2.x attention on x [T, B, C] (no key padding: the benchmarks' tokens have none).
        sdpa: F.scaled_dot_product_attention with the float mask bias [1, H, T, T] (causal −inf plus
        ALiBi −m·(i−j)); flex: flex_attention (compiled) with an ALiBi score_mod and a causal
        block mask, bias = (score_mod, block_mask)."""
        T, B, C = x.shape
        D = C // self.H

        def heads(t):  # [T, B, C] -> [B, H, T, D]
            return t.view(T, B, self.H, D).permute(1, 2, 0, 3)
        q, k, v = heads(self.q_proj(x)), heads(self.k_proj(x)), heads(self.v_proj(x))
        if self.attn == "sdpa":
            a = F.scaled_dot_product_attention(q, k, v, attn_mask=bias)
        else:
            score_mod, block_mask = bias
            a = flex_attention_compiled()(q, k, v, score_mod=score_mod, block_mask=block_mask)
        return self.out_proj(a.permute(2, 0, 1, 3).reshape(T, B, C))

    def forward(self, x, attn_mask, key_padding_mask):  # x [T, B, C]
        r = x
        if self.normalize_before:
            x = self.self_attn_layer_norm(x)
        C = x.shape[-1]
        if self.attn != "mha":
            x = self.attention_2x(x, attn_mask)
        else:
            x, _ = F.multi_head_attention_forward(
                x, x, x, C, self.H, torch.empty([0]),
                torch.cat((self.q_proj.bias, self.k_proj.bias, self.v_proj.bias)),
                None, None, False, 0.0, self.out_proj.weight, self.out_proj.bias,
                training=self.training, key_padding_mask=key_padding_mask, need_weights=False,
                attn_mask=attn_mask, use_separate_proj_weight=True, q_proj_weight=self.q_proj.weight,
                k_proj_weight=self.k_proj.weight, v_proj_weight=self.v_proj.weight)
        x = r + F.dropout(x, self.dropout, self.training)
        if not self.normalize_before:
            x = self.self_attn_layer_norm(x)
        r = x
        if self.normalize_before:
            x = self.final_layer_norm(x)
        x = self.fc2(self.act(self.fc1(x)))
        x = r + F.dropout(x, self.dropout, self.training)
        if not self.normalize_before:
            x = self.final_layer_norm(x)
        return x


class FairseqStyleLM(nn.Module):
    """fairseq transformer_lm decoder. src [B, T] -> logits [B, T, V]."""

    def __init__(self, V, C=256, L=4, H=4, F_=1024, pos="alibi", dropout=0.1, max_positions=8192,
                 normalize_before=True, final_norm=True, tied=False, attn="mha"):
        super().__init__()
        self.C, self.H, self.pos, self.dropout, self.attn = C, H, pos, dropout, attn
        self.embed_tokens = nn.Embedding(V, C, padding_idx=PAD)
        nn.init.normal_(self.embed_tokens.weight, 0, C ** -0.5)
        if pos == "learned":
            self.embed_positions = nn.Embedding(max_positions + PAD + 1, C, padding_idx=PAD)
        elif pos == "sinusoidal":
            self.register_buffer("sin_table", sinusoidal_table(max_positions + PAD + 1, C, PAD), persistent=False)
        self.layers = nn.ModuleList(Layer(C, H, F_, dropout, normalize_before, attn) for _ in range(L))
        self.layer_norm = nn.LayerNorm(C, eps=1e-5) if (normalize_before and final_norm) else None
        self.output_projection = None if tied else nn.Linear(C, V, bias=False)
        self.slopes = torch.tensor(alibi_slopes(H))
        self._mask, self._mask_key = None, None

    def future_mask(self, B, T, dtype):
        """fork-style [B*H, T, T] (alibi) or [T, T] causal mask, cached per (B, T)."""
        if self.attn != "mha":
            return self.mask_2x(T, dtype)
        if self._mask_key != (B, T, dtype):
            causal = torch.triu(torch.full((T, T), float("-inf")), 1)
            if self.pos == "alibi":
                alibi = self.slopes[:, None, None] * torch.arange(T, dtype=torch.float)[None, None, :]
                mask = (causal[None] + alibi).repeat(B, 1, 1)  # row b*H + h uses slope h
            else:
                mask = causal
            self._mask, self._mask_key = mask.to(dtype), (B, T, dtype)
        return self._mask

    def mask_2x(self, T, dtype):
        """sdpa: [1, H, T, T] float mask, causal −inf + ALiBi −m·(i−j) (a proper distance penalty;
        the fork's +m·j differs by a per-row constant); flex: (score_mod, causal block mask)."""
        if self._mask_key == ("2x", T, dtype):
            return self._mask
        if self.attn == "sdpa":
            i = torch.arange(T, dtype=torch.float)
            dist = (i[:, None] - i[None, :])  # i - j
            causal = torch.triu(torch.full((T, T), float("-inf")), 1)
            slopes = self.slopes if self.pos == "alibi" else torch.zeros(self.H)
            mask = (causal[None] - slopes[:, None, None] * dist[None]).unsqueeze(0).to(dtype)
        else:
            from torch.nn.attention.flex_attention import create_block_mask
            slopes = self.slopes if self.pos == "alibi" else torch.zeros(self.H)

            def alibi(score, b, h, q_idx, kv_idx):
                return score - slopes[h] * (q_idx - kv_idx)

            def causal(b, h, q_idx, kv_idx):
                return q_idx >= kv_idx
            mask = (alibi, create_block_mask(causal, None, None, T, T, device="cpu"))
        self._mask, self._mask_key = mask, ("2x", T, dtype)
        return mask

    def features(self, src):
        B, T = src.shape
        x = math.sqrt(self.C) * self.embed_tokens(src)
        if self.pos in ("sinusoidal", "learned"):
            nonpad = src.ne(PAD).long()
            positions = torch.cumsum(nonpad, dim=1) * nonpad + PAD
            if self.pos == "learned":
                x = x + self.embed_positions(positions)
            else:
                x = x + self.sin_table.index_select(0, positions.view(-1)).view(B, T, -1).to(x.dtype)
        x = F.dropout(x, self.dropout, self.training)
        kpm = src.eq(PAD)
        kpm = kpm if kpm.any() else None
        mask = self.future_mask(B, T, x.dtype)
        x = x.transpose(0, 1)  # [T, B, C]
        for layer in self.layers:
            x = layer(x, mask, kpm)
        if self.layer_norm is not None:
            x = self.layer_norm(x)
        return x.transpose(0, 1)  # [B, T, C]

    def project(self, h):
        W = self.embed_tokens.weight if self.output_projection is None else self.output_projection.weight
        return F.linear(h, W)

    def forward(self, src):
        return self.project(self.features(src))

    def load_fairseq_state(self, params):
        """Load {fairseq name: tensor} (the parity checkpoint names) into this module."""
        own = dict(self.named_parameters())
        with torch.no_grad():
            for name, t in params.items():
                key = name[len("decoder."):]
                key = key.replace("self_attn.", "")
                if key not in own:
                    raise KeyError(f"{name}: no such parameter in FairseqStyleLM")
                own[key].copy_(t)


# ---------------------------------------------------------------------------------------------

_FLEX = None


def flex_attention_compiled():
    global _FLEX
    if _FLEX is None:
        from torch.nn.attention.flex_attention import flex_attention
        _FLEX = torch.compile(flex_attention, dynamic=False)
    return _FLEX


def peak_rss_mb():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024.0
    return float("nan")


def loaded_lib(substrs):
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                path = line.split()[-1]
                if any(s in path for s in substrs):
                    return path
    except OSError:
        pass
    return None


def autocast(args):
    """--autocast bf16: torch.autocast("cpu", dtype=torch.bfloat16) around the model's forward (its
    matrix products in bf16, what autocast keeps in fp32 in fp32); the loss or log-softmax is taken
    in fp32 on the upcast logits, as a bf16 user of PyTorch would."""
    return torch.autocast("cpu", dtype=torch.bfloat16, enabled=args.autocast == "bf16")


def env_info(args):
    return {"torch": torch.__version__, "attn": args.attn, "threads": torch.get_num_threads(),
            "compiled": bool(getattr(args, "compile", False)),
            "precision": "bf16-autocast" if args.autocast == "bf16" else "fp32",
            "blas": loaded_lib(["libopenblas", "libblas", "libmkl", "libblis"]),
            "malloc": "tcmalloc" if loaded_lib(["tcmalloc"]) else "system"}


def emit(rec):
    print(json.dumps(rec), flush=True)


def make_model(args, max_positions):
    torch.manual_seed(args.seed)
    return FairseqStyleLM(args.vocab, C=args.embed_dim, L=args.layers, H=args.heads, F_=args.ffn_dim,
                          pos=args.pos, dropout=args.dropout, max_positions=max_positions, attn=args.attn)


def run_train(args):
    T, B = args.tokens_per_sample, args.batch
    m = make_model(args, T)
    m.train()
    fwd = torch.compile(m) if args.compile else m  # --compile: inductor, forward and backward (AOTAutograd)
    opt = torch.optim.SGD(m.parameters(), lr=1e-3, momentum=0.99, nesterov=True)
    g = torch.Generator().manual_seed(args.seed)
    src = torch.randint(4, args.vocab, (B, T), generator=g)
    tgt = torch.randint(4, args.vocab, (B, T), generator=g)

    def step():
        opt.zero_grad(set_to_none=True)
        with autocast(args):
            logits = fwd(src)
        loss = F.cross_entropy(logits.float().view(-1, args.vocab), tgt.view(-1), ignore_index=PAD, reduction="sum")
        loss.backward()
        for p in m.parameters():
            p.grad.mul_(1.0 / (B * T))
        torch.nn.utils.clip_grad_norm_(m.parameters(), 0.1)
        opt.step()
        return loss.item()

    for _ in range(args.warmup):
        step()
    t0, c0 = time.perf_counter(), time.process_time()
    last_loss = float("nan")
    for _ in range(args.steps):
        last_loss = step()
    dt, cpu = (time.perf_counter() - t0) / args.steps, (time.process_time() - c0) / args.steps
    emit({"bench": "torch_lm", "mode": "train", "pos": args.pos, "B": B, "T": T, "V": args.vocab,
          "tokens_per_s": round(B * T / dt, 1), "tokens_per_cpu_s": round(B * T / cpu, 1),
          "step_s": round(dt, 4), "steps": args.steps, "loss": last_loss,
          "openblas_coretype": os.environ.get("OPENBLAS_CORETYPE", "unset"), **env_info(args)})


def run_eval_one(args, T):
    m = make_model(args, T)
    m.eval()
    g = torch.Generator().manual_seed(args.seed)
    src = torch.randint(4, args.vocab, (1, T), generator=g)
    tgt = torch.randint(4, args.vocab, (1, T), generator=g)

    def score():
        with torch.no_grad():
            with autocast(args):
                h = m(src)
            lp = torch.log_softmax(h.float(), dim=-1)
            return lp.gather(-1, tgt[..., None]).sum()

    for _ in range(args.warmup):
        score()
    t0, c0 = time.perf_counter(), time.process_time()
    nll = float("nan")
    for _ in range(args.steps):
        nll = -float(score())
    dt, cpu = (time.perf_counter() - t0) / args.steps, (time.process_time() - c0) / args.steps
    emit({"bench": "torch_lm", "mode": "eval", "pos": args.pos, "B": 1, "T": T, "V": args.vocab,
          "tokens_per_s": round(T / dt, 1), "tokens_per_cpu_s": round(T / cpu, 1), "pass_s": round(dt, 4),
          "peak_rss_mb": round(peak_rss_mb(), 1), "loss": nll,
          "steps": args.steps, "openblas_coretype": os.environ.get("OPENBLAS_CORETYPE", "unset"), **env_info(args)})


def run_eval(args):
    lengths = sorted(int(x) for x in args.lengths.split(","))
    if len(lengths) == 1 or args.no_isolate:
        for T in lengths:
            run_eval_one(args, T)
        return
    for T in lengths:  # a fresh process per length: VmHWM is then this length's own peak
        argv = [a for a in sys.argv[1:]]
        cmd = [sys.executable, os.path.abspath(__file__)] + argv + ["--lengths", str(T), "--no-isolate"]
        subprocess.run(cmd, check=True)


def run_sliding(args):
    L = args.tokens_per_sample
    m = make_model(args, L)
    m.eval()
    g = torch.Generator().manual_seed(args.seed)
    stream = torch.randint(4, args.vocab, (1, L + args.steps + args.warmup), generator=g)

    def score_one(k):  # the window ending at stream position L - 1 + k scores its last token
        with torch.no_grad():
            src = stream[:, k:k + L]
            if args.last_only:
                lp = torch.log_softmax(m.project(m.features(src)[:, -1]), dim=-1)
            else:
                lp = torch.log_softmax(m(src), dim=-1)[:, -1]
            return lp[0, int(stream[0, k + L - 1])]

    for k in range(args.warmup):
        score_one(k)
    t0, c0 = time.perf_counter(), time.process_time()
    for k in range(args.warmup, args.warmup + args.steps):
        score_one(k)
    dt, cpu = time.perf_counter() - t0, time.process_time() - c0
    emit({"bench": "torch_lm", "mode": "sliding", "pos": args.pos, "L": L, "context_window": L - 1,
          "V": args.vocab, "last_only": args.last_only, "scored_tokens_per_s": round(args.steps / dt, 2),
          "scored_tokens_per_cpu_s": round(args.steps / cpu, 2),
          "scored": args.steps, "peak_rss_mb": round(peak_rss_mb(), 1), **env_info(args)})


def main():
    ap = argparse.ArgumentParser(description="PyTorch anchors for stretch's benchmarks (one JSON line each)")
    ap.add_argument("mode", choices=("train", "eval", "sliding"))
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--pos", choices=("alibi", "sinusoidal", "learned", "none"), default="alibi")
    ap.add_argument("--vocab", type=int, default=33280)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--tokens-per-sample", type=int, default=512)
    ap.add_argument("--lengths", default="512,1024,2048,4096,8192", help="eval: comma-separated T")
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--embed-dim", type=int, default=256)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--ffn-dim", type=int, default=1024)
    ap.add_argument("--dropout", type=float, default=0.1)
    ap.add_argument("--attn", choices=("mha", "sdpa", "flex"), default="mha",
                    help="mha: fairseq's F.multi_head_attention_forward with the fork's materialised mask "
                    "(any torch); sdpa: F.scaled_dot_product_attention with the ALiBi bias as its float mask; "
                    "flex: compiled flex_attention with an ALiBi score_mod (torch >= 2.5)")
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--steps", type=int, default=5, help="timed steps / passes / scored tokens")
    ap.add_argument("--last-only", action="store_true", help="sliding: output layer for the last position only")
    ap.add_argument("--malloc", choices=("auto", "tcmalloc", "system"), default="auto",
                    help="auto: tcmalloc for train/sliding, system (glibc) for eval (see the docstring)")
    ap.add_argument("--no-isolate", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--compile", action="store_true",
                    help="train: the model under torch.compile (inductor; torch >= 2), its first steps compiling")
    ap.add_argument("--autocast", choices=("none", "bf16"), default="none",
                    help="bf16: the forward under torch.autocast('cpu', dtype=torch.bfloat16)")
    args = ap.parse_args()
    if args.compile and (args.mode != "train" or not hasattr(torch, "compile")):
        ap.error(f"--compile: train mode with torch >= 2 only (this is {args.mode} on torch {torch.__version__})")
    if args.malloc == "auto":
        args.malloc = "system" if args.mode == "eval" else "tcmalloc"
    if args.malloc == "tcmalloc" and "tcmalloc" not in os.environ.get("LD_PRELOAD", "") and os.path.exists(TCMALLOC):
        env = dict(os.environ, LD_PRELOAD=(TCMALLOC + " " + os.environ.get("LD_PRELOAD", "")).strip())
        os.execve(sys.executable, [sys.executable, os.path.abspath(__file__)] + sys.argv[1:], env)
    torch.set_num_threads(args.threads)
    {"train": run_train, "eval": run_eval, "sliding": run_sliding}[args.mode](args)


if __name__ == "__main__":
    main()
