#!/usr/bin/env python3
"""PyTorch anchors of bench/xl_vs_torch.py: training steps with an XL-style memory (float32).

  hf_xl      HuggingFace transformers' TransfoXLLMHeadModel (4.30.2 in build/fairseq-venv, on its
             torch), built as fairseq's transformer_xl builds it (d_embed = d_model, div_val 1, no
             cutoffs below V: the full softmax over the tied table), trained as fairseq trains it:
             the model returns log-probs [B, T, V] (labels None), summed NLL of the targets,
             backward, grads / ntokens, clip 0.25, Adam; `mems` carried across steps (HF detaches
             them).
  alibi_mem  a post-norm fairseq-style transformer_lm with ALiBi and the same memory (what
             `stretch train --arch transformer_lm --pos alibi --post-norm --mem-len M` runs): per
             layer the keys/values of [mem_l ‖ x] (mem_l: layer l's inputs of the last M tokens,
             detached), the bias −m_h·(i + M − j) over absolute positions and the causal mask as
             one float mask [B·H, T, M + T] for F.multi_head_attention_forward; scaled embedding,
             no positions, untied output, no final LayerNorm (post-norm), the same loss and step.

Tokens are random ids in [4, V) from a seeded generator, the same every step. Every step is
timed; one JSON line: the median step time after --warmup, tokens/s = B·T / median, the last
loss (so an OPENBLAS_CORETYPE variant can be checked to compute the same numbers).
Usage (in build/fairseq-venv):
  python bench/torch_xl.py hf_xl --threads 1 --layers 2 --d-model 256 --heads 4 --d-inner 1024 \
      --tokens-per-sample 512 --mem-len 512 --batch 2 --vocab 204
"""
import argparse
import json
import os
import statistics
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


def alibi_slopes(n):
    """REFERENCE §1.1 (written here again so this anchor depends on nothing of stretch)."""
    def p2(k):
        return [2.0 ** (-8.0 * (h + 1) / k) for h in range(k)]
    if n & (n - 1) == 0:
        return p2(n)
    p = 1 << (n.bit_length() - 1)
    return p2(p) + p2(2 * p)[0::2][: n - p]


class AlibiMemLayer(nn.Module):
    def __init__(self, C, H, F_, dropout):
        super().__init__()
        self.H, self.dropout = H, dropout
        self.q_proj, self.k_proj, self.v_proj, self.out_proj = (nn.Linear(C, C) for _ in range(4))
        self.self_attn_layer_norm = nn.LayerNorm(C)
        self.fc1, self.fc2 = nn.Linear(C, F_), nn.Linear(F_, C)
        self.final_layer_norm = nn.LayerNorm(C)

    def forward(self, x, mem, mask):  # x [T, B, C], mem [M, B, C] or None, mask [B·H, T, M + T]
        kv = x if mem is None else torch.cat([mem, x], 0)
        C = x.shape[-1]
        a, _ = F.multi_head_attention_forward(
            x, kv, kv, C, self.H, torch.empty([0]),
            torch.cat((self.q_proj.bias, self.k_proj.bias, self.v_proj.bias)), None, None, False, 0.0,
            self.out_proj.weight, self.out_proj.bias, training=self.training, need_weights=False, attn_mask=mask,
            use_separate_proj_weight=True, q_proj_weight=self.q_proj.weight, k_proj_weight=self.k_proj.weight,
            v_proj_weight=self.v_proj.weight)
        x = self.self_attn_layer_norm(x + F.dropout(a, self.dropout, self.training))
        h = self.fc2(F.relu(self.fc1(x)))
        return self.final_layer_norm(x + F.dropout(h, self.dropout, self.training))


