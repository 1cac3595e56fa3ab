#!/usr/bin/env python3
"""CTest driver of the trajectory parity check: `stretch_parity_dump --trajectory` runs 20 updates
through train::train_update() (the function `stretch train` runs for every update) and
check_trajectory.py replays them in the float64 oracle.

usage: run_trajectory_parity.py --dump-tool PATH --optimizer nag|adam [--steps 20]

Model: 2 layers, C 48, H 6, F 96, V 50, ALiBi, dropout 0 (REFERENCE §7.7); batches B 4, T 16,
the last row right-padded with 3 pad tokens (so ntokens < B·T). Optimisation (fairseq names):
cosine schedule with linear warmup from warmup_init_lr over 4 updates, a first period of 6
updates, t_mult 2 and lr_shrink 0.75 (so update 11 starts the second, longer period at a
shrunk rate), min_lr, and clip_norm 1.7 (gnorm starts near 1.9 and falls below 1.7: clipping
is active on some updates and not on others, so both branches are compared). nag: lr 0.5, momentum 0.99 (exercises the lr-change correction every
update, since the rate changes every update). adam: lr 3e-3, betas (0.9, 0.98), weight decay 0.01.
Tolerances: check_trajectory.py's defaults and their reasons (update 1: 1e-4; later updates:
1e-3 for NAG, 1e-2 for Adam; lr to 1e-5; gnorm with the loss tolerance).

Exit status: that of check_trajectory.py (0 / 1 / 2 / 77), or 2 when the dump tool fails.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

sys.path.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import oracle_skip  # noqa: E402  (tests/oracle_skip.py: missing torch fails under CI=true, else exits 77)

oracle_skip.require("torch")
import torch  # noqa: E402

import check_trajectory

MODEL = {"vocab_size": 50, "decoder_layers": 2, "decoder_embed_dim": 48, "decoder_ffn_embed_dim": 96,
         "decoder_attention_heads": 6, "pos": "alibi", "dropout": 0.0, "attention_dropout": 0.0,
         "activation_dropout": 0.0}
SCHEDULE = {"lr_scheduler": "cosine", "warmup_updates": 4, "warmup_init_lr": 1e-7, "min_lr": 1e-4,
            "lr_period_updates": 6, "t_mult": 2.0, "lr_shrink": 0.75, "max_update": 20, "clip_norm": 1.7}
OPTIM = {
    "nag": {"optimizer": "nag", "lr": 0.5, "momentum": 0.99, "weight_decay": 0.0},
    "adam": {"optimizer": "adam", "lr": 3e-3, "adam_betas": "(0.9, 0.98)", "adam_eps": 1e-8, "weight_decay": 0.01},
}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dump-tool", required=True)
    ap.add_argument("--optimizer", choices=sorted(OPTIM), required=True)
    ap.add_argument("--steps", type=int, default=20)
    args = ap.parse_args(argv)
    opt = dict(SCHEDULE, **OPTIM[args.optimizer])
    with tempfile.TemporaryDirectory(prefix="stretch-trajectory-") as work:
        paths = {k: os.path.join(work, f) for k, f in
                 (("opt", "opt.json"), ("ckpt", "init.pt"), ("batches", "batches.safetensors"),
                  ("losses", "losses.json"))}
        with open(paths["opt"], "w") as f:
            json.dump(opt, f)
        cmd = [args.dump_tool, "--model-json", json.dumps(MODEL), "--checkpoint", paths["ckpt"],
               "--trajectory", paths["opt"], "--steps", str(args.steps), "--batch", "4", "--len", "16",
               "--pad", "3", "--seed", "3", "--batches", paths["batches"], "--losses", paths["losses"]]
        p = subprocess.run(cmd, capture_output=True, text=True)
        if p.returncode != 0:
            print(f"run_trajectory_parity: error: {args.dump_tool} exit {p.returncode}: {p.stderr.strip()}",
                  file=sys.stderr)
            return 2
        print(f"{args.optimizer}: {json.dumps(opt)}")
        return check_trajectory.main(["--checkpoint", paths["ckpt"], "--batches", paths["batches"],
                                      "--optim-config", paths["opt"], "--losses", paths["losses"]])


if __name__ == "__main__":
    torch.set_num_threads(1)
    sys.exit(main())
