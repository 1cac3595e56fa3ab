#!/usr/bin/env python3
"""stretch's `--optimizer adagrad_with_grad_clip --adagrad-clip C` and `--lr-scheduler fixed
--warmup-updates N [--force-anneal F --lr-shrink S]` against REAL fairseq 0.12.2's classes: the
optimizer of examples/adaptive_span (FairseqAdagradWithGradClip, loaded the way `--user-dir
examples/adaptive_span` loads it) and fairseq.optim.lr_scheduler.FixedLRSchedule, driven in the
order fairseq's trainer calls them (step_update(0) at build; per epoch step_begin_epoch(e) then
step_update(n); after each update step_update(n)).

Per case, 20 updates on 3 parameter tensors (one of 33000 elements: stretch's OpenMP path):
  lr      the lr of every update: stretch's LrSchedule::lr_at_epoch(n, epoch) (tests/optim
          optim_driver) must EQUAL fairseq's optimizer lr (same double operations in the same order)
  values  the parameters after every update, both in float32: |stretch − fairseq| ≤ 1e-5·scale
          (scale = max(1, max |p|)); the error budget is check_optim_torch.py's (≈4 roundings of
          ≤ 6e-8 per step; here also fairseq's clr in float32 — torch 1.13's Adagrad keeps
          state["step"] as a float32 tensor, so lr/(1 + (step−1)·0) is a float32 tensor — and
          its fp32 ‖g‖ against stretch's double one). A wrong rule (clipping on the wrong norm,
          clipped squares in the accumulator, the clip on every tensor at once) moves the values
          by ≥ 1e-3.
The gradients are scaled so that each case clips some (tensor, step) pairs and not others; the
script checks that both happened.

Without the venv (tests/fairseq/setup_fairseq.sh): tests/oracle_skip.py (a failure under CI=true,
a loud skip elsewhere).
Usage: check_adaptive_span_optim.py OPTIM_DRIVER FAIRSEQ_VENV
"""
import json
import math
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.append(os.path.join(HERE, ".."))
import oracle_skip  # noqa: E402

STEPS = 20
SIZES = [("decoder.model.in_emb.weight", (7, 3)), ("decoder.model.layers.0.attn.attn.adaptive_span._mask.current_val", (4, 1, 1)),
         ("decoder.model.layers.0.ff.fc1.weight", (33000,))]
REL_TOL = 1e-5

# (name, optimizer flags, schedule flags, epoch of each update)
CASES = [
    ("seed_flags", {"adagrad_clip": 0.03, "weight_decay": 0.0},
     {"lr": [0.07], "warmup_updates": 7}, [1] * 9 + [2] * 11),
    ("weight_decay", {"adagrad_clip": 0.03, "weight_decay": 0.01},
     {"lr": [0.07], "warmup_updates": 7}, [1] * 20),
    ("force_anneal", {"adagrad_clip": 0.05, "weight_decay": 0.0},
     {"lr": [0.1, 0.05], "warmup_updates": 4, "force_anneal": 3, "lr_shrink": 0.5}, [1] * 5 + [2] * 5 + [3] * 5 + [4] * 5),
    ("no_clip", {"adagrad_clip": 0.0, "weight_decay": 0.0}, {"lr": [0.07]}, [1] * 20),
]


def find_user_dir(venv):
    """examples/adaptive_span as installed with fairseq, else the venv's unpacked source tree."""
    import fairseq
    for d in (os.path.join(os.path.dirname(fairseq.__file__), "examples", "adaptive_span"),
              os.path.join(venv, "src", "fairseq-0.12.2", "examples", "adaptive_span"),
              os.path.join(venv, "src", "fairseq-0.12.2", "fairseq", "examples", "adaptive_span")):
        if os.path.exists(os.path.join(d, "adagrad_with_grad_clip.py")):
            return os.path.realpath(d)
    raise SystemExit("FAIL: fairseq is installed but examples/adaptive_span is nowhere in " + venv)


def make_inputs(torch):
    gen = torch.Generator().manual_seed(4)
    init = [torch.randn(shape, generator=gen) for _, shape in SIZES]
    grads = []
    for t in range(STEPS):
        step = []
        for k, (_, shape) in enumerate(SIZES):
            g = torch.randn(shape, generator=gen)
            # Norms around the clips (0.03-0.05): tensor k, step t scaled so ‖g‖ swings
            # from ~0.3× to ~3× the clip.
            g = g / g.norm() * 0.04 * (3.0 ** math.sin(1.7 * t + 2.1 * k))
            g = torch.where(g.abs() < 1e-6, torch.full_like(g, 1e-6), g)
            step.append(g)
        grads.append(step)
    return init, grads


