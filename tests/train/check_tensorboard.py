#!/usr/bin/env python3
"""`stretch train --tensorboard-logdir DIR` read back by TensorBoard's own reader.

usage: check_tensorboard.py --stretch build/bin/stretch

On a synthetic data-bin (made with `stretch preprocess` in a temporary directory), one run of 2
epochs, --log-interval 2, validation every epoch, --log-format json, with --tensorboard-logdir.
tensorboard's EventAccumulator (PyPI `tensorboard`, in build/pyenv) must find, as fairseq 0.12.2's
TensorboardProgressBarWrapper writes them (one run per log tag, step = num_updates, every stat but
num_updates a scalar under its own name):
  DIR/train_inner  each train_inner json line's stats at its num_updates,
  DIR/train        each end-of-epoch "train" line's stats,
  DIR/valid        each "valid on 'valid' subset" line's stats,
with exactly the json lines' tags and steps, and each value printing as the json log printed it
("{:g}" of the float32 TensorBoard holds == the logged string, 6 significant digits). A second run
into an uncreatable directory must fail before training with an error naming --tensorboard-logdir.
Exit 0 ok, 1 a mismatch (listed), 77 tensorboard missing (1 under CI=true).
"""

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile

sys.path.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import oracle_skip  # noqa: E402  (a missing oracle fails under CI=true, else exits 77)

oracle_skip.require("tensorboard")
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator  # noqa: E402


def corpus(lines, seed):
    rng = random.Random(seed)
    return "".join(" ".join(f"w{rng.randrange(30)}" for _ in range(rng.randrange(3, 9))) + "\n"
                   for _ in range(lines))


def run(cmd, expect_ok=True):
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if expect_ok and r.returncode != 0:
        print(" ".join(cmd) + "\n" + r.stdout + r.stderr, file=sys.stderr)
        raise SystemExit(1)
    return r


def json_records(stdout):
    """(tag, {key: string}) of every json log line: '<time> | INFO | <tag> | {...}'."""
    out = []
    for line in stdout.splitlines():
        parts = line.split(" | ", 3)
        if len(parts) == 4 and parts[3].startswith("{") and parts[2] in ("train_inner", "train", "valid"):
            out.append((parts[2], json.loads(parts[3])))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--stretch", required=True)
    args = ap.parse_args()
    failures = []
    with tempfile.TemporaryDirectory(prefix="stretch-tb-") as work:
        for split, lines, seed in (("train", 120, 1), ("valid", 20, 2)):
            with open(os.path.join(work, f"{split}.txt"), "w") as f:
                f.write(corpus(lines, seed))
        data = os.path.join(work, "bin")
        run([args.stretch, "preprocess", "--only-source", "--trainpref", os.path.join(work, "train.txt"),
             "--validpref", os.path.join(work, "valid.txt"), "--destdir", data])
        tb = os.path.join(work, "tb")
        r = run([args.stretch, "train", data, "--arch", "transformer_lm_tiny", "--decoder-layers", "1",
                 "--decoder-embed-dim", "16", "--decoder-ffn-embed-dim", "32", "--decoder-attention-heads", "2",
                 "--tokens-per-sample", "16", "--max-tokens", "128", "--max-epoch", "2", "--optimizer", "adam",
                 "--lr", "0.003", "--clip-norm", "0.5", "--save-dir", os.path.join(work, "ckpt"), "--no-save",
                 "--log-format", "json", "--log-interval", "2", "--tensorboard-logdir", tb, "--threads", "1"])
        logged = json_records(r.stdout)
        expected = {}  # tag -> {(scalar, step): string}
        for tag, rec in logged:
            prefix = "" if tag == "train_inner" else tag + "_"
            step = int(rec[prefix + "num_updates"])
            for k, v in rec.items():
                if not k.startswith(prefix) or k in ("epoch", "update") or k == prefix + "num_updates":
                    continue
                expected.setdefault(tag, {})[(k[len(prefix):], step)] = v
        for tag in ("train_inner", "train", "valid"):
            if tag not in expected:
                failures.append(f"the json log has no '{tag}' line (the run is too short?)")
        runs = sorted(os.listdir(tb))
        if runs != sorted(expected):
            failures.append(f"runs in {tb}: {runs}, json log tags: {sorted(expected)}")
        for tag, want in expected.items():
            acc = EventAccumulator(os.path.join(tb, tag), size_guidance={"scalars": 0})
            acc.Reload()
            got = {}
            for scalar in acc.Tags()["scalars"]:
                for ev in acc.Scalars(scalar):
                    if (scalar, ev.step) in got:
                        failures.append(f"{tag}: {scalar} twice at step {ev.step}")
                    got[(scalar, ev.step)] = ev.value
            if set(got) != set(want):
                failures.append(f"{tag}: TensorBoard has {sorted(set(got) - set(want))} beyond the log, lacks "
                                f"{sorted(set(want) - set(got))}")
            for key in sorted(set(got) & set(want)):
                if "{:g}".format(got[key]) != want[key]:
                    failures.append(f"{tag}: {key[0]} at step {key[1]}: TensorBoard {got[key]!r} ('{got[key]:g}') "
                                    f"vs json log '{want[key]}'")
            print(f"{tag}: {len(got)} scalars ({len({k[0] for k in got})} tags) at steps "
                  f"{sorted({k[1] for k in got})}")
        blocker = os.path.join(work, "a_file")
        open(blocker, "w").close()
        bad = run([args.stretch, "train", data, "--arch", "transformer_lm_tiny", "--max-update", "1", "--max-tokens", "128",
                   "--tokens-per-sample", "16",
                   "--save-dir", os.path.join(work, "ckpt2"), "--tensorboard-logdir", os.path.join(blocker, "tb")],
                  expect_ok=False)
        if bad.returncode == 0 or "--tensorboard-logdir" not in bad.stderr:
            failures.append(f"an uncreatable --tensorboard-logdir: exit {bad.returncode}, stderr {bad.stderr!r}")
    for f in failures:
        print("FAIL: " + f, file=sys.stderr)
    print("check_tensorboard: " + ("FAIL" if failures else "ok"))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
