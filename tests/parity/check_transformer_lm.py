#!/usr/bin/env python3
"""Parity check of stretch's transformer_lm against the independent PyTorch oracle.

usage: check_transformer_lm.py --checkpoint CKPT --dump DUMP [--rtol 1e-4] [--quiet]

CKPT: safetensors checkpoint (fairseq names, __metadata__['config']); DUMP: safetensors written
by stretch with src_tokens [B, T] I32, target [B, T] I32, logits [B, T, V] F32 (eval mode),
loss [1] F32 (summed NLL, nats) and grad.<name> for every parameter (tests/parity/README.md).

The oracle runs the same tokens in float64 and compares logits, loss and every gradient with
  max|stretch - oracle| / max|oracle| <= rtol.
Why 1e-4 for fp32 against fp64 truth: fp32 rounds at u = 2^-24 = 6e-8. Each value passes
through O(L) layers of dot products of length K <= max(C, F, T) (and V for the logit
gradient); rounding errors add up like a random walk, about sqrt(K) u per dot product, so
with K ~ 1e3 and a few layers one expects 1e-6..1e-5 relative error. Measured with the oracle
itself run in float32 (self-test `fp32_error_budget`): worst 3.5e-6 over all six position
methods at 2 layers / C 32, and 1.6e-6 at the benchmark size (4 layers, C 256, F 1024, V 1000).
1e-4 leaves >= 30x headroom for a different (but correct) summation order, while every seeded bug
the self-test tries (slopes reversed, q scaled before its bias, positions off by one, rope
interleaved, t5 sign, no embedding scale, relu for gelu) shows errors >= 2e-1. Not caught: a
LayerNorm eps of 1e-6 instead of 1e-5 (2.8e-5): that is the layernorm op's own test's job.
Gradients that are zero in exact arithmetic (k_proj.bias: softmax ignores the per-row constant
q.b_k) are pure rounding noise on both sides, so each gradient's denominator is at least 1% of
the largest gradient entry of the whole model (GRAD_FLOOR).

Exit status: 0 all within rtol; 1 a table of the failures (also when a parameter has no
gradient in the dump or the dump has a gradient for no parameter); 2 bad input; 77 no torch (1 under CI=true: tests/oracle_skip.py).
"""

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

sys.path.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import oracle_skip  # noqa: E402  (tests/oracle_skip.py: missing torch fails under CI=true, else exits 77)

oracle_skip.require("torch")
import torch  # noqa: E402

from stretch_oracle.compare import Row, print_table, rel_max_err
from stretch_oracle.errors import InputError
from stretch_oracle.model import TransformerLM, param_shapes
from stretch_oracle.safetensors_io import load_file

GRAD_FLOOR = 1e-2  # a gradient is measured against >= 1% of the model's largest gradient entry


def _tokens(dump, path, key, V):
    if key not in dump:
        raise InputError(path, f"no tensor '{key}'", "the dump must hold src_tokens, target, logits, loss, grad.*")
    t = dump[key]
    if t.dtype not in (torch.int32, torch.int64) or t.dim() != 2:
        raise InputError(path, f"'{key}' is {t.dtype} {list(t.shape)}, expected I32 [B, T]")
    bad = ((t < 0) | (t >= V)).nonzero()
    if len(bad):
        b, i = bad[0].tolist()
        raise InputError(path, f"'{key}'[{b}, {i}] = {int(t[b, i])} is outside the vocabulary [0, {V})",
                         "was the dump written with this checkpoint?")
    return t.to(torch.int64)


def check(checkpoint: str, dump_path: str, rtol: float, cfg_change=None):
    """-> list of Row (one per compared tensor, plus failures for missing/extra gradients).
    cfg_change: LMConfig fields to change in the oracle (a driver's proof that a case can fail)."""
    model = TransformerLM.from_checkpoint(checkpoint)
    for key, value in (cfg_change or {}).items():
        setattr(model.cfg, key, value)
    cfg = model.cfg
    dump, meta = load_file(dump_path)
    update = int(meta["step"]) if "step" in meta else None  # a training forward at this update (slope warm-up)
    src = _tokens(dump, dump_path, "src_tokens", cfg.vocab_size)
    tgt = _tokens(dump, dump_path, "target", cfg.vocab_size)
    if src.shape != tgt.shape:
        raise InputError(dump_path, f"src_tokens {list(src.shape)} and target {list(tgt.shape)} differ in shape")
    B, T = src.shape
    for key, shape in (("logits", (B, T, cfg.vocab_size)), ("loss", None)):
        if key not in dump:
            raise InputError(dump_path, f"no tensor '{key}'")
        if shape and tuple(dump[key].shape) != shape:
            raise InputError(dump_path, f"'{key}' has shape {list(dump[key].shape)}, expected {list(shape)}")
    if dump["loss"].numel() != 1:
        raise InputError(dump_path, f"'loss' has {dump['loss'].numel()} elements, expected 1")

    loss, _, logits = model.loss(src, tgt, update)
    loss.backward()

    rows = []

    grad_scale = max(float(t.grad.abs().max()) for t in model.params.values())
    floor_of = lambda name: GRAD_FLOOR * grad_scale if name.startswith("grad.") else 0.0

    def add(name, got, ref):
        if tuple(got.shape) != tuple(ref.shape):
            rows.append(Row(name, tuple(ref.shape), float("nan"), float("nan"), float("inf"), False,
                            f"shape {list(got.shape)} in the dump"))
            return
        a, s, r = rel_max_err(got, ref, floor_of(name))
        rows.append(Row(name, tuple(ref.shape), s, a, r, r <= rtol))

    add("logits", dump["logits"], logits)
    add("loss", dump["loss"].reshape(()), loss)
    names = list(param_shapes(cfg))
    for name in names:
        key = "grad." + name
        if key not in dump:
            rows.append(Row(key, tuple(model.params[name].shape), float("nan"), float("nan"),
                            float("inf"), False, "missing in the dump"))
        else:
            add(key, dump[key], model.params[name].grad)
    for key in sorted(dump):
        if key.startswith("grad.") and key[5:] not in model.params:
            rows.append(Row(key, tuple(dump[key].shape), float("nan"), float("nan"), float("inf"), False,
                            "no such parameter in the checkpoint" +
                            (" (tied: only grad.decoder.embed_tokens.weight)" if cfg.share_io else "")))
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--checkpoint", required=True, help="safetensors checkpoint (the weights)")
    ap.add_argument("--dump", required=True, help="safetensors parity dump written by stretch")
    ap.add_argument("--rtol", type=float, default=1e-4, help="max|diff| / max|oracle| bound (default 1e-4)")
    ap.add_argument("--quiet", action="store_true", help="print only failures and the summary")
    args = ap.parse_args(argv)
    try:
        rows = check(args.checkpoint, args.dump, args.rtol)
    except InputError as e:
        print(f"check_transformer_lm: error: {e}", file=sys.stderr)
        return 2
    fails = [r for r in rows if not r.ok]
    if not args.quiet:
        print_table(rows)
    if fails:
        print(f"\ncheck_transformer_lm: {len(fails)} of {len(rows)} tensors FAIL (rtol {args.rtol:g}):")
        print_table(fails)
        return 1
    worst = max(rows, key=lambda r: r.rel_err)
    print(f"check_transformer_lm: all {len(rows)} tensors within rtol {args.rtol:g} "
          f"(worst {worst.name}: {worst.rel_err:.3e})")
    return 0


if __name__ == "__main__":
    torch.set_num_threads(1)  # tiny models: more threads only add OpenMP overhead on a shared host
    sys.exit(main())
