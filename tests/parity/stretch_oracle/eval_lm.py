"""fairseq-eval-lm protocol, written from the prose of REFERENCE.md §4.3-4.4 (tested against both
of its tables). Token streams are Python lists of ints; pad = 1, eos = 2.

  lm_blocks(stream, L)                      [(source, target)]: blocks of L targets, source =
                                            the stream shifted right by one with eos first (§4.3)
  context_window_samples(stream, l, c)      [(input_row, target_row, start)] as
                                            LMContextWindowDataset.collater builds them (§4.4.4);
                                            c = 0 gives the plain blocks with start 0
  score(samples, log_probs)                 (score_sum in nats, count) (§4.4.5-6)
  eval_lm(stream, log_probs, l, c)          EvalResult(score_sum, count, loss_base2, ppl)
  model_log_probs(model)                    log_probs callable from a TransformerLM

log_probs(input_row) -> tensor [W, V] of log-probabilities for one window (a full forward pass
with no state), exactly what the scorer gathers from.
"""

import math
from dataclasses import dataclass

import torch

PAD, EOS = 1, 2


def lm_blocks(stream, L: int, eos: int = EOS):
    """Blocks [kL, min((k+1)L, N)); target_k = S[start:end], source_k = S[start-1:end-1] with
    S[-1] := eos."""
    if L < 1:
        raise ValueError(f"block size must be >= 1, got {L}")
    shifted = [eos] + list(stream)
    out = []
    for start in range(0, len(stream), L):
        end = min(start + L, len(stream))
        out.append((shifted[start:end], list(stream[start:end])))
    return out


def context_window_samples(stream, l: int, c: int, pad: int = PAD, eos: int = EOS):
    """Samples of fairseq-eval-lm --tokens-per-sample l --context-window c.

    The task's block size becomes l - c. A buffer `prev` of earlier input tokens (empty at
    first) is trimmed from the left to at most l - len(block) tokens; the input row is
    prev || block_source || (c - len(prev)) pads; the target row is pad except positions
    [len(prev), len(prev) + len(block)) which hold the block's targets; start = len(prev);
    then prev <- the last c non-pad tokens of the input row."""
    if c < 0 or c >= l:
        raise ValueError(f"context window c = {c} must satisfy 0 <= c < tokens_per_sample {l}")
    blocks = lm_blocks(stream, l - c, eos)
    if c == 0:
        return [(src, tgt, 0) for src, tgt in blocks]
    out, prev = [], []
    for src, tgt in blocks:
        keep = max(0, l - len(src))
        prev = prev[len(prev) - keep:] if len(prev) > keep else prev
        row = prev + src + [pad] * (c - len(prev))
        trow = [pad] * len(row)
        trow[len(prev):len(prev) + len(tgt)] = tgt
        out.append((row, trow, len(prev)))
        prev = [t for t in row if t != pad][-c:]
    return out


def score(samples, log_probs, pad: int = PAD):
    """Sum of log p(target) over the scored positions of every sample: from `start`, the
    non-pad targets; +-inf scores are dropped from the sum and the count."""
    total, count = 0.0, 0
    for row, trow, start in samples:
        ref = [t for t in trow[start:] if t != pad]
        if not ref:
            continue
        lp = log_probs(row)  # [W, V]
        for k, t in enumerate(ref):
            s = float(lp[start + k, t])
            if math.isinf(s):
                continue
            total += s
            count += 1
    return total, count


@dataclass
class EvalResult:
    score_sum: float  # natural log
    count: int
    loss_base2: float
    ppl: float


def eval_lm(stream, log_probs, l: int, c: int = 0, pad: int = PAD, eos: int = EOS) -> EvalResult:
    total, count = score(context_window_samples(stream, l, c, pad, eos), log_probs, pad)
    loss2 = -total / count / math.log(2)
    return EvalResult(total, count, loss2, 2.0 ** loss2)


def model_log_probs(model):
    """log_probs callable for a TransformerLM (one window, no grad)."""

    def fn(row):
        with torch.no_grad():
            logits = model.forward(torch.tensor([row], dtype=torch.int64))[0]
            return torch.log_softmax(logits, dim=-1)

    return fn
