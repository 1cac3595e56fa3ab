#!/usr/bin/env python3
"""Cross-check of stretch's optimizers against PyTorch, 10 steps on the same numbers.

Usage: check_optim_torch.py OPTIM_DRIVER
Exit 0 on agreement, 1 on a mismatch, 77 (CTest SKIP_RETURN_CODE; 1 under CI=true) when torch or numpy is
missing. Registered in tests/optim/CMakeLists.txt with the label "parity".

References:
  sgd      torch.optim.SGD          adamw  torch.optim.AdamW     adamw, wd 0: torch.optim.Adam
  adagrad  torch.optim.Adagrad      adam   torch.optim.Adam (wd 0; eps enters differently, see
                                           below) and fairseq's Adam formula in torch ops
  nag, adagrad_with_grad_clip: fairseq's update rules (REFERENCE.md §3.3, §5.5) in torch ops,
           since fairseq itself is not installed.

Tolerance: |stretch − torch| ≤ 1e-5 · scale per element, scale = max(1, the largest |p| of
the case's torch trajectory). Both compute in fp32 and may differ by rounding (FMA
contraction, operation order, fp32 vs double norms in adagrad's clip): about 4 roundings of
≤ 6e-8 relative per step, relative to the largest value in the computation (not to the
result: a parameter crossing zero keeps the absolute error of its O(scale) terms), so 10
steps give ≤ 2.4e-6·scale; 1e-5 leaves a 4× margin. fairseq adam vs torch.optim.Adam also
differ by where eps enters: a relative eps·(1/sqrt(1−β2^t) − 1)/sqrt(v̂) of each step,
< 1e-6 of it here because every |g| ≥ 0.05. A wrong rule (order, bias correction, lr
correction, clipping) moves parameters by ≥ 1e-3, far outside the bound.
"""
import json
import math
import os
import subprocess
import sys
import tempfile

sys.path.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import oracle_skip  # noqa: E402  (tests/oracle_skip.py: a missing oracle fails under CI=true, else exits 77)

oracle_skip.require("numpy", "torch")
import numpy as np  # noqa: E402
import torch  # noqa: E402

STEPS = 10
SIZES = [("decoder.embed_tokens.weight", (7,)), ("decoder.layers.0.fc1.weight", (3, 5)),
         ("decoder.layers.0.fc2.weight", (33000,))]  # the last exercises the OpenMP path
LRS = [0.1, 0.05, 0.2, 0.2, 0.01, 0.15, 0.3, 0.07, 0.07, 0.12]
REL_TOL = 1e-5


class FairseqNag(torch.optim.Optimizer):
    """REFERENCE.md §3.3 in torch ops: p *= 1 − lr·wd; p += μ²·c·buf; p −= (1+μ)·lr·g;
    buf = μ·c·buf − lr·g, c = lr/lr_old."""

    def __init__(self, params, lr, momentum=0.99, weight_decay=0.0):
        super().__init__(params, dict(lr=lr, lr_old=lr, momentum=momentum, weight_decay=weight_decay))

    @torch.no_grad()
    def step(self):
        for group in self.param_groups:
            lr, mu, wd = group["lr"], group["momentum"], group["weight_decay"]
            c = lr / group["lr_old"]
            for p in group["params"]:
                st = self.state[p]
                buf = st.setdefault("buf", torch.zeros_like(p))
                if wd != 0:
                    p.mul_(1 - lr * wd)
                p.add_(buf, alpha=mu * mu * c)
                p.add_(p.grad, alpha=-(1 + mu) * lr)
                buf.mul_(mu * c).add_(p.grad, alpha=-lr)
            group["lr_old"] = lr


class FairseqAdam(torch.optim.Optimizer):
    """fairseq Adam: m, v as Adam; p −= wd·lr·p; p −= lr·sqrt(bc2)/bc1 · m/(sqrt(v) + eps)."""

    def __init__(self, params, lr, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0):
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay))

    @torch.no_grad()
    def step(self):
        for group in self.param_groups:
            b1, b2 = group["betas"]
            for p in group["params"]:
                st = self.state[p]
                if not st:
                    st["step"], st["m"], st["v"] = 0, torch.zeros_like(p), torch.zeros_like(p)
                st["step"] += 1
                st["m"].mul_(b1).add_(p.grad, alpha=1 - b1)
                st["v"].mul_(b2).addcmul_(p.grad, p.grad, value=1 - b2)
                denom = st["v"].sqrt().add_(group["eps"])
                bc1, bc2 = 1 - b1 ** st["step"], 1 - b2 ** st["step"]
                size = group["lr"] * math.sqrt(bc2) / bc1
                if group["weight_decay"] != 0:
                    p.add_(p, alpha=-group["weight_decay"] * group["lr"])
                p.addcdiv_(st["m"], denom, value=-size)


class AdagradWithGradClip(torch.optim.Adagrad):
    """REFERENCE.md §5.5: Adagrad whose clr is scaled by clip/(‖g‖ + 1e-10) when ‖g‖ > clip."""

    def __init__(self, params, lr, grad_clip, weight_decay=0.0):
        super().__init__(params, lr=lr, weight_decay=weight_decay)
        self.grad_clip = grad_clip

    @torch.no_grad()
    def step(self):
        for group in self.param_groups:
            for p in group["params"]:
                st = self.state[p]
                st["step"] += 1
                g = p.grad
                if group["weight_decay"] != 0:
                    g = g.add(p, alpha=group["weight_decay"])
                clr = group["lr"] / (1 + (float(st["step"]) - 1) * group["lr_decay"])
                norm = g.double().norm(2).item()
                if self.grad_clip > 0 and norm > self.grad_clip:
                    clr *= self.grad_clip / (norm + 1e-10)
                st["sum"].addcmul_(g, g, value=1)
                p.addcdiv_(g, st["sum"].sqrt().add_(1e-10), value=-clr)


