#!/usr/bin/env python3
"""CTest driver of the roberta encoder's parity: stretch_parity_dump --masked-lm K writes a fresh
checkpoint and one masked_lm batch (targets pad except every K-th position, whose input is the
last id, <mask>), its logits, loss and gradients; check_roberta.check() compares them with the
float64 oracle.

usage: run_roberta_parity.py --dump-tool PATH [--case NAME ...] [--list]
Cases (2 layers, C 48, H 6 — not a power of two —, F 96, V 50, B 3, T 16, the last row right-padded
with 3 pads, dropout 0): alibi (symmetric), alibi-learnable (learnable slopes: their gradient too),
alibi-prenorm, sinusoidal, learned, none, alibi-relu, alibi-learnable-interp (slopes x 0.5). The alibi case must also FAIL against an
oracle without the bias (else the driver fails: the bias would have no effect).
Exit status: 0 all pass; 1 a case fails; 2 bad usage or the dump tool failed; 77 no torch.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import oracle_skip  # noqa: E402

oracle_skip.require("torch")
import torch  # noqa: E402

import check_roberta  # noqa: E402
from stretch_oracle.compare import print_table  # noqa: E402

BASE = {"arch": "roberta_tiny", "vocab_size": 50, "encoder_layers": 2, "encoder_embed_dim": 48,
        "encoder_ffn_embed_dim": 96, "encoder_attention_heads": 6, "dropout": 0.0, "attention_dropout": 0.0,
        "activation_dropout": 0.0}
CASES = {
    "alibi": {"pos": "alibi"},
    "alibi-learnable": {"pos": "alibi", "alibi_learnable_slopes": True},
    "alibi-prenorm": {"pos": "alibi", "encoder_normalize_before": True},
    "sinusoidal": {"pos": "sinusoidal"},
    "learned": {"pos": "learned"},
    "none": {"pos": "none"},
    "alibi-relu": {"pos": "alibi", "activation_fn": "relu"},
    # fairseq's other activations, in the FFN and lm_head.dense; biases uniform(-2, 2) after init so the
    # pre-activations reach |x| ~ 2, where the tanh GELU and the exact one differ by ~1e-3.
    "alibi-gelu-accurate": {"pos": "alibi", "activation_fn": "gelu_accurate", "_bias_noise": 2.0},
    "sinusoidal-tanh": {"pos": "sinusoidal", "activation_fn": "tanh", "_bias_noise": 2.0},
    # Position interpolation (eval-lm --task masked_lm --alibi-interpolate at 2 L_train): the
    # learnable slopes' gradient carries the scale.
    "alibi-learnable-interp": {"pos": "alibi", "alibi_learnable_slopes": True, "alibi_slope_scale": 0.5},
}


def run_case(tool, name, tmp):
    cfg = dict(BASE, **CASES[name])
    bias_noise = cfg.pop("_bias_noise", 0.0)
    ckpt, dump = os.path.join(tmp, name + ".pt"), os.path.join(tmp, name + ".safetensors")
    cmd = [tool, "--model-json", json.dumps(cfg), "--batch", "3", "--len", "16", "--pad", "3", "--seed", "3",
           "--masked-lm", "4", "--checkpoint", ckpt, "--dump", dump, "--bias-noise", str(bias_noise)]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        print(f"run_roberta_parity: {name}: the dump tool failed ({r.returncode}):\n{r.stderr}", file=sys.stderr)
        return None
    rows = check_roberta.check(ckpt, dump, 1e-4)
    if name == "alibi":  # the check can fail: the same dump against an oracle without the symmetric bias
        wrong = check_roberta.check(ckpt, dump, 1e-4, {"pos": "none"})
        if all(r.ok for r in wrong):
            print("run_roberta_parity: alibi: the dump also passes an oracle without ALiBi: the bias has no effect",
                  file=sys.stderr)
            return None
    if name == "alibi-gelu-accurate":  # the tanh GELU is not passed as the exact one at this tolerance
        wrong = check_roberta.check(ckpt, dump, 1e-4, {"activation_fn": "gelu"})
        if all(r.ok for r in wrong):
            print("run_roberta_parity: alibi-gelu-accurate: the dump also passes an oracle with the exact GELU",
                  file=sys.stderr)
            return None
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dump-tool", required=True)
    ap.add_argument("--case", action="append")
    ap.add_argument("--list", action="store_true")
    a = ap.parse_args()
    if a.list:
        print("\n".join(CASES))
        return 0
    names = a.case or list(CASES)
    for n in names:
        if n not in CASES:
            print(f"run_roberta_parity: --case {n}: unknown (--list shows them)", file=sys.stderr)
            return 2
    failed = 0
    with tempfile.TemporaryDirectory() as tmp:
        for n in names:
            rows = run_case(a.dump_tool, n, tmp)
            if rows is None:
                return 2
            bad = [r for r in rows if not r.ok]
            worst = max(rows, key=lambda r: r.rel_err)
            print(f"{n}: {len(rows)} tensors, worst {worst.name} {worst.rel_err:.2e}: {'FAIL' if bad else 'ok'}")
            if bad:
                print_table(bad)
                failed += 1
    return 1 if failed else 0


if __name__ == "__main__":
    torch.set_num_threads(1)
    sys.exit(main())
