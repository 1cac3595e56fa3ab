"""fairseq optimisation semantics, written from REFERENCE.md §3.2-3.5 (and fairseq's adam.py for
where Adam's eps sits). Parameters and gradients are {name: tensor} dicts; updates are in place.

  Nag(lr0, momentum, weight_decay).step(params, grads, lr)    §3.3, with the lr-change correction
  Adam(betas, eps, weight_decay).step(params, grads, lr)      §3.5, fairseq form (see below)
  CosineSchedule(...).lr(n)                                   §3.4, lr after n completed updates
  FixedSchedule(lr, warmup_updates).lr(n)                     §3.5
  make_schedule(cfg dict)                                     from fairseq arg names
  normalize_and_clip(grads, sample_size, clip_norm)           §3.2 steps 2-3 -> (norm, coef)

Update u (1-based) uses lr(u - 1): the trainer calls step_update(num_updates) after each step.
"""

import math
from dataclasses import dataclass

import torch

from .errors import InputError


class Nag:
    """fairseq NAG ("reformulated" Nesterov on the parameters), REFERENCE §3.3. Per parameter:
        p <- p (1 - lr wd); p <- p + mu^2 c buf; p <- p - (1 + mu) lr g; buf <- mu c buf - lr g
    with c = lr / lr_old; lr_old starts at the constructor lr (irrelevant at step 1: buf = 0)."""

    def __init__(self, lr0: float, momentum: float = 0.99, weight_decay: float = 0.0):
        self.mu, self.wd, self.lr_old = momentum, weight_decay, lr0
        self.buf = {}

    @torch.no_grad()
    def step(self, params: dict, grads: dict, lr: float):
        mu, c = self.mu, lr / self.lr_old
        for k, p in params.items():
            g = grads[k]
            buf = self.buf.setdefault(k, torch.zeros_like(p))
            if self.wd != 0:
                p.mul_(1 - lr * self.wd)
            p.add_(buf, alpha=mu * mu * c)
            p.add_(g, alpha=-(1 + mu) * lr)
            buf.mul_(mu * c).add_(g, alpha=-lr)
        self.lr_old = lr


class Adam:
    """fairseq Adam: m <- b1 m + (1-b1) g; v <- b2 v + (1-b2) g^2; denom = sqrt(v) + eps (eps
    before bias correction); step_size = lr sqrt(1 - b2^t) / (1 - b1^t); decoupled weight decay
    p <- p - wd lr p; p <- p - step_size m / denom."""

    def __init__(self, betas=(0.9, 0.999), eps: float = 1e-8, weight_decay: float = 0.0):
        self.b1, self.b2 = betas
        self.eps, self.wd = eps, weight_decay
        self.t = 0
        self.m, self.v = {}, {}

    @torch.no_grad()
    def step(self, params: dict, grads: dict, lr: float):
        self.t += 1
        bc1, bc2 = 1 - self.b1 ** self.t, 1 - self.b2 ** self.t
        step_size = lr * math.sqrt(bc2) / bc1
        for k, p in params.items():
            g = grads[k]
            m = self.m.setdefault(k, torch.zeros_like(p))
            v = self.v.setdefault(k, torch.zeros_like(p))
            m.mul_(self.b1).add_(g, alpha=1 - self.b1)
            v.mul_(self.b2).addcmul_(g, g, value=1 - self.b2)
            denom = v.sqrt().add_(self.eps)
            if self.wd != 0:
                p.add_(p, alpha=-self.wd * lr)
            p.addcdiv_(m, denom, value=-step_size)


@dataclass
class CosineSchedule:
    """REFERENCE §3.4. lr(n) after n completed updates."""
    max_lr: float
    min_lr: float = 0.0
    warmup_updates: int = 0
    warmup_init_lr: float = -1.0  # < 0: use min_lr
    period: int = 0  # --lr-period-updates; <= 0: max_update - warmup_updates
    t_mult: float = 1.0
    lr_shrink: float = 0.1
    max_update: int = 0

    def lr(self, n: int) -> float:
        W = self.warmup_updates
        init = self.warmup_init_lr if self.warmup_init_lr >= 0 else self.min_lr
        if n < W:
            return init + n * (self.max_lr - init) / W
        P = self.period if self.period > 0 else self.max_update - W
        if P <= 0:
            raise InputError("cosine schedule", f"period {P} <= 0", "set lr_period_updates or max_update > warmup")
        c = n - W
        if self.t_mult != 1:
            i = math.floor(math.log(1 - c / P * (1 - self.t_mult), self.t_mult))
            t_i = self.t_mult ** i * P
            t_curr = c - (1 - self.t_mult ** i) / (1 - self.t_mult) * P
        else:
            i = math.floor(c / P)
            t_i = P
            t_curr = c - i * P
        s = self.lr_shrink ** i
        lo, hi = self.min_lr * s, self.max_lr * s
        return lo + 0.5 * (hi - lo) * (1 + math.cos(math.pi * t_curr / t_i))


