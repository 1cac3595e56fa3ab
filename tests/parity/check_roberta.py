#!/usr/bin/env python3
"""Parity of stretch's roberta encoder (masked_lm) with the independent float64 oracle
(stretch_oracle/roberta.py): logits [B, T, V], the masked_lm loss and every parameter's gradient
(learnable ALiBi slopes included), max|stretch - oracle| / max|oracle| <= rtol (1e-4: the budget
argued in check_transformer_lm.py; gradients measured against >= 1% of the largest gradient).

usage: check_roberta.py --checkpoint CKPT --dump DUMP [--rtol 1e-4]
Exit status: 0 all within rtol; 1 failures (table printed, also for a missing or extra gradient);
2 bad input; 77 no torch (1 under CI=true).
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import oracle_skip  # noqa: E402

oracle_skip.require("torch")
import torch  # noqa: E402

from stretch_oracle import roberta  # noqa: E402
from stretch_oracle.compare import Row, print_table, rel_max_err  # noqa: E402
from stretch_oracle.errors import InputError  # noqa: E402
from stretch_oracle.safetensors_io import load_file  # noqa: E402

GRAD_FLOOR = 1e-2


def check(checkpoint, dump_path, rtol, cfg_change=None):
    """cfg_change: keys to change in the oracle's config (the driver's proof that a check can fail)."""
    cfg, params = roberta.load(checkpoint)
    cfg.update(cfg_change or {})
    dump, _ = load_file(dump_path)
    for key in ("src_tokens", "target", "logits", "loss"):
        if key not in dump:
            raise InputError(dump_path, f"no tensor '{key}'")
    src, tgt = dump["src_tokens"].to(torch.int64), dump["target"].to(torch.int64)
    pad = int(cfg.get("padding_idx", 1))
    masked = int(tgt.ne(pad).sum())
    if masked == 0 or masked == tgt.numel():
        raise InputError(dump_path, f"{masked} of {tgt.numel()} targets are scored: not a masked_lm batch")
    loss, _, logits = roberta.masked_lm_loss(cfg, params, src, tgt)
    loss.backward()
    grad_scale = max(float(t.grad.abs().max()) for t in params.values())
    rows = []

    def add(name, got, ref, floor=0.0):
        if tuple(got.shape) != tuple(ref.shape):
            rows.append(Row(name, tuple(ref.shape), float("nan"), float("nan"), float("inf"), False,
                            f"shape {list(got.shape)} in the dump"))
            return
        a, s, r = rel_max_err(got, ref, floor)
        rows.append(Row(name, tuple(ref.shape), s, a, r, r <= rtol))

    add("logits", dump["logits"], logits)
    add("loss", dump["loss"].reshape(()), loss)
    for name, t in params.items():
        key = "grad." + name
        if key not in dump:
            rows.append(Row(key, tuple(t.shape), float("nan"), float("nan"), float("inf"), False, "missing in the dump"))
        else:
            add(key, dump[key], t.grad, GRAD_FLOOR * grad_scale)
    for key in sorted(dump):
        if key.startswith("grad.") and key[5:] not in params:
            rows.append(Row(key, tuple(dump[key].shape), float("nan"), float("nan"), float("inf"), False,
                            "no such parameter in the checkpoint"))
    return rows


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--checkpoint", required=True)
    ap.add_argument("--dump", required=True)
    ap.add_argument("--rtol", type=float, default=1e-4)
    ap.add_argument("--quiet", action="store_true")
    args = ap.parse_args(argv)
    try:
        rows = check(args.checkpoint, args.dump, args.rtol)
    except InputError as e:
        print(f"check_roberta: error: {e}", file=sys.stderr)
        return 2
    fails = [r for r in rows if not r.ok]
    if not args.quiet:
        print_table(rows)
    if fails:
        print(f"\ncheck_roberta: {len(fails)} of {len(rows)} tensors FAIL (rtol {args.rtol:g}):")
        print_table(fails)
        return 1
    worst = max(rows, key=lambda r: r.rel_err)
    print(f"check_roberta: all {len(rows)} tensors within rtol {args.rtol:g} (worst {worst.name}: {worst.rel_err:.3e})")
    return 0


if __name__ == "__main__":
    torch.set_num_threads(1)
    sys.exit(main())
