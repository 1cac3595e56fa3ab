#!/usr/bin/env python3
"""--lr-scheduler tri_stage and triangular through the binary (issue 16): 12 updates of
transformer_lm_tiny on the committed fairseq fixture, the lr of each json train_inner line (the
lr after update n, fairseq's order: the next update's) against values worked out by hand from
fairseq's formulas; the flags in --dump-config; and the usage errors fairseq's classes would raise
(exit 2, naming the flag, before the data is read).
Usage: test_schedule_flags.py STRETCH_BINARY
"""
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "..", "fixtures", "fairseq", "data-bin")
failures = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        failures.append(what)


def run(args):
    return subprocess.run(args, capture_output=True, text=True, timeout=300)


def logged_lrs(b, flags):
    with tempfile.TemporaryDirectory() as tmp:
        p = run([b, "train", DATA, "--arch", "transformer_lm_tiny", "--optimizer", "adam", "--max-update", "12",
                 "--log-format", "json", "--log-interval", "1", "--no-save", "--save-dir", tmp, "--threads", "1",
                 "--tokens-per-sample", "16", "--batch-size", "4", "--disable-validation"] + flags)
    lrs = []
    for line in p.stdout.splitlines():
        if "| train_inner | {" in line:
            j = json.loads(line[line.index("{"):])
            lrs.append((int(j["num_updates"]), float(j["lr"])))
    return p, dict(lrs)


def close(got, want):
    return all(n in got and abs(got[n] - w) <= 1e-3 * abs(w) for n, w in want.items())  # the log's 4-5 digits


def main():
    b = sys.argv[1]
    # tri_stage, --lr 0.001: init 1e-5, rate (1e-3 − 1e-5)/4 = 2.475e-4; hold n = 4, 5; decay
    # 1e-3·0.01^((n − 6)/4) for n = 6..10; then 1e-5.
    p, got = logged_lrs(b, ["--lr", "0.001", "--lr-scheduler", "tri_stage", "--warmup-steps", "4", "--hold-steps", "2",
                            "--decay-steps", "4"])
    want = {1: 2.575e-4, 2: 5.05e-4, 3: 7.525e-4, 4: 1e-3, 5: 1e-3, 6: 1e-3, 7: 10 ** -3.5, 8: 1e-4,
            9: 10 ** -4.5, 10: 1e-5, 11: 1e-5, 12: 1e-5}
    check(p.returncode == 0 and close(got, want), f"tri_stage steps: logged lrs {got} ({p.stderr.strip()[-300:]!r})")
    # --phase-ratio '(0.25, 0.25, 0.5)' of --max-update 12: 3, 3, 6 steps; --init-lr-scale 0.5,
    # --final-lr-scale 0.1: warmup 5e-4 + n·5e-4/3, hold n = 3..5, decay 1e-3·0.1^((n − 6)/6).
    p, got = logged_lrs(b, ["--lr", "0.001", "--lr-scheduler", "tri_stage", "--phase-ratio", "(0.25, 0.25, 0.5)",
                            "--init-lr-scale", "0.5", "--final-lr-scale", "0.1"])
    want = {1: 5e-4 + 5e-4 / 3, 2: 5e-4 + 1e-3 / 3, 3: 1e-3, 5: 1e-3, 6: 1e-3, 9: 1e-3 * 0.1 ** 0.5, 12: 1e-4}
    check(p.returncode == 0 and close(got, want), f"tri_stage --phase-ratio: logged lrs {got}")
    # triangular --lr 1e-4 --max-lr 1e-3 --lr-period-updates 8 (step size 4) --lr-shrink 0.5:
    # cycle 0 peaks at n = 4 (1e-3), back to 1e-4 at n = 8; cycle 1 peaks at n = 12 at 5e-4.
    p, got = logged_lrs(b, ["--lr", "0.0001", "--lr-scheduler", "triangular", "--max-lr", "0.001",
                            "--lr-period-updates", "8", "--lr-shrink", "0.5"])
    want = {1: 1e-4 + 9e-4 * 0.25, 2: 5.5e-4, 4: 1e-3, 6: 5.5e-4, 8: 1e-4, 10: 1e-4 + 4e-4 * 0.5, 12: 5e-4}
    check(p.returncode == 0 and close(got, want), f"triangular: logged lrs {got}")
    p, got = logged_lrs(b, ["--lr", "0.0001", "--lr-scheduler", "triangular", "--max-lr", "0.001",
                            "--lr-period-updates", "8", "--lr-shrink", "0.5", "--shrink-min"])
    want = {8: 5e-5, 10: 5e-5 + 4.5e-4 * 0.5, 12: 5e-4}
    check(p.returncode == 0 and close(got, want), f"triangular --shrink-min: logged lrs {got}")

    p = run([b, "train", DATA, "--arch", "transformer_lm_tiny", "--lr-scheduler", "tri_stage", "--phase-ratio",
             "[0.1,0.4,0.5]", "--max-update", "100", "--init-lr-scale", "0.2", "--dump-config"])
    sched = json.loads(p.stdout)["lr_scheduler"] if p.returncode == 0 else {}
    check(sched.get("_name") == "tri_stage" and sched.get("phase_ratio") == "[0.1,0.4,0.5]"
          and sched.get("init_lr_scale") == 0.2, f"--dump-config has the tri_stage flags ({sched})")

    with tempfile.TemporaryDirectory() as tmp:
        nowhere = os.path.join(tmp, "no-such-data-bin")
        for flags, text in (
                (["--lr-scheduler", "triangular"], "--lr-scheduler triangular needs --max-lr"),
                (["--lr-scheduler", "triangular", "--lr", "0.1", "--max-lr", "0.05"], "--max-lr 0.05 must be more than --lr 0.1"),
                (["--lr-scheduler", "tri_stage"], "--decay-steps 0: must be > 0"),
                (["--lr-scheduler", "tri_stage", "--phase-ratio", "(0.5,0.5,0.5)", "--max-update", "10"], "must add up to 1"),
                (["--lr-scheduler", "tri_stage", "--phase-ratio", "0.5,0.5"], "--phase-ratio '0.5,0.5': expected 3 numbers"),
                (["--lr-scheduler", "tri_stage", "--decay-steps", "5", "--warmup-updates", "10"],
                 "--warmup-updates is not a tri_stage flag")):
            p = run([b, "train", nowhere, "--arch", "transformer_lm_tiny", "--batch-size", "4"] + flags)
            check(p.returncode == 2 and text in p.stderr and "no-such-data-bin" not in p.stderr,
                  f"{' '.join(flags)}: usage error '{text}' before the data is read ({p.stderr.strip()!r})")

    if failures:
        print(f"{len(failures)} failure(s)")
        return 1
    print("all schedule flag checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