@dataclass
class FixedSchedule:
    """REFERENCE §3.5: step_update(n) sets factor (n + 1) / W while n < W, so update u uses
    lr * min(1, u / W). W = 0: constant."""
    max_lr: float
    warmup_updates: int = 0

    def lr(self, n: int) -> float:
        if self.warmup_updates > 0 and n < self.warmup_updates:
            return self.max_lr * (n + 1) / self.warmup_updates
        return self.max_lr


def _scalar_lr(v):
    if isinstance(v, (list, tuple)):
        if len(v) != 1:
            raise InputError("optimizer config key 'lr'", f"expected one value, got {v!r}")
        v = v[0]
    return float(v)


def make_schedule(cfg: dict):
    """From fairseq names: lr, lr_scheduler (cosine|fixed), warmup_updates, warmup_init_lr,
    min_lr, lr_period_updates, t_mult, lr_shrink, max_update."""
    if "lr" not in cfg:
        raise InputError("optimizer config", "missing key 'lr'")
    lr = _scalar_lr(cfg["lr"])
    kind = cfg.get("lr_scheduler", "fixed")
    if kind == "cosine":
        return CosineSchedule(max_lr=lr, min_lr=float(cfg.get("min_lr", 0.0)),
                              warmup_updates=int(cfg.get("warmup_updates", 0)),
                              warmup_init_lr=float(cfg.get("warmup_init_lr", -1.0)),
                              period=int(cfg.get("lr_period_updates", -1)),
                              t_mult=float(cfg.get("t_mult", 1.0)),
                              lr_shrink=float(cfg.get("lr_shrink", 0.1)),
                              max_update=int(cfg.get("max_update", 0)))
    if kind == "fixed":
        return FixedSchedule(max_lr=lr, warmup_updates=int(cfg.get("warmup_updates", 0)))
    raise InputError("optimizer config key 'lr_scheduler'", f"unsupported {kind!r}", "cosine or fixed")


def _betas(v):
    if isinstance(v, str):  # fairseq writes '(0.9, 0.98)'
        v = [float(x) for x in v.strip("()[] ").split(",")]
    if len(v) != 2:
        raise InputError("optimizer config key 'adam_betas'", f"expected two numbers, got {v!r}")
    return float(v[0]), float(v[1])


def make_optimizer(cfg: dict):
    kind = cfg.get("optimizer")
    wd = float(cfg.get("weight_decay", 0.0))
    if kind == "nag":
        return Nag(_scalar_lr(cfg["lr"]), momentum=float(cfg.get("momentum", 0.99)), weight_decay=wd)
    if kind == "adam":
        return Adam(betas=_betas(cfg.get("adam_betas", (0.9, 0.999))),
                    eps=float(cfg.get("adam_eps", 1e-8)), weight_decay=wd)
    raise InputError("optimizer config key 'optimizer'", f"unsupported {kind!r}", "nag or adam")


@torch.no_grad()
def normalize_and_clip(grads: dict, sample_size: int, clip_norm: float):
    """REFERENCE §3.2: g <- g / sample_size (world size 1); total L2 norm over all parameters
    (a tied parameter is one entry, counted once); if clip_norm > 0, g <- g * min(1,
    clip_norm / (norm + 1e-6)). In place. Returns (norm, coef)."""
    for g in grads.values():
        g.mul_(1.0 / sample_size)
    norm = math.sqrt(sum(float((g.double() ** 2).sum()) for g in grads.values()))
    coef = 1.0
    if clip_norm > 0:
        coef = min(1.0, clip_norm / (norm + 1e-6))
        for g in grads.values():
            g.mul_(coef)
    return norm, coef
