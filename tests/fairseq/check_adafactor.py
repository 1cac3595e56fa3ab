#!/usr/bin/env python3
"""stretch's `--optimizer adafactor` (src/optim/adafactor.cpp) against REAL fairseq 0.12.2's
fairseq/optim/adafactor.py, on the same parameters and gradients, 6 updates per case.

fairseq side: FairseqAdafactor(args, params) built from the flags as fairseq-train builds it, its
lr set before every update with set_lr() as every fairseq schedule's step_update does; for the
--relative-step cases the Adafactor class itself with lr=None (FairseqAdafactor always passes
--lr, which Adafactor refuses with relative_step: checked below, it is why stretch refuses lr flags
with --relative-step). stretch side: tests/optim optim_driver with the same numbers, the
parameters in the same order (the order matters: with --scale-parameter fairseq carries each
parameter's lr into the next one's).

Shapes, as fairseq's parameters have them: a vector [7], a zero bias [6] (RMS 0 < eps2), a Linear
weight [out 5, in 12], an embedding [V 40, C 8], a 3-D [2, 3, 4] (factored over the last two
dims) and a vector of 33000 (stretch's OpenMP path).

Tolerance, per parameter tensor and update: |stretch − fairseq| ≤ 1e-6 · max|p| (relative to
the tensor's scale). Both do the element math in float32 in the same order (torch's
mul_().add_(alpha) is an FMA, stretch writes std::fma; rsqrt is 1/sqrt in both), but fairseq's
means (row/column averages of g²) and norms (the RMS of p and of the update) are float32 sums in
torch's order while stretch sums in double: each differs by a few float32 ulps (≤ ~1e-7
relative), which moves that step's lr or factor by as much, i.e. an update of size |u| by
≤ ~1e-7·|u| ≤ 1e-7·max|p| per step here (|u| ≤ lr·RMS-clip ≤ max|p|). 6 updates stay below 1e-6.
A second bound ties the error to how far the tensor moved (d = max|p_t − p_0|), so that the
tiny-lr cases (warmup_init: lr ≈ 1e-6·t·RMS, d ≈ 1e-5·max|p|) still test the update:
|stretch − fairseq| ≤ 1e-4·d + 4 ulp(max|p|) — a float32 parameter cannot show a difference of
update below its own ulp, and one ulp is all the summation differences above ever flip.
Measured: most elements bitwise equal (reported), the worst 1-2 ulps. A wrong rule (unfactored
where fairseq factors, the factors over the wrong dims, a missed clip, the lr not carried to the
next parameter, warmup_init's 1e-6·t) changes the updates by ≥ 1 % of d, outside both bounds.

Without the venv (tests/fairseq/setup_fairseq.sh): tests/oracle_skip.py (a failure under CI=true).
Usage: check_adafactor.py OPTIM_DRIVER FAIRSEQ_VENV
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.append(os.path.join(HERE, ".."))
import oracle_skip  # noqa: E402

STEPS = 6
SIZES = [("decoder.layers.0.self_attn_layer_norm.weight", (7,)),
         ("decoder.layers.0.fc1.bias", (6,)),
         ("decoder.layers.0.fc1.weight", (5, 12)),
         ("decoder.embed_tokens.weight", (40, 8)),
         ("decoder.three_d", (2, 3, 4)),
         ("decoder.layers.0.fc2.weight_flat", (33000,))]
ZERO_INIT = {"decoder.layers.0.fc1.bias"}
LRS = [0.01, 0.03, 0.02, 0.02, 0.005, 0.015]
REL_TOL = 1e-6
DISP_TOL, ULPS = 1e-4, 4

BASE = dict(adafactor_eps=[1e-30, 1e-3], clip_threshold=1.0, decay_rate=-0.8, beta1=None, weight_decay=0.0,
            scale_parameter=False, relative_step=False, warmup_init=False)
CASES = [
    ("defaults", {}),
    ("beta1", {"beta1": 0.9}),
    ("scale_parameter", {"scale_parameter": True}),
    ("scale_beta1_wd", {"scale_parameter": True, "beta1": 0.9, "weight_decay": 0.01}),
    ("weight_decay", {"weight_decay": 0.1}),
    ("clip_decay_eps", {"clip_threshold": 0.5, "decay_rate": -0.5, "adafactor_eps": [1e-20, 1e-2]}),
    ("relative_step", {"relative_step": True}),
    ("relative_scale", {"relative_step": True, "scale_parameter": True}),
    ("warmup_init", {"relative_step": True, "warmup_init": True, "scale_parameter": True}),
    ("warmup_beta1_wd", {"relative_step": True, "warmup_init": True, "beta1": 0.0, "weight_decay": 0.05}),
]


def make_inputs(torch):
    gen = torch.Generator().manual_seed(16)
    init = [torch.zeros(s) if n in ZERO_INIT else torch.randn(s, generator=gen) for n, s in SIZES]
    grads = [[torch.randn(s, generator=gen) * (0.5 + k) for k, (_, s) in enumerate(SIZES)] for _ in range(STEPS)]
    return init, grads


def run_fairseq(flags, init, grads):
    import torch
    from fairseq.optim.adafactor import Adafactor, FairseqAdafactor
    params = [torch.nn.Parameter(t.clone()) for t in init]
    if flags["relative_step"]:
        args = argparse.Namespace(lr=[0.25], **{k: (str(tuple(v)) if k == "adafactor_eps" else v) for k, v in flags.items()})
        try:
            FairseqAdafactor(args, [torch.nn.Parameter(torch.zeros(2))])
            raise SystemExit("FAIL: fairseq's FairseqAdafactor accepted --relative-step with --lr; stretch refuses it")
        except ValueError as e:
            assert "Cannot combine manual lr and relative_step" in str(e), e
        kw = {k: v for k, v in flags.items() if k != "adafactor_eps"}
        opt = Adafactor(params, lr=None, eps=tuple(flags["adafactor_eps"]), **kw)
        set_lr = None
    else:
        args = argparse.Namespace(lr=[LRS[0]], **{k: (str(tuple(v)) if k == "adafactor_eps" else v) for k, v in flags.items()})
        opt = FairseqAdafactor(args, params)
        set_lr = opt.set_lr
    values = []
    for t in range(STEPS):
        if set_lr:
            set_lr(LRS[t])
        for p, g in zip(params, grads[t]):
            p.grad = g.clone()
        opt.step()
        values.append([p.detach().clone().numpy() for p in params])
    return values


def run_stretch(driver, flags, init, grads, workdir):
    import numpy as np
    case = {"optimizer": dict(kind="adafactor", **flags), "lrs": LRS,
            "params": [{"name": n, "numel": int(np.prod(s)), "shape": list(s)} for n, s in SIZES]}
    with open(os.path.join(workdir, "case.json"), "w") as f:
        json.dump(case, f)
    np.concatenate([t.numpy().ravel() for t in init]).astype("<f4").tofile(os.path.join(workdir, "init.f32"))
    np.concatenate([t.numpy().ravel() for step in grads for t in step]).astype("<f4").tofile(
        os.path.join(workdir, "grads.f32"))
    subprocess.run([driver, workdir], check=True)
    total = sum(int(np.prod(s)) for _, s in SIZES)
    out = np.fromfile(os.path.join(workdir, "out.f32"), dtype="<f4").reshape(STEPS, total)
    res, off = [], 0
    for t in range(STEPS):
        row, off = [], 0
        for _, s in SIZES:
            n = int(np.prod(s))
            row.append(out[t, off:off + n].reshape(s))
            off += n
        res.append(row)
    return res


def inner(driver):
    import numpy as np
    import torch
    torch.set_num_threads(1)
    init, grads = make_inputs(torch)
    failures = []
    with tempfile.TemporaryDirectory() as workdir:
        for name, over in CASES:
            flags = dict(BASE, **over)
            ref = run_fairseq(flags, init, grads)
            ours = run_stretch(driver, flags, init, grads, workdir)
            worst_rel, worst_ulps, equal, count = 0.0, 0.0, 0, 0
            for t in range(STEPS):
                for k, (pname, _) in enumerate(SIZES):
                    a, b = ours[t][k].astype(np.float64), ref[t][k].astype(np.float64)
                    err = float(np.abs(a - b).max())
                    scale = max(float(np.abs(b).max()), 1e-30)
                    disp = float(np.abs(b - init[k].numpy()).max())
                    ulp = float(np.spacing(np.float32(scale)))
                    equal += int((ours[t][k] == ref[t][k]).sum())
                    count += b.size
                    worst_rel = max(worst_rel, err / scale)
                    worst_ulps = max(worst_ulps, err / ulp)
                    if not np.isfinite(a).all() or err > REL_TOL * scale:
                        failures.append(f"{name}: update {t + 1} {pname}: max |stretch - fairseq| {err:.3e} > "
                                        f"{REL_TOL:g} x {scale:.3e}")
                    if err > DISP_TOL * disp + ULPS * ulp:
                        failures.append(f"{name}: update {t + 1} {pname}: max |stretch - fairseq| {err:.3e} > "
                                        f"{DISP_TOL:g} x displacement {disp:.3e} + {ULPS} ulp ({ulp:.3e})")
            moved = max(float(np.abs(ref[-1][k] - init[k].numpy()).max()) for k in range(len(SIZES)))
            ok = not any(f.startswith(name + ":") for f in failures)
            print(f"{'ok  ' if ok else 'FAIL'} {name:16s} max err {worst_rel:.2e} of max|p| (bound {REL_TOL:g}), "
                  f"{worst_ulps:.1f} ulp; bitwise equal {equal}/{count}; moved up to {moved:.2e}")
    for f in failures[:20]:
        print("FAIL:", f)
    return 1 if failures else 0


def main():
    return oracle_skip.fairseq_venv_main(__doc__, __file__, lambda driver, venv: inner(driver),
                                         "fairseq.optim.adafactor, numpy, torch",
                                         "fairseq's Adafactor")


if __name__ == "__main__":
    sys.exit(main())
