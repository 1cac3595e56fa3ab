#!/usr/bin/env python3
"""--lr-scheduler reduce_lr_on_plateau through the binary (issue 16): transformer_lm_tiny on the committed
fairseq fixture, 4 epochs of about 7 updates, validation at each epoch's end.
 * --lr-threshold 0.9 (an improvement must be 90%: only the first validation is one), --lr-shrink 0.5:
   epoch e trains at 1e-3·0.5^(e−2) from epoch 2 on; with --lr-patience 1 every second bad epoch shrinks.
 * default --lr-threshold 1e-4: the lr of each epoch against torch's ReduceLROnPlateau rule applied here
   by hand to the valid losses the run logged (fairseq passes the logged, 3-digit value).
 * resume: --max-epoch 2, then the same command with --max-epoch 4, trains the same losses at the same
   lrs as the uninterrupted run (the plateau state is in checkpoint_last), and --reset-lr-scheduler
   keeps the reduced lr but forgets the best loss.
 * --dump-config has the flags; --lr-shrink 1 and an lr list are usage errors (exit 2) naming the flag.
Usage: test_plateau.py STRETCH_BINARY
"""
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "..", "fixtures", "fairseq", "data-bin")
failures = []
BASE = ["--arch", "transformer_lm_tiny", "--optimizer", "adam", "--lr", "0.001", "--lr-scheduler",
        "reduce_lr_on_plateau", "--log-format", "json", "--log-interval", "1", "--threads", "1",
        "--tokens-per-sample", "64", "--batch-size", "16", "--no-epoch-checkpoints", "--seed", "3"]


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        failures.append(what)


def run(args):
    return subprocess.run(args, capture_output=True, text=True, timeout=300)


def train(b, save_dir, flags):
    p = run([b, "train", DATA, "--save-dir", save_dir] + BASE + flags)
    inner, valid = [], []
    for line in p.stdout.splitlines():
        if "| train_inner | {" in line or "| valid | {" in line:
            j = json.loads(line[line.index("{"):])
            (inner if "train_inner" in line else valid).append(j)
    # the lr of update n is the lr logged after update n − 1 (fairseq logs the next update's lr):
    # per epoch, the lr logged after its first update = the epoch's lr when it does not change within it
    epoch_lr = {}
    for j in inner:
        epoch_lr.setdefault(int(j["epoch"]), float(j["lr"]))
    return p, inner, valid, epoch_lr


def plateau_by_hand(valid_losses, lr, shrink, threshold, patience):
    """torch.optim.lr_scheduler.ReduceLROnPlateau (mode min, rel, cooldown 0, eps 1e-8): the lr of each epoch."""
    lrs, best, bad = [lr], float("inf"), 0
    for v in valid_losses:
        if v < best * (1 - threshold):
            best, bad = v, 0
        else:
            bad += 1
        if bad > patience:
            new = max(lr * shrink, 0.0)
            if lr - new > 1e-8:
                lr = new
            bad = 0
        lrs.append(lr)
    return lrs


