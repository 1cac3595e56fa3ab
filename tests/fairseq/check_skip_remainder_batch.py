#!/usr/bin/env python3
"""train --skip-remainder-batch against REAL fairseq 0.12.2 (the venv of tests/fairseq/setup_fairseq.sh), on the
fixture data-bin (tests/fixtures/fairseq; 7 batches an epoch at --max-tokens 1024), everything generated at
test time. Both programs fine-tune the same fairseq-trained start (dropout 0) for 3 epochs:
 1. --update-freq 3 --skip-remainder-batch: fairseq's EpochBatchIterator takes 7 − 1 = 6 batches, its
    GroupedIterator 2 whole groups: 2 updates an epoch (without the flag 3: 3 + 3 + 1 batches); every
    train_inner line (epoch, num_updates, loss within 1e-3 relative, wpb, bsz) and every end-of-epoch
    train line (epoch, num_updates, wpb, bsz) equal;
 2. --update-freq 2: 6 batches, 3 groups (without the flag 4: the last of one batch): the same comparison;
 3. --update-freq 1: fairseq's "lazy" drop of the last batch even when it is full (6 updates an epoch).
Without the venv: tests/oracle_skip.py (a failure under CI=true, a loud skip elsewhere).
  --binary: no oracle: updates per epoch with and without the flag for update-freq 1..4 as the rule above
    gives them; a resume mid-epoch with the flag ends the epoch where the uninterrupted run did; --dump-config
    holds skip_remainder_batch; --update-freq 8 with the flag (no whole group) is refused before training.
Usage: check_skip_remainder_batch.py STRETCH_BINARY FAIRSEQ_VENV | ... STRETCH_BINARY --binary
"""
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.append(os.path.join(HERE, ".."))
sys.path.insert(0, HERE)
import checklib  # noqa: E402
from checklib import DATA, run  # noqa: E402
from testlib import check  # noqa: E402

MODEL = checklib.tiny_model(1, max_tokens=1024) + ("--task language_modeling --optimizer adam --lr 0.005 "
         "--log-format json --log-interval 1 --num-workers 0 --disable-validation --no-save").split()
BATCHES = 7  # an epoch of the fixture at --tokens-per-sample 32 --max-tokens 1024


def rows(out):
    """train_inner (epoch, num_updates, loss, wpb, bsz) and end-of-epoch train (epoch, num_updates, wpb, bsz)."""
    inner, epochs = [], []
    for line in out.splitlines():
        for tag, dest, k in (("| train_inner | ", inner, ""), ("| train | ", epochs, "train_")):
            if tag in line:
                d = json.loads(line.split(tag, 1)[1])
                row = (int(d["epoch"]), int(float(d[k + "num_updates"])), float(d[k + "loss"]), float(d[k + "wpb"]),
                       float(d[k + "bsz"]))
                dest.append(row if dest is inner else row[:2] + row[3:])
    return inner, epochs


def expected_updates(update_freq, skip):
    used = (BATCHES - 1) // update_freq * update_freq if skip else BATCHES
    return -(-used // update_freq)


def with_oracle(stretch, venv, tmp):
    fairseq_train = os.path.join(venv, "bin", "fairseq-train")
    base_dir = os.path.join(tmp, "base")
    run([fairseq_train, DATA] + [f for f in MODEL if f != "--no-save"] +
        ["--max-update", "3", "--save-dir", base_dir, "--no-epoch-checkpoints"])
    base = os.path.join(base_dir, "checkpoint_last.pt")
    tail = ["--max-epoch", "3", "--finetune-from-model", base, "--skip-remainder-batch"]
    for uf in (3, 2, 1):
        got = {}
        for name, cmd in (("fairseq", [fairseq_train, DATA] + MODEL),
                          ("stretch", [stretch, "train", DATA] + MODEL + ["--pos", "sinusoidal", "--threads", "1",
                                                                          "--log-full-precision"])):
            p = run(cmd + tail + ["--update-freq", str(uf), "--save-dir", os.path.join(tmp, f"{name}-{uf}")])
            got[name] = rows(p.stdout + p.stderr)
        (fi, fe), (si, se) = got["fairseq"], got["stretch"]
        n = expected_updates(uf, True)
        check(len(fi) == len(si) == 3 * n and [r[:2] for r in fi] == [r[:2] for r in si],
              f"--update-freq {uf}: {len(fi)} fairseq and {len(si)} stretch updates in 3 epochs ({n} an epoch, "
              f"{expected_updates(uf, False)} without the flag)")
        worst = max((abs(s[2] - f[2]) / f[2] for f, s in zip(fi, si)), default=1.0)
        check(worst <= 1e-3 and [r[3:] for r in fi] == [r[3:] for r in si],
              f"--update-freq {uf}: per update wpb/bsz equal and loss within {worst:.1e} rel (fairseq's 3 decimals)")
        se = [r[:2] + tuple(round(x, 1) for x in r[2:]) for r in se]  # --log-full-precision: fairseq's 1 decimal
        check(fe == se and len(fe) == 3, f"--update-freq {uf}: epoch lines (epoch, num_updates, wpb, bsz) fairseq {fe} | "
                                         f"stretch {se}")


def binary(stretch, tmp):
    train = [stretch, "train", DATA, "--arch", "transformer_lm_tiny", "--tokens-per-sample", "32", "--max-tokens", "1024",
             "--threads", "1", "--log-format", "json", "--log-interval", "1", "--disable-validation",
             "--no-epoch-checkpoints"]
    for uf in (1, 2, 3, 4):
        for skip in (False, True):
            p = run(train + ["--update-freq", str(uf), "--max-epoch", "2", "--no-save"] +
                    (["--skip-remainder-batch"] if skip else []))
            _, epochs = rows(p.stdout + p.stderr)
            n = expected_updates(uf, skip)
            check([e[:2] for e in epochs] == [(1, n), (2, 2 * n)],
                  f"--update-freq {uf}{' --skip-remainder-batch' if skip else ''}: epochs end at "
                  f"{[e[:2] for e in epochs]}, expected {n} updates each")
    # A resume mid-epoch (update 1 of 2 in epoch 2) ends the epoch where the uninterrupted run did.
    d = os.path.join(tmp, "resume")
    flags = ["--update-freq", "3", "--skip-remainder-batch", "--save-dir", d]
    whole = rows(run(train + flags + ["--max-epoch", "3", "--save-dir", os.path.join(tmp, "whole")]).stdout)[0]
    run(train + flags + ["--max-update", "3"])
    resumed = rows(run(train + flags + ["--max-epoch", "3"]).stdout)[0]
    check([r[:3] for r in resumed] == [r[:3] for r in whole[3:]],
          f"resumed at update 3: the updates after it {[r[:2] for r in resumed]} = the uninterrupted run's "
          f"{[r[:2] for r in whole[3:]]} (loss too)")
    dump = run(train + ["--skip-remainder-batch", "--dump-config"]).stdout
    check('"skip_remainder_batch": true' in dump, "--dump-config holds skip_remainder_batch true")
    d = os.path.join(tmp, "none")
    p = run(train + ["--update-freq", "8", "--skip-remainder-batch", "--max-epoch", "1", "--save-dir", d], ok=False)
    err = [line for line in p.stderr.splitlines() if "error" in line]
    check(p.returncode == 2 and err and "--skip-remainder-batch" in err[0] and not os.path.exists(
        os.path.join(d, "checkpoint_last.pt")), f"--update-freq 8 (7 batches) with the flag refused: {err[:1]}")


if __name__ == "__main__":
    sys.exit(checklib.main(__doc__, with_oracle, binary, "real fairseq-train"))
