#!/usr/bin/env python3
"""stretch's `--lr-scheduler tri_stage` and `--lr-scheduler triangular` against REAL fairseq 0.12.2's
classes (fairseq.optim.lr_scheduler.tri_stage_lr_scheduler.TriStageLRSchedule and
triangular_lr_scheduler.TriangularLRSchedule) over fairseq's sgd optimizer, driven in the order
fairseq's trainer calls them: step_update(0) at build, the lr of update n+1 read from the optimizer,
step_update(n+1) after it.

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
]


def run_fairseq(fields):
    import argparse
    import torch
    from fairseq.optim.sgd import SGD
    from fairseq.optim.lr_scheduler.tri_stage_lr_scheduler import TriStageLRSchedule, TriStageLRScheduleConfig
    from fairseq.optim.lr_scheduler.triangular_lr_scheduler import TriangularLRSchedule, TriangularLRScheduleConfig
    opt = SGD(argparse.Namespace(lr=list(fields["lr"]), momentum=0.0, weight_decay=0.0),
              [torch.nn.Parameter(torch.zeros(3))])
    f = {k: v for k, v in fields.items() if k != "kind"}
    if fields["kind"] == "tri_stage":
        if "phase_ratio" in f:
            f["phase_ratio"] = tuple(f["phase_ratio"])
        f.setdefault("max_update", 0)
        sched = TriStageLRSchedule(TriStageLRScheduleConfig(**f), opt)
    else:
        sched = TriangularLRSchedule(TriangularLRScheduleConfig(**f), opt)
    sched.step_update(0)  # fairseq Trainer._build_optimizer
    lrs = []
    for n in range(STEPS):
        lrs.append(opt.get_lr())
        sched.step_update(n + 1)  # Trainer.set_num_updates -> lr_step_update
    return lrs


def run_stretch(driver, fields, workdir):
    import numpy as np
    case = {"optimizer": {"kind": "sgd"}, "schedule": fields, "epochs": [1] * STEPS,
            "params": [{"name": "w", "numel": 3}]}
    with open(os.path.join(workdir, "case.json"), "w") as f:
        json.dump(case, f)
    np.zeros(3, dtype="<f4").tofile(os.path.join(workdir, "init.f32"))
    np.full(3 * STEPS, 0.5, dtype="<f4").tofile(os.path.join(workdir, "grads.f32"))
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
    for f in failures:
        print("FAIL:", f)
    return 1 if failures else 0


def main():
    if len(sys.argv) >= 4 and sys.argv[3] == "--inner":
        return inner(sys.argv[1])
    if len(sys.argv) != 3:
        print(__doc__)
        return 2
    driver, venv = sys.argv[1], sys.argv[2]
    py = os.path.join(venv, "bin", "python")
    ok = os.path.exists(py) and "fairseq" not in oracle_skip.hidden() and subprocess.run(
        [py, "-c", "import fairseq, numpy, torch"], capture_output=True).returncode == 0
    if not ok:
        oracle_skip.missing("fairseq", install="tests/fairseq/setup_fairseq.sh (makes " + venv + ")",
                            detail="fairseq's TriStageLRSchedule and TriangularLRSchedule")
    return subprocess.run([py, os.path.abspath(__file__), driver, venv, "--inner"]).returncode


if __name__ == "__main__":
    sys.exit(main())