def run_fairseq(user_dir, opt_flags, sched_flags, epochs, init, grads):
    import argparse
    import torch
    from fairseq import utils
    from fairseq.optim.lr_scheduler.fixed_schedule import FixedLRSchedule, FixedLRScheduleConfig
    utils.import_user_module(argparse.Namespace(user_dir=user_dir))  # what --user-dir does
    mod = sys.modules[os.path.basename(user_dir) + ".adagrad_with_grad_clip"]
    params = [torch.nn.Parameter(t.clone()) for t in init]
    args = argparse.Namespace(lr=list(sched_flags["lr"]), weight_decay=opt_flags["weight_decay"],
                              adagrad_clip=opt_flags["adagrad_clip"])
    opt = mod.FairseqAdagradWithGradClip(args, params)
    cfg = FixedLRScheduleConfig(force_anneal=sched_flags.get("force_anneal"), lr_shrink=sched_flags.get("lr_shrink", 0.1),
                                warmup_updates=sched_flags.get("warmup_updates", 0), lr=list(sched_flags["lr"]))
    sched = FixedLRSchedule(cfg, opt)
    sched.step_update(0)  # fairseq Trainer._build_optimizer
    values, lrs, clipped = [], [], [0, 0]
    n, epoch = 0, None
    for t in range(STEPS):
        if epochs[t] != epoch:  # Trainer.begin_epoch -> lr_step_begin_epoch
            epoch = epochs[t]
            sched.step_begin_epoch(epoch)
            sched.step_update(n)
        lrs.append(opt.get_lr())
        for p, g in zip(params, grads[t]):
            p.grad = g.clone()
            d = g + opt_flags["weight_decay"] * p.detach() if opt_flags["weight_decay"] else g
            if opt_flags["adagrad_clip"] > 0:
                clipped[d.norm().item() > opt_flags["adagrad_clip"]] += 1
        opt.step()
        n += 1
        sched.step_update(n)  # Trainer.set_num_updates -> lr_step_update
        values.append(torch.cat([p.detach().reshape(-1) for p in params]).numpy().copy())
    return values, lrs, clipped


def run_stretch(driver, opt_flags, sched_flags, epochs, init, grads, workdir):
    import numpy as np
    case = {"optimizer": dict(kind="adagrad_with_grad_clip", **opt_flags),
            "schedule": dict(kind="fixed", **sched_flags), "epochs": epochs,
            "params": [{"name": n, "numel": int(np.prod(s))} for n, s in SIZES]}
    with open(os.path.join(workdir, "case.json"), "w") as f:
        json.dump(case, f)
    np.concatenate([t.numpy().ravel() for t in init]).astype("<f4").tofile(os.path.join(workdir, "init.f32"))
    np.concatenate([t.numpy().ravel() for step in grads for t in step]).astype("<f4").tofile(
        os.path.join(workdir, "grads.f32"))
    subprocess.run([driver, workdir], check=True)
    total = sum(int(np.prod(s)) for _, s in SIZES)
    out = np.fromfile(os.path.join(workdir, "out.f32"), dtype="<f4").reshape(STEPS, total)
    lrs = np.fromfile(os.path.join(workdir, "lrs.f64"), dtype="<f8")
    return out, [float(x) for x in lrs]


def inner(driver, venv):
    import numpy as np
    import torch
    torch.set_num_threads(1)
    user_dir = find_user_dir(venv)
    print(f"fairseq optimizer from --user-dir {user_dir}")
    init, grads = make_inputs(torch)
    failures = []
    with tempfile.TemporaryDirectory() as workdir:
        for name, opt_flags, sched_flags, epochs in CASES:
            ref, ref_lrs, clipped = run_fairseq(user_dir, opt_flags, sched_flags, epochs, init, grads)
            ref = np.stack(ref)
            ours, our_lrs = run_stretch(driver, opt_flags, sched_flags, epochs, init, grads, workdir)
            if our_lrs != ref_lrs:
                bad = next(i for i in range(STEPS) if our_lrs[i] != ref_lrs[i])
                failures.append(f"{name}: lr of update {bad + 1}: stretch {our_lrs[bad]!r}, fairseq {ref_lrs[bad]!r}")
            err = np.abs(ours.astype(np.float64) - ref.astype(np.float64))
            bound = REL_TOL * max(1.0, float(np.abs(ref).max()))
            worst = float(err.max())
            moved = float(np.abs(ref[-1] - np.concatenate([t.numpy().ravel() for t in init])).max())
            ok = bool((err <= bound).all()) and bool(np.isfinite(ours).all())
            if opt_flags["adagrad_clip"] > 0 and (clipped[0] == 0 or clipped[1] == 0):
                failures.append(f"{name}: the inputs clipped {clipped[1]} and passed {clipped[0]} (tensor, step) pairs; "
                                "both must occur for the case to test the clip")
            print(f"{'ok  ' if ok else 'FAIL'} {name:14s} max |stretch - fairseq| = {worst:.3e} (bound {bound:.1e}; "
                  f"moved up to {moved:.4f}; clipped {clipped[1]}, unclipped {clipped[0]}; "
                  f"lr {ref_lrs[0]:.3g} .. {ref_lrs[-1]:.3g})")
            if not ok:
                step, idx = np.unravel_index(int(np.argmax(err)), err.shape)
                failures.append(f"{name}: step {step + 1} element {idx}: stretch {ours[step, idx]!r} fairseq {ref[step, idx]!r}")
    for f in failures:
        print("FAIL:", f)
    return 1 if failures else 0


def main():
    return oracle_skip.fairseq_venv_main(__doc__, __file__, inner,
                                         "fairseq, numpy, torch",
                                         "fairseq's AdagradWithGradClip and FixedLRSchedule")


if __name__ == "__main__":
    sys.exit(main())
