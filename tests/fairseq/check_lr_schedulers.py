#!/usr/bin/env python3
"""stretch's `--lr-scheduler tri_stage`, `triangular`, `step` and `reduce_lr_on_plateau` against REAL fairseq
0.12.2's classes (fairseq.optim.lr_scheduler.tri_stage_lr_scheduler.TriStageLRSchedule,
triangular_lr_scheduler.TriangularLRSchedule, step_lr_scheduler.StepLRSchedule, reduce_lr_on_plateau.ReduceLROnPlateauLRSchedule over
torch's ReduceLROnPlateau) over fairseq's sgd optimizer, driven in the order fairseq's trainer calls
them: step_update(0) at build, the lr of update n+1 read from the optimizer, step_update(n+1) after
it, and at the end of each epoch (fairseq_cli/train.py: trainer.lr_step(epoch, valid_losses[0]))
step(epoch, metric) then step_update(n). stretch's plateau state also goes through its checkpoint
JSON into a fresh schedule at every epoch end (as a resume from checkpoint_last does).

Per case, 40 updates: the lr of every update from stretch's LrSchedule (tests/optim optim_driver)
must EQUAL fairseq's (the same double operations in the same order: Python's math.exp/log and
x ** k are C's exp/log/pow). The cases cover each stage of tri_stage (warmup, hold, the inclusive
end of the decay, the final lr), --phase-ratio's int() truncation, triangular's odd period, lr
shrink per cycle and --shrink-min.

Without the venv (tests/fairseq/setup_fairseq.sh): tests/oracle_skip.py (a failure under CI=true,
a loud skip elsewhere).
Usage: check_lr_schedulers.py OPTIM_DRIVER FAIRSEQ_VENV
"""
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.append(os.path.join(HERE, ".."))
import oracle_skip  # noqa: E402

STEPS = 40

# (name, stretch schedule fields = fairseq config fields, with "kind")
CASES = [
    ("tri_stage_steps", {"kind": "tri_stage", "lr": [0.003], "warmup_steps": 7, "hold_steps": 5, "decay_steps": 11,
                         "init_lr_scale": 0.02, "final_lr_scale": 0.05}),
    ("tri_stage_no_warmup", {"kind": "tri_stage", "lr": [0.5], "warmup_steps": 0, "hold_steps": 3, "decay_steps": 20}),
    ("tri_stage_phase_ratio", {"kind": "tri_stage", "lr": [0.001], "phase_ratio": [0.3, 0.3, 0.4], "max_update": 27,
                               "init_lr_scale": 0.1, "final_lr_scale": 0.2}),
    ("triangular", {"kind": "triangular", "lr": [0.001], "max_lr": 0.01, "lr_period_updates": 9, "lr_shrink": 0.5}),
    ("triangular_shrink_min", {"kind": "triangular", "lr": [0.001], "max_lr": 0.01, "lr_period_updates": 12,
                               "lr_shrink": 0.7, "shrink_min": True}),
    ("triangular_default_shrink", {"kind": "triangular", "lr": [0.2], "max_lr": 1.0, "lr_period_updates": 10,
                                   "lr_shrink": 0.1}),
    # step: warmup from --min-lr (the default init), decays every 7 updates after it, the --min-lr floor
    ("step_warmup_floor", {"kind": "step", "lr": [0.01], "warmup_updates": 5, "min_lr": 0.002,
                           "lr_deacy_period": 7, "lr_decay": 0.6}),
    # step: no warmup (fairseq's warmup_lr_step = 1 is never used), an explicit init ignored, decay 0.9
    ("step_no_warmup", {"kind": "step", "lr": [0.3], "warmup_init_lr": 0.01, "lr_deacy_period": 4, "lr_decay": 0.9}),
    # step: an explicit --warmup-init-lr above --lr (a warmup that falls), the defaults decay 0.5
    ("step_warmup_init", {"kind": "step", "lr": [0.001], "warmup_updates": 3, "warmup_init_lr": 0.004,
                          "lr_deacy_period": 10}),
]