class AlibiMemLM(nn.Module):
    """src [B, T] with mems [L] of [M, B, C] -> (log-probs [B, T, V], new mems)."""

    def __init__(self, V, C, L, H, F_, mem_len, dropout):
        super().__init__()
        self.C, self.H, self.mem_len, self.dropout = C, H, mem_len, dropout
        self.embed_tokens = nn.Embedding(V, C, padding_idx=1)
        nn.init.normal_(self.embed_tokens.weight, 0, C ** -0.5)
        self.layers = nn.ModuleList(AlibiMemLayer(C, H, F_, dropout) for _ in range(L))
        self.output_projection = nn.Linear(C, V, bias=False)
        self.slopes = torch.tensor(alibi_slopes(H))
        self._masks = {}

    def mask(self, B, T, M):
        key = (B, T, M)
        if key not in self._masks:  # query i sits at absolute position M + i; key j at j
            i = torch.arange(T)[:, None] + M
            j = torch.arange(M + T)[None, :]
            dist = (i - j).float()
            bias = -self.slopes[:, None, None] * dist[None]  # [H, T, M + T]
            bias = bias.masked_fill((j > i)[None], float("-inf"))
            self._masks[key] = bias.repeat(B, 1, 1)  # [B·H, T, M + T], row b·H + h
        return self._masks[key]

    def forward(self, src, mems):
        B, T = src.shape
        x = F.dropout(self.embed_tokens(src) * self.C ** 0.5, self.dropout, self.training).transpose(0, 1)
        M = 0 if mems is None else mems[0].shape[0]
        mask = self.mask(B, T, M)
        inputs = []
        for l, layer in enumerate(self.layers):
            inputs.append(x.detach())
            x = layer(x, None if mems is None else mems[l], mask)
        new = [(h if mems is None else torch.cat([mems[l], h], 0))[-self.mem_len:] for l, h in enumerate(inputs)]
        return torch.log_softmax(self.output_projection(x.transpose(0, 1)), dim=-1), new


def make(args):
    if args.model == "hf_xl":
        from transformers import TransfoXLConfig, TransfoXLLMHeadModel
        cfg = TransfoXLConfig(vocab_size=args.vocab, cutoffs=[], d_model=args.d_model, d_embed=args.d_model,
                              n_head=args.heads, d_head=args.d_model // args.heads, d_inner=args.d_inner, div_val=1,
                              n_layer=args.layers, mem_len=args.mem_len, clamp_len=-1, same_length=False,
                              dropout=args.dropout, dropatt=0.0, tgt_len=args.tokens_per_sample)
        m = TransfoXLLMHeadModel(cfg)

        def forward(src, mems):
            out = m(input_ids=src, mems=mems, return_dict=False)
            return out[0], out[1]
        return m, forward
    m = AlibiMemLM(args.vocab, args.d_model, args.layers, args.heads, args.d_inner, args.mem_len, args.dropout)
    return m, m


def main():
    ap = argparse.ArgumentParser(description="PyTorch XL / ALiBi+memory training anchors (one JSON line)")
    ap.add_argument("model", choices=("hf_xl", "alibi_mem"))
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--d-model", type=int, default=256)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--d-inner", type=int, default=1024)
    ap.add_argument("--tokens-per-sample", type=int, default=512)
    ap.add_argument("--mem-len", type=int, default=512)
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("--vocab", type=int, default=204)
    ap.add_argument("--dropout", type=float, default=0.1)
    ap.add_argument("--lr", type=float, default=0.00025)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    m, forward = make(args)
    m.train()
    opt = torch.optim.Adam(m.parameters(), lr=args.lr)
    B, T = args.batch, args.tokens_per_sample
    g = torch.Generator().manual_seed(args.seed)
    src = torch.randint(4, args.vocab, (B, T), generator=g)
    tgt = torch.randint(4, args.vocab, (B, T), generator=g)
    mems = None
    times, loss = [], float("nan")
    for step in range(args.warmup + args.steps):
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        lprobs, mems = forward(src, mems)
        nll = F.nll_loss(lprobs.reshape(-1, lprobs.shape[-1]), tgt.reshape(-1), ignore_index=1, reduction="sum")
        nll.backward()
        for p in m.parameters():
            if p.grad is not None:
                p.grad.mul_(1.0 / (B * T))
        torch.nn.utils.clip_grad_norm_(m.parameters(), 0.25)
        opt.step()
        loss = nll.item() / (B * T)
        if step >= args.warmup:
            times.append(time.perf_counter() - t0)
    med = statistics.median(times)
    print(json.dumps({"bench": "torch_xl", "model": args.model, "threads": args.threads, "B": B, "T": T,
                      "M": args.mem_len, "V": args.vocab, "step_s": round(med, 4), "tokens_per_s": round(B * T / med, 1),
                      "loss": loss, "params": sum(p.numel() for p in m.parameters()), "torch": torch.__version__,
                      "openblas_coretype": os.environ.get("OPENBLAS_CORETYPE", "unset")}))


if __name__ == "__main__":
    main()
