#!/usr/bin/env python3
"""train --no-save-optimizer-state against REAL fairseq 0.12.2 (the venv of tests/fairseq/setup_fairseq.sh),
on the fixture data-bin (tests/fixtures/fairseq): one epoch with the flag, then a second run resuming from it.
 1. fairseq's trainer.load_checkpoint restores neither the optimizer nor num_updates from such a file (both sit
    under its "last_optimizer_state is not None" branch) but does restore the epoch: both programs print
    "Loaded checkpoint .../checkpoint_last.pt (epoch 2 @ 0 updates)", and the resumed epoch's train_inner lines
    carry the same (epoch, num_updates, lr) triples (inverse_sqrt with warm-up: the schedule restarts at 0).
Without the venv: tests/oracle_skip.py (a failure under CI=true, a loud skip elsewhere).
  --binary: no oracle: the checkpoint has no "optimizer." tensor and "optimizer": null in its metadata and is
    smaller than one with the state; the resume warns once, naming the file, and keeps the best loss (a
    second epoch at lr 5 validates worse, and its line's best_loss is the first epoch's); eval-lm reads the file; a resume
    from a checkpoint WITH the state still continues num_updates (the default is unchanged).
Usage: check_no_save_optimizer_state.py STRETCH_BINARY FAIRSEQ_VENV | ... STRETCH_BINARY --binary
"""
import json
import os
import re
import struct
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.append(os.path.join(HERE, ".."))
import oracle_skip  # noqa: E402
from testlib import check, finish  # noqa: E402

DATA = os.path.join(HERE, "..", "fixtures", "fairseq", "data-bin")
TRAIN = ("--task language_modeling --arch transformer_lm --decoder-layers 1 --decoder-embed-dim 32 "
         "--decoder-ffn-embed-dim 64 --decoder-attention-heads 2 --tokens-per-sample 32 --max-tokens 256 "
         "--optimizer adam --lr 0.001 --lr-scheduler inverse_sqrt --warmup-updates 4 --seed 1 "
         "--no-epoch-checkpoints --log-interval 2 --log-format simple").split()
LOADED = re.compile(r"Loaded checkpoint \S+ \(epoch (\d+) @ (\d+) updates\)")
INNER = re.compile(r"\| train_inner \| epoch (\d+):.* num_updates=(\d+), lr=([0-9.e-]+)")


def run(cmd):
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300)


def two_runs(cmd, save, extra=(), second_extra=()):
    first = run(cmd + [DATA] + TRAIN + ["--save-dir", save, "--max-epoch", "1"] + list(extra))
    second = run(cmd + [DATA] + TRAIN + ["--save-dir", save, "--max-epoch", "2"] + list(extra) + list(second_extra))
    return first, second


def safetensors_header(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        return json.loads(f.read(n))


def with_oracle(stretch, venv, tmp):
    flag = ["--no-save-optimizer-state"]
    fs = two_runs([os.path.join(venv, "bin", "fairseq-train"), "--cpu"], os.path.join(tmp, "fs"), flag)
    st = two_runs([stretch, "train", "--threads", "1"], os.path.join(tmp, "st"), flag)
    ok = all(p.returncode == 0 for p in fs + st)
    check(ok, "both train an epoch, then resume for a second " + repr([p.stderr.strip()[-200:] for p in fs + st
                                                                     if p.returncode]))
    if not ok:
        return
    a, b = LOADED.findall(fs[1].stdout), LOADED.findall(st[1].stdout)
    check(a == b == [("2", "0")], f"'Loaded checkpoint (epoch E @ U updates)': fairseq {a}, stretch {b}")
    a, b = INNER.findall(fs[1].stdout), INNER.findall(st[1].stdout)
    check(len(a) > 5 and a == b, f"the resumed epoch's (epoch, num_updates, lr): fairseq {a[:4]}..., stretch {b[:4]}...")


def binary(stretch, tmp):
    cmd = [stretch, "train", "--threads", "1"]
    without, with_state = os.path.join(tmp, "without"), os.path.join(tmp, "with")
    # The second epoch at lr 5 validates worse than the first: the best must stay the first's.
    first, second = two_runs(cmd, without, ["--no-save-optimizer-state"], ["--lr", "5"])
    plain_first, plain_second = two_runs(cmd, with_state)
    ck, ck_plain = os.path.join(without, "checkpoint_last.pt"), os.path.join(with_state, "checkpoint_last.pt")
    if not check(all(p.returncode == 0 for p in (first, second, plain_first, plain_second)),
                 "four runs finish " + repr([p.stderr.strip()[-200:] for p in (first, second, plain_first,
                                                                               plain_second) if p.returncode])):
        return
    h, hp = safetensors_header(ck), safetensors_header(ck_plain)
    opt = [k for k in h if k.startswith("optimizer.")]
    check(not opt and h["__metadata__"].get("optimizer") == "null" and any(k.startswith("optimizer.") for k in hp),
          f"no optimizer tensor, metadata optimizer null ({len(opt)} tensors; with the state: "
          f"{sum(k.startswith('optimizer.') for k in hp)})")
    check(os.path.getsize(ck) * 2 < os.path.getsize(ck_plain),
          f"less than half the size with adam ({os.path.getsize(ck)} and {os.path.getsize(ck_plain)} bytes)")
    warned = [x for x in second.stderr.splitlines() if "saved with --no-save-optimizer-state" in x]
    check(len(warned) == 1 and ck in warned[0], f"the resume warns once, naming the file ({warned})")
    valid = [float(x) for x in re.findall(r"valid on 'valid' subset \| loss ([0-9.]+)", first.stdout + second.stdout)]
    best = re.findall(r"valid on 'valid' subset .*\| best_loss ([0-9.]+)", second.stdout)
    check(len(valid) == 2 and valid[1] > valid[0] and best and abs(float(best[-1]) - valid[0]) < 1e-3,
          f"the best loss is kept across the resume (valid {valid}, best_loss {best})")
    check(LOADED.findall(plain_second.stdout) == [("2", "26")] and LOADED.findall(second.stdout) == [("2", "0")],
          f"with the state num_updates continues ({LOADED.findall(plain_second.stdout)}), without it restarts "
          f"({LOADED.findall(second.stdout)})")
    ev = run([stretch, "eval-lm", DATA, "--path", ck, "--gen-subset", "valid", "--threads", "1"])
    check(ev.returncode == 0 and "Loss (base 2)" in ev.stdout, f"eval-lm reads it ({ev.stderr.strip()[-200:]!r})")


def main():
    usage = oracle_skip.fairseq_or_binary(__doc__, with_oracle, binary, "real fairseq-train --no-save-optimizer-state")
    return usage if usage is not None else finish()

if __name__ == "__main__":
    sys.exit(main())