# reduce_lr_on_plateau: (name, fields, updates per epoch, metric per epoch (None: no validation), the
# fewest distinct lrs the case must show). Metrics are what fairseq passes: rounded to 3 digits.
PLATEAU_CASES = [
    # patience 0, threshold 1e-4: 4.9 after 4.9 is no improvement, nor 4.8996 (> 4.9·(1 − 1e-4) = 4.89951)
    ("plateau_basic", {"kind": "reduce_lr_on_plateau", "lr": [0.1]}, 5,
     [5.0, 4.9, 4.9, 4.8996, 4.5, 4.6, 4.4, 4.41], 4),
    # warmup over 12 updates from 1e-4: the epochs ending at n = 4, 8, 12 do not step (n <= W);
    # patience 2, shrink 0.5; epochs without validation only set last_epoch
    ("plateau_warmup_patience", {"kind": "reduce_lr_on_plateau", "lr": [0.01], "warmup_updates": 12,
                                 "warmup_init_lr": 1e-4, "lr_patience": 2, "lr_shrink": 0.5}, 4,
     [9.0, 9.0, 9.0, 8.0, 8.5, None, 8.2, 8.1, 8.3, 8.0], 14),
    # warmup from 0 (the default init with W > 0), ending mid-epoch
    ("plateau_warmup_default_init", {"kind": "reduce_lr_on_plateau", "lr": [0.3], "warmup_updates": 6,
                                     "lr_shrink": 0.25}, 4, [7.0, 7.0, 7.0, 6.0, 6.0, 6.5, 5.0, 5.0, 5.0, 5.0], 8),
    # --maximize-best-checkpoint-metric: mode max, threshold 0.01 (better: > best·1.01)
    ("plateau_maximize", {"kind": "reduce_lr_on_plateau", "lr": [1.0], "maximize": True, "lr_threshold": 0.01,
                          "lr_shrink": 0.3}, 3, [1.0, 1.005, 1.02, 1.0, 2.0, 2.0, 2.01, 2.1, 2.1, 2.1, 2.1, 2.1, 2.1], 5),
    # torch's eps 1e-8: 3e-8 -> 1.5e-8 is taken (difference 1.5e-8), 1.5e-8 -> 7.5e-9 is not
    ("plateau_eps", {"kind": "reduce_lr_on_plateau", "lr": [3e-8], "lr_shrink": 0.5}, 4,
     [3.0, 3.0, 3.0, 3.0, 3.0], 2),
]


def run_fairseq(fields):
    import argparse
    import torch
    from fairseq.optim.sgd import SGD
    from fairseq.optim.lr_scheduler.tri_stage_lr_scheduler import TriStageLRSchedule, TriStageLRScheduleConfig
    from fairseq.optim.lr_scheduler.triangular_lr_scheduler import TriangularLRSchedule, TriangularLRScheduleConfig
    from fairseq.optim.lr_scheduler.step_lr_scheduler import StepLRSchedule, StepLRScheduleConfig
    opt = SGD(argparse.Namespace(lr=list(fields["lr"]), momentum=0.0, weight_decay=0.0),
              [torch.nn.Parameter(torch.zeros(3))])
    f = {k: v for k, v in fields.items() if k != "kind"}
    if fields["kind"] == "tri_stage":
        if "phase_ratio" in f:
            f["phase_ratio"] = tuple(f["phase_ratio"])
        f.setdefault("max_update", 0)
        sched = TriStageLRSchedule(TriStageLRScheduleConfig(**f), opt)
    elif fields["kind"] == "step":
        sched = StepLRSchedule(StepLRScheduleConfig(**f), opt)
    else:
        sched = TriangularLRSchedule(TriangularLRScheduleConfig(**f), opt)
    sched.step_update(0)  # fairseq Trainer._build_optimizer
    lrs = []
    for n in range(STEPS):
        lrs.append(opt.get_lr())
        sched.step_update(n + 1)  # Trainer.set_num_updates -> lr_step_update
    return lrs