# name, stretch optimizer config, torch constructor (params, lr) -> optimizer
CASES = [
    ("sgd", {"kind": "sgd", "momentum": 0.9, "weight_decay": 0.01},
     lambda ps, lr: torch.optim.SGD(ps, lr=lr, momentum=0.9, weight_decay=0.01)),
    ("sgd_plain", {"kind": "sgd"}, lambda ps, lr: torch.optim.SGD(ps, lr=lr)),
    ("adamw", {"kind": "adamw", "betas": [0.9, 0.98], "eps": 1e-6, "weight_decay": 0.01},
     lambda ps, lr: torch.optim.AdamW(ps, lr=lr, betas=(0.9, 0.98), eps=1e-6, weight_decay=0.01)),
    ("adamw_as_adam", {"kind": "adamw"}, lambda ps, lr: torch.optim.Adam(ps, lr=lr)),
    ("adam_vs_torch_adam", {"kind": "adam"}, lambda ps, lr: torch.optim.Adam(ps, lr=lr)),
    ("adam_fairseq", {"kind": "adam", "betas": [0.9, 0.98], "weight_decay": 0.01},
     lambda ps, lr: FairseqAdam(ps, lr=lr, betas=(0.9, 0.98), weight_decay=0.01)),
    ("adagrad", {"kind": "adagrad", "weight_decay": 0.01, "lr_decay": 0.01, "initial_accumulator_value": 0.1},
     lambda ps, lr: torch.optim.Adagrad(ps, lr=lr, lr_decay=0.01, weight_decay=0.01, initial_accumulator_value=0.1)),
    ("adagrad_with_grad_clip", {"kind": "adagrad_with_grad_clip", "adagrad_clip": 0.5},
     lambda ps, lr: AdagradWithGradClip(ps, lr=lr, grad_clip=0.5)),
    ("nag", {"kind": "nag"}, lambda ps, lr: FairseqNag(ps, lr=lr)),
    ("nag_wd", {"kind": "nag", "momentum": 0.9, "weight_decay": 0.05},
     lambda ps, lr: FairseqNag(ps, lr=lr, momentum=0.9, weight_decay=0.05)),
]


def make_inputs():
    gen = torch.Generator().manual_seed(1234)
    init = [torch.randn(shape, generator=gen) for _, shape in SIZES]
    grads = []
    for _ in range(STEPS):
        step = []
        for _, shape in SIZES:
            g = torch.randn(shape, generator=gen)
            g = torch.where(g.abs() < 0.05, torch.full_like(g, 0.05), g)  # keep |g| ≥ 0.05
            step.append(g)
        grads.append(step)
    return init, grads


def run_stretch(driver, cfg, init, grads, workdir):
    case = {"optimizer": cfg, "params": [{"name": n, "numel": int(np.prod(s))} for n, s in SIZES], "lrs": LRS}
    with open(os.path.join(workdir, "case.json"), "w") as f:
        json.dump(case, f)
    np.concatenate([t.numpy().ravel() for t in init]).astype("<f4").tofile(os.path.join(workdir, "init.f32"))
    np.concatenate([t.numpy().ravel() for step in grads for t in step]).astype("<f4").tofile(
        os.path.join(workdir, "grads.f32"))
    subprocess.run([driver, workdir], check=True)
    total = sum(int(np.prod(s)) for _, s in SIZES)
    return np.fromfile(os.path.join(workdir, "out.f32"), dtype="<f4").reshape(STEPS, total)


def run_torch(make, init, grads):
    params = [torch.nn.Parameter(t.clone()) for t in init]
    opt = make(params, LRS[0])
    out = []
    for t in range(STEPS):
        for group in opt.param_groups:
            group["lr"] = LRS[t]
        for p, g in zip(params, grads[t]):
            p.grad = g.clone()
        opt.step()
        out.append(np.concatenate([p.detach().numpy().ravel() for p in params]))
    return np.stack(out)


def main():
    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    driver = sys.argv[1]
    torch.set_num_threads(1)
    init, grads = make_inputs()
    failures = 0
    with tempfile.TemporaryDirectory() as workdir:
        for name, cfg, make in CASES:
            ours = run_stretch(driver, cfg, init, grads, workdir)
            ref = run_torch(make, init, grads)
            err = np.abs(ours.astype(np.float64) - ref.astype(np.float64))
            scale = max(1.0, float(np.abs(ref).max()))
            bound = REL_TOL * scale
            worst = float(err.max())
            ok = bool((err <= bound).all()) and np.isfinite(ours).all()
            moved = float(np.abs(ref[-1] - np.concatenate([t.numpy().ravel() for t in init])).max())
            print(f"{'ok  ' if ok else 'FAIL'} {name:24s} max |stretch - torch| = {worst:.3e} "
                  f"(bound {bound:.1e}; params moved up to {moved:.3f})")
            if not ok:
                step, idx = np.unravel_index(int(np.argmax(err)), err.shape)
                print(f"     worst at step {step + 1}, element {idx}: stretch {ours[step, idx]!r} torch {ref[step, idx]!r}")
                failures += 1
    print(f"{len(CASES) - failures} passed, {failures} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
