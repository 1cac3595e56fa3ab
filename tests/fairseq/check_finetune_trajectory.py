#!/usr/bin/env python3
"""Training continued from a checkpoint REAL fairseq 0.12.2 wrote: `stretch train
--finetune-from-model adaptive_tied.pt` (transformer_lm_wiki103: adaptive input, adaptive softmax
with tied tables and projections, --criterion adaptive_loss) against `fairseq-train
--finetune-from-model` on the same fixture data (tests/fixtures/fairseq/data-bin; stretch's batch
order is fairseq's), 20 updates of NAG (momentum 0.99) with the cosine schedule (5 warm-up updates,
then one period to --max-update) and --clip-norm 0.1 (clipping every update), dropout 0 (so both are
deterministic). Both start from the file's weights with a fresh optimizer and update count, which
is what --finetune-from-model means in fairseq (stretch imports no fairseq optimizer state).
Checked per update: the loss (base 2) within 1e-3 relative — fairseq's JSON log rounds it to 3
decimals (±5e-4 absolute, ≤ 7e-5 relative at these losses of ~7 bits) and float32 sums of two
implementations drift over 20 updates; measured ≤ 8e-5 — and the learning rate within 1e-4
relative (fairseq prints 6 significant digits). Without the oracle venv: tests/oracle_skip.py.

A second run swaps the optimizer for `--optimizer adafactor --beta1 0.9 --weight-decay 0.01
--lr 0.01` (factored second moments on every matrix, the first moment, weight decay; the lr from
the cosine schedule), same tolerances: stretch's Adafactor equals fairseq's class within ~1e-7
per update (tests/fairseq/check_adafactor.py), so the trajectories drift as the NAG ones do.
Usage: check_finetune_trajectory.py STRETCH_BINARY FAIRSEQ_VENV
"""
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.append(os.path.join(HERE, ".."))
import oracle_skip  # noqa: E402

FIX = os.path.join(HERE, "..", "fixtures", "fairseq")
FLAGS = ("--task language_modeling --arch transformer_lm_wiki103 --cpu --seed 1 --criterion adaptive_loss "
         "--ddp-backend legacy_ddp --decoder-layers 2 --decoder-embed-dim 32 --decoder-input-dim 32 "
         "--decoder-output-dim 32 --decoder-ffn-embed-dim 64 --decoder-attention-heads 2 "
         "--adaptive-input-cutoff 100,300 --adaptive-softmax-cutoff 100,300 --adaptive-softmax-dropout 0 "
         "--dropout 0 --attention-dropout 0 --activation-dropout 0 --tokens-per-sample 32 --max-tokens 256 "
         "--optimizer nag --lr 0.05 --clip-norm 0.1 --lr-scheduler cosine --warmup-updates 5 "
         "--warmup-init-lr 1e-07 --max-update 20 --no-save --log-format json --log-interval 1 "
         "--disable-validation --num-workers 0 --finetune-from-model adaptive_tied.pt").split()
UPDATES = 20
# (name, flags replacing "--optimizer nag --lr 0.05")
OPTIMIZERS = [("nag", []),
              ("adafactor", "--optimizer adafactor --beta1 0.9 --weight-decay 0.01 --lr 0.01".split())]


def flags_for(opt_flags):
    if not opt_flags:
        return list(FLAGS)
    i = FLAGS.index("--optimizer")
    assert FLAGS[i:i + 4] == ["--optimizer", "nag", "--lr", "0.05"], FLAGS[i:i + 4]
    return FLAGS[:i] + opt_flags + FLAGS[i + 4:]


def trajectory(cmd, log_name):
    p = subprocess.run(cmd, capture_output=True, text=True, cwd=FIX)
    if p.returncode != 0:
        raise SystemExit(f"FAIL: {log_name} exited {p.returncode}:\n{(p.stdout + p.stderr)[-3000:]}")
    out = []
    for line in (p.stdout + p.stderr).splitlines():
        if "| train_inner | " in line:
            d = json.loads(line.split("| train_inner | ", 1)[1])
            out.append((int(float(d["num_updates"])), float(d["loss"]), float(d["lr"])))
    return out, p.stdout + p.stderr


def main():
    stretch, venv = sys.argv[1], sys.argv[2]
    if not os.path.exists(os.path.join(venv, "bin", "fairseq-train")) or "fairseq" in oracle_skip.hidden():
        oracle_skip.missing("fairseq", install="tests/fairseq/setup_fairseq.sh (makes " + venv + ")",
                            detail="real fairseq-train")
    failures = []
    worst = {}
    for name, opt_flags in OPTIMIZERS:
        flags = flags_for(opt_flags)
        with tempfile.TemporaryDirectory() as tmp:
            env_py = os.path.join(venv, "bin", "fairseq-train")
            fs, _ = trajectory([env_py, "data-bin"] + flags + ["--save-dir", os.path.join(tmp, "fs")], "fairseq-train")
            st, log = trajectory([stretch, "train", "data-bin"] + flags +
                                 ["--pos", "sinusoidal", "--log-full-precision", "--save-dir", os.path.join(tmp, "st")],
                                 "stretch train")
            if "fairseq weights only" not in log:
                failures.append(f"{name}: stretch did not say that only the fairseq weights were taken")
        if len(fs) != UPDATES or len(st) != UPDATES:
            failures.append(f"{name}: {len(fs)} fairseq and {len(st)} stretch updates logged, expected {UPDATES} each")
        worst[name] = 0.0
        for (fu, fl, flr), (su, sl, slr) in zip(fs, st):
            rel = abs(sl - fl) / abs(fl)
            worst[name] = max(worst[name], rel)
            print(f"{name} update {fu:2d}: fairseq loss {fl:.3f} lr {flr:g} | stretch loss {sl:.6f} lr {slr:.6g} | "
                  f"rel {rel:.1e}")
            if fu != su or rel > 1e-3 or abs(slr - flr) > 1e-4 * flr:
                failures.append(f"{name} update {fu}/{su}: loss {sl!r} vs fairseq {fl!r} (rel {rel:.1e}), "
                                f"lr {slr!r} vs {flr!r}")
        if fs and fs[-1][1] >= fs[0][1]:
            failures.append(f"{name}: fairseq's loss did not fall ({fs[0][1]} -> {fs[-1][1]}): the case tests nothing")
    if failures:
        print("FAIL:\n  " + "\n  ".join(failures))
        return 1
    print(f"OK: {UPDATES} updates continued from a fairseq checkpoint follow fairseq-train (worst rel " +
          ", ".join(f"{k} {v:.1e}" for k, v in worst.items()) + ")")
    return 0


if __name__ == "__main__":
    sys.exit(main())
