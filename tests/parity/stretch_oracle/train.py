"""fairseq's training step (REFERENCE §3.2) on the oracle model, for trajectory parity.

  train_steps(model, src [S, B, T], target [S, B, T], optim_cfg) -> [StepLog]
For update u = 1..S on batch u-1: loss = summed NLL over non-pad targets; backward; grads /=
ntokens; total L2 norm; clip (coef = min(1, clip_norm / (norm + 1e-6)) when clip_norm > 0);
optimizer step with lr(u - 1) from the schedule. The logged loss is the batch's mean NLL per
non-pad target *before* the update, in nats (divide by ln 2 for fairseq's base-2 log).
Only update_freq 1 and one worker (world size 1).
"""

from dataclasses import dataclass

import torch

from .errors import InputError
from .model import TransformerLM, nll_sum
from .optim import make_optimizer, make_schedule, normalize_and_clip


@dataclass
class StepLog:
    update: int  # 1-based
    loss: float  # mean NLL per non-pad target, nats, before the update
    ntokens: int
    lr: float  # the rate this update used
    gnorm: float  # norm of the normalised gradient, before clipping
    clip_coef: float


def check_optim_cfg(cfg: dict, where: str):
    uf = int(cfg.get("update_freq", 1) if not isinstance(cfg.get("update_freq"), list) else cfg["update_freq"][0])
    if uf != 1:
        raise InputError(f"{where} key 'update_freq'", f"{uf} is not supported by the trajectory check",
                         "run the parity trajectory with --update-freq 1")


def train_steps(model: TransformerLM, src: torch.Tensor, target: torch.Tensor, optim_cfg: dict):
    check_optim_cfg(optim_cfg, "optimizer config")
    sched = make_schedule(optim_cfg)
    opt = make_optimizer(optim_cfg)
    clip = float(optim_cfg.get("clip_norm", 0.0))
    logs = []
    for s in range(src.shape[0]):
        model.zero_grad()
        logits = model.forward(src[s])
        loss, ntok = nll_sum(logits, target[s], model.cfg.padding_idx)
        if ntok == 0:
            raise InputError(f"batch {s}", "has no non-pad target", "every step needs at least one target")
        loss.backward()
        grads = {k: t.grad for k, t in model.params.items()}
        norm, coef = normalize_and_clip(grads, ntok, clip)
        lr = sched.lr(s)  # update s + 1 uses lr after s completed updates
        with torch.no_grad():
            opt.step(model.params, grads, lr)
        logs.append(StepLog(s + 1, float(loss) / ntok, ntok, lr, norm, coef))
    return logs
