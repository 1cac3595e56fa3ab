#!/usr/bin/env python3
"""train --curriculum N against REAL fairseq 0.12.2 (the venv of tests/fairseq/setup_fairseq.sh), on the fixture
data-bin (tests/fixtures/fairseq; 7 batches an epoch at --max-tokens 1024): fairseq_cli/train.py asks for
next_epoch_itr(shuffle=(epoch > curriculum)), so epochs 1..N visit the batches in their frozen order.
Both programs fine-tune the same fairseq-trained start (dropout 0) for 3 epochs with --curriculum 2:
 1. epochs 1-2: every update's (num_updates, wpb, bsz) equal and its loss within 1e-3 relative (fairseq's 3
    decimals); control: without the flag stretch's first epoch visits the batches in another order;
 2. epoch 3, a deliberate difference: stretch shuffles it (the flag's meaning, "don't shuffle batches for
    first N epochs": the order of epoch 3 without the flag), while fairseq 0.12.2 keeps the frozen order for
    the rest of the process (the language_modeling task reuses its dataloader, whose FrozenBatchSampler keeps
    the shuffle flag of the first epoch it served); the check records that fairseq behaviour too.
Without the venv: tests/oracle_skip.py (a failure under CI=true, a loud skip elsewhere).
  --binary: no oracle: epochs 1-2 with --curriculum 2 visit the same batches in the same order (their wpb
    sequences equal), epoch 3 another order; a resume in epoch 1 continues the frozen order (losses bit for
    bit); --dump-config holds curriculum; --curriculum -1 is refused.
Usage: check_curriculum.py STRETCH_BINARY FAIRSEQ_VENV | check_curriculum.py STRETCH_BINARY --binary
"""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.append(os.path.join(HERE, ".."))
sys.path.insert(0, HERE)
import checklib  # noqa: E402
from checklib import DATA, run, trajectory  # noqa: E402
from testlib import check  # noqa: E402

MODEL = checklib.tiny_model(1, max_tokens=1024) + checklib.FS_TRAIN_FLAGS + ["--lr", "0.005", "--no-save"]


def with_oracle(stretch, venv, tmp):
    fairseq_train = os.path.join(venv, "bin", "fairseq-train")
    base_dir = os.path.join(tmp, "base")
    run([fairseq_train, DATA] + [f for f in MODEL if f != "--no-save"] + ["--max-update", "3", "--save-dir", base_dir])
    tail = ["--max-epoch", "3", "--finetune-from-model", os.path.join(base_dir, "checkpoint_last.pt")]
    fs = trajectory([fairseq_train, DATA] + MODEL + tail + ["--curriculum", "2", "--save-dir", os.path.join(tmp, "fs")],
                    "fairseq-train")
    st_cmd = [stretch, "train", DATA] + MODEL + tail + ["--pos", "sinusoidal", "--threads", "1", "--log-full-precision"]
    st = trajectory(st_cmd + ["--curriculum", "2", "--save-dir", os.path.join(tmp, "st")], "stretch train")
    check(len(fs) == len(st) == 21, f"{len(fs)} fairseq and {len(st)} stretch updates in 3 epochs of 7")
    worst = max((abs(s[1] - f[1]) / f[1] for f, s in zip(fs[:14], st[:14])), default=1.0)
    check([(f[0], f[2], f[3]) for f in fs[:14]] == [(s[0], s[2], s[3]) for s in st[:14]] and worst <= 1e-3,
          f"epochs 1-2: every update's (num_updates, wpb, bsz) equal, loss within {worst:.1e} rel; wpb fairseq "
          f"{[f[2] for f in fs[:7]]} | stretch {[s[2] for s in st[:7]]}")
    shuffled = trajectory(st_cmd + ["--save-dir", os.path.join(tmp, "ctl")], "stretch train without --curriculum")
    wpb = lambda rows, e: [r[2] for r in rows[7 * e:7 * e + 7]]  # noqa: E731
    check(wpb(shuffled, 0) != wpb(st, 0), f"control: without the flag epoch 1's wpb sequence is {wpb(shuffled, 0)}")
    check(wpb(st, 2) == wpb(shuffled, 2) and wpb(st, 2) != wpb(st, 0),
          f"epoch 3: stretch shuffles it as a run without the flag does: {wpb(st, 2)}")
    check(wpb(fs, 2) == wpb(fs, 0), f"epoch 3: fairseq 0.12.2 keeps the frozen order {wpb(fs, 2)} (its reused "
                                    "dataloader keeps the first epoch's shuffle flag)")


def binary(stretch, tmp):
    train = [stretch, "train", DATA, "--arch", "transformer_lm_tiny", "--tokens-per-sample", "32", "--max-tokens", "1024",
             "--threads", "1", "--log-format", "json", "--log-interval", "1", "--log-full-precision",
             "--disable-validation", "--no-epoch-checkpoints", "--curriculum", "2"]
    rows = trajectory(train + ["--max-epoch", "3", "--save-dir", os.path.join(tmp, "whole")], "3 epochs")
    wpb = [[r[2] for r in rows[7 * e:7 * e + 7]] for e in range(3)]
    check(len(rows) == 21 and wpb[0] == wpb[1] and wpb[2] != wpb[0] and sorted(wpb[2]) == sorted(wpb[0]),
          f"--curriculum 2: epochs 1 and 2 in the frozen order {wpb[0]}, epoch 3 shuffled {wpb[2]}")
    d = os.path.join(tmp, "resumed")
    first = trajectory(train + ["--max-update", "3", "--save-dir", d], "3 updates")
    rest = trajectory(train + ["--max-epoch", "3", "--save-dir", d], "the resume")
    check([r[1] for r in first + rest] == [r[1] for r in rows], "a resume at update 3 gives every loss bit for bit")
    dump = run(train + ["--dump-config"]).stdout
    check('"curriculum": 2' in dump, "--dump-config holds curriculum 2")
    p = run(train[:-2] + ["--curriculum", "-1", "--save-dir", os.path.join(tmp, "bad")], ok=False)
    err = p.stderr.strip().splitlines()
    check(p.returncode == 2 and err and "--curriculum: -1 is not allowed" in err[0], f"--curriculum -1 refused: {err[:1]}")


if __name__ == "__main__":
    sys.exit(checklib.main(__doc__, with_oracle, binary, "real fairseq-train"))