def run_fairseq_plateau(fields, per_epoch, valid):
    import argparse
    import torch
    from fairseq.optim.sgd import SGD
    from fairseq.optim.lr_scheduler.reduce_lr_on_plateau import (ReduceLROnPlateauLRSchedule,
                                                                  ReduceLROnPlateauLRScheduleConfig)
    opt = SGD(argparse.Namespace(lr=list(fields["lr"]), momentum=0.0, weight_decay=0.0),
              [torch.nn.Parameter(torch.zeros(3))])
    f = {k: v for k, v in fields.items() if k not in ("kind", "maximize")}
    f["maximize_best_checkpoint_metric"] = fields.get("maximize", False)
    sched = ReduceLROnPlateauLRSchedule(ReduceLROnPlateauLRScheduleConfig(**f), opt)
    sched.step_update(0)
    lrs, n = [], 0
    for epoch, metric in enumerate(valid, start=1):
        for _ in range(per_epoch):
            lrs.append(opt.get_lr())
            n += 1
            sched.step_update(n)
        sched.step(epoch, metric)  # Trainer.lr_step(epoch, val_loss)
        sched.step_update(n)
    return lrs


def run_stretch(driver, fields, workdir, epochs=None, valid=None):
    import numpy as np
    epochs = epochs or [1] * STEPS
    case = {"optimizer": {"kind": "sgd"}, "schedule": fields, "epochs": epochs,
            "params": [{"name": "w", "numel": 3}]}
    if valid is not None:
        case["valid"] = valid
    steps = len(epochs)
    with open(os.path.join(workdir, "case.json"), "w") as f:
        json.dump(case, f)
    np.zeros(3, dtype="<f4").tofile(os.path.join(workdir, "init.f32"))
    np.full(3 * steps, 0.5, dtype="<f4").tofile(os.path.join(workdir, "grads.f32"))
    subprocess.run([driver, workdir], check=True)
    return [float(x) for x in np.fromfile(os.path.join(workdir, "lrs.f64"), dtype="<f8")]


def inner(driver):
    failures = []
    with tempfile.TemporaryDirectory() as workdir:
        for name, fields in CASES:
            ref = run_fairseq(fields)
            ours = run_stretch(driver, fields, workdir)
            bad = [i for i in range(STEPS) if ours[i] != ref[i]]
            distinct = len(set(ref))
            print(f"{'ok  ' if not bad else 'FAIL'} {name:26s} {STEPS} lrs equal: {not bad} "
                  f"({distinct} distinct, {min(ref):.4g} .. {max(ref):.4g})")
            if bad:
                i = bad[0]
                failures.append(f"{name}: lr of update {i + 1}: stretch {ours[i]!r}, fairseq {ref[i]!r}")
            if distinct < 5:
                failures.append(f"{name}: only {distinct} distinct lrs: the case does not exercise the schedule")
        for name, fields, per_epoch, valid, want_distinct in PLATEAU_CASES:
            ref = run_fairseq_plateau(fields, per_epoch, valid)
            epochs = [e for e in range(1, len(valid) + 1) for _ in range(per_epoch)]
            ours = run_stretch(driver, fields, workdir, epochs, valid)
            bad = [i for i in range(len(ref)) if ours[i] != ref[i]]
            distinct = len(set(ref))
            print(f"{'ok  ' if not bad else 'FAIL'} {name:26s} {len(ref)} lrs equal: {not bad} "
                  f"({distinct} distinct, {min(ref):.4g} .. {max(ref):.4g})")
            if bad:
                i = bad[0]
                failures.append(f"{name}: lr of update {i + 1}: stretch {ours[i]!r}, fairseq {ref[i]!r}")
            if distinct < want_distinct:
                failures.append(f"{name}: only {distinct} distinct lrs (want {want_distinct}): the case does not "
                                "exercise the schedule")
    for f in failures:
        print("FAIL:", f)
    return 1 if failures else 0


def main():
    return oracle_skip.fairseq_venv_main(__doc__, __file__, lambda driver, venv: inner(driver),
                                         "fairseq, numpy, torch",
                                         "fairseq's TriStageLRSchedule, TriangularLRSchedule and "
                                         "ReduceLROnPlateauLRSchedule")


if __name__ == "__main__":
    sys.exit(main())