def main():
    b = sys.argv[1]
    with tempfile.TemporaryDirectory() as tmp:
        p, inner, valid, lrs = train(b, os.path.join(tmp, "a"), ["--max-epoch", "4", "--lr-threshold", "0.9",
                                                                   "--lr-shrink", "0.5"])
        want = {1: 1e-3, 2: 1e-3, 3: 5e-4, 4: 2.5e-4}
        check(p.returncode == 0 and len(valid) == 4 and lrs == want,
              f"--lr-threshold 0.9: lr per epoch {lrs} == {want} ({p.stderr.strip()[-300:]!r})")
        per_epoch = sum(1 for j in inner if int(j["epoch"]) == 1)
        check(3 <= per_epoch <= 12, f"{per_epoch} updates per epoch")
        p2, _, _, lrs2 = train(b, os.path.join(tmp, "b"), ["--max-epoch", "4", "--lr-threshold", "0.9",
                                                             "--lr-shrink", "0.5", "--lr-patience", "1"])
        want2 = {1: 1e-3, 2: 1e-3, 3: 1e-3, 4: 5e-4}
        check(p2.returncode == 0 and lrs2 == want2, f"--lr-patience 1: lr per epoch {lrs2} == {want2}")

        # Default threshold: the rule applied by hand to the logged valid losses.
        p3, _, valid3, lrs3 = train(b, os.path.join(tmp, "c"), ["--max-epoch", "4", "--lr", "0.01",
                                                                  "--lr-shrink", "0.3"])
        vl = [float(j["valid_loss"]) for j in valid3]
        by_hand = plateau_by_hand(vl[:3], 0.01, 0.3, 1e-4, 0)
        check(p3.returncode == 0 and len(vl) == 4 and [lrs3.get(e) for e in (1, 2, 3, 4)] == by_hand,
              f"default threshold: lr per epoch {lrs3} == by hand {by_hand} from valid losses {vl}")

        # Resume: 2 epochs, then 2 more, equal to the uninterrupted run "a".
        r = os.path.join(tmp, "r")
        flags = ["--lr-threshold", "0.9", "--lr-shrink", "0.5"]
        q1, inner1, _, _ = train(b, r, ["--max-epoch", "2"] + flags)
        meta = {}
        try:
            from safetensors import safe_open  # noqa: F401  (optional; the losses below are the check)
            with safe_open(os.path.join(r, "checkpoint_last.pt"), "np") as f:
                meta = json.loads(f.metadata()["train_state"]).get("lr_plateau", {})
        except ImportError:
            pass
        if meta:
            check(meta.get("lr") == 5e-4 and meta.get("last_epoch") == 2,
                  f"checkpoint_last's lr_plateau after 2 epochs: {meta} (lr 5e-4 for epoch 3)")
        q2, inner2, _, lrs_r = train(b, r, ["--max-epoch", "4"] + flags)
        got = [(j["num_updates"], j["loss"], j["lr"]) for j in inner1 + inner2]
        ref = [(j["num_updates"], j["loss"], j["lr"]) for j in inner]
        check(q1.returncode == 0 and q2.returncode == 0 and got == ref and len(ref) > 0,
              f"resumed after epoch 2: {len(got)} (update, loss, lr) equal to the uninterrupted run's {len(ref)}")
        # --reset-lr-scheduler: the reduced lr (the optimizer's) stays, the best loss goes, so epoch 3's
        # validation is an improvement again and epoch 4 keeps 5e-4.
        r2 = os.path.join(tmp, "r2")
        train(b, r2, ["--max-epoch", "2"] + flags)
        q3, _, _, lrs_reset = train(b, r2, ["--max-epoch", "4", "--reset-lr-scheduler"] + flags)
        check(q3.returncode == 0 and lrs_reset == {3: 5e-4, 4: 5e-4},
              f"--reset-lr-scheduler: epochs 3, 4 at {lrs_reset} == {{3: 5e-4, 4: 5e-4}}")

        p = run([b, "train", DATA, "--arch", "transformer_lm_tiny", "--lr-scheduler", "reduce_lr_on_plateau",
                 "--lr-threshold", "0.01", "--lr-patience", "3", "--lr-shrink", "0.7", "--dump-config"])
        sched = json.loads(p.stdout)["lr_scheduler"] if p.returncode == 0 else {}
        check(sched.get("_name") == "reduce_lr_on_plateau" and sched.get("lr_threshold") == 0.01
              and sched.get("lr_patience") == 3 and sched.get("lr_shrink") == 0.7,
              f"--dump-config has the reduce_lr_on_plateau flags ({sched})")
        nowhere = os.path.join(tmp, "no-such-data-bin")
        for flags, text in ((["--lr-shrink", "1"], "--lr-shrink 1: must be in [0, 1)"),
                            (["--lr", "0.1,0.2"], "--lr has 2 values, but --lr-scheduler reduce_lr_on_plateau"),
                            (["--lr-threshold", "-1"], "--lr-threshold -1: must be finite and >= 0"),
                            (["--lr-patience", "-1"], "--lr-patience")):
            p = run([b, "train", nowhere, "--arch", "transformer_lm_tiny", "--lr-scheduler",
                     "reduce_lr_on_plateau"] + flags)
            check(p.returncode == 2 and text in p.stderr and "no-such-data-bin" not in p.stderr,
                  f"{' '.join(flags)}: usage error '{text}' before the data is read ({p.stderr.strip()!r})")

    if failures:
        print(f"{len(failures)} failure(s)")
        return 1
    print("all reduce_lr_on_plateau checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
