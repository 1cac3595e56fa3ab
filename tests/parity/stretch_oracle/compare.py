"""Tensor comparison used by the parity checks.

  rel_max_err(got, ref, floor) = max|got - ref| / max(max|ref|, floor)   (both as float64)
The error of the whole tensor relative to its largest magnitude: an elementwise relative error
would blow up on the many near-zero entries of a gradient whose true value is tiny, while a
bug (wrong scale, missing bias, shifted position, permuted heads) moves the large entries too.
Some gradients are zero in exact arithmetic (k_proj.bias: softmax ignores the per-row constant
q.b_k), so their reference is rounding noise; `floor` (the checks pass 1% of the largest
gradient of the model) bounds the denominator from below so that such a tensor is judged on
an absolute scale tied to the model's gradients. When the denominator is 0 the measure is max|got|.
  Row(name, shape, ref_max, abs_err, rel_err, ok) and print_table(rows, file)
"""

import sys
from dataclasses import dataclass

import torch


def rel_max_err(got: torch.Tensor, ref: torch.Tensor, floor: float = 0.0) -> tuple:
    """-> (max|got - ref|, max|ref|, max|got - ref| / max(max|ref|, floor))."""
    g, r = got.detach().double(), ref.detach().double()
    if g.shape != r.shape:
        raise ValueError(f"shape {tuple(g.shape)} != {tuple(r.shape)}")
    diff = float((g - r).abs().max()) if g.numel() else 0.0
    if not torch.isfinite(g).all():
        diff = float("inf")
    scale = float(r.abs().max()) if r.numel() else 0.0
    denom = max(scale, floor)
    return diff, scale, (diff / denom if denom > 0 else diff)


@dataclass
class Row:
    name: str
    shape: tuple
    ref_max: float
    abs_err: float
    rel_err: float
    ok: bool
    note: str = ""


def print_table(rows, file=sys.stdout):
    w = max([len(r.name) for r in rows] + [6])
    print(f"{'tensor':<{w}}  {'shape':<16} {'max|ref|':>11} {'max|diff|':>11} {'rel':>10}  status", file=file)
    for r in rows:
        status = "ok" if r.ok else "FAIL" + (f" ({r.note})" if r.note else "")
        print(f"{r.name:<{w}}  {str(list(r.shape)):<16} {r.ref_max:11.4e} {r.abs_err:11.4e} "
              f"{r.rel_err:10.3e}  {status}", file=file)
