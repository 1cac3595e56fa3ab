#!/usr/bin/env python3
"""Repeated options through the binary (issue 16): in every subcommand an option given twice takes
the last value, as fairseq's argparse does (no error, no concatenation):
  * train: --lr 0.1 --lr 0.2 and --tokens-per-sample 16 --tokens-per-sample 8 -> 0.2 and 8 in --dump-config;
  * eval-lm: --tokens-per-sample 16 --tokens-per-sample 8 -> the header says L = 8 and the loss is
    the plain L = 8 run's;
  * sweep: --lengths 8,16 --lengths 8 evaluates only 8 (the list is replaced, not extended), and a
    repeated --path keeps the last checkpoint; a bad item in the last list is still refused;
  * generate: --max-len 3 --max-len 5 -> 5 new tokens (greedy);
  * preprocess: --destdir A --destdir B -> B written, A never created.
Usage: test_repeated_options.py STRETCH_BINARY
"""
import csv
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
FIX = os.path.join(HERE, "..", "fixtures", "fairseq")
DATA = os.path.join(FIX, "data-bin")
SIN = os.path.join(FIX, "sin_post_tied.pt")
LEARNED = os.path.join(FIX, "learned_pre_untied.pt")
failures = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        failures.append(what)


def run(args):
    return subprocess.run(args, capture_output=True, text=True, timeout=300)


def main():
    b = sys.argv[1]
    one = ["--threads", "1"]

    p = run([b, "train", DATA, "--arch", "transformer_lm_tiny", "--lr", "0.1", "--lr", "0.2",
             "--tokens-per-sample", "16", "--tokens-per-sample", "8", "--dump-config"])
    cfg = json.loads(p.stdout) if p.returncode == 0 else {}
    flat = json.dumps(cfg)
    check(p.returncode == 0 and '"lr": 0.2' in flat and '"lr": 0.1' not in flat,
          f"train: --lr 0.1 --lr 0.2 gives lr 0.2 ({p.stderr.strip()[-200:]!r})")
    tps = cfg.get("task", {}).get("tokens_per_sample")
    check(tps == 8, f"train: the last --tokens-per-sample wins ({tps})")

    ev = [b, "eval-lm", DATA, "--path", SIN, "--gen-subset", "valid"] + one

    def loss_line(p):
        return [x for x in p.stdout.splitlines() if x.startswith("Loss")]

    twice = run(ev + ["--tokens-per-sample", "16", "--tokens-per-sample", "8"])
    once = run(ev + ["--tokens-per-sample", "8"])
    other = run(ev + ["--tokens-per-sample", "16"])
    check(twice.returncode == 0 and "L = 8" in twice.stdout, f"eval-lm: the header says L = 8 ({twice.stderr[-200:]!r})")
    check(loss_line(twice) == loss_line(once) and loss_line(once) and loss_line(once) != loss_line(other),
          f"eval-lm: the loss is the L = 8 run's ({loss_line(twice)} vs {loss_line(once)} / {loss_line(other)})")

    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "sw")
        p = run([b, "sweep", DATA, "--path", LEARNED, "--path", SIN, "--lengths", "8,16", "--lengths", "8",
                 "--results-dir", out] + one)
        rows = list(csv.DictReader(open(os.path.join(out, "sweep.csv")))) if p.returncode == 0 else []
        check(p.returncode == 0 and [r["eval_length"] for r in rows] == ["8"],
              f"sweep: --lengths 8,16 --lengths 8 evaluates 8 only ({[r.get('eval_length') for r in rows]}, "
              f"{p.stderr.strip()[-200:]!r})")
        check([os.path.basename(r["checkpoint"]) for r in rows] == ["sin_post_tied.pt"],
              f"sweep: the last --path wins ({[r.get('checkpoint') for r in rows]})")
        p = run([b, "sweep", DATA, "--path", SIN, "--lengths", "8", "--lengths", "8,0", "--results-dir", out] + one)
        check(p.returncode == 2 and "--lengths: 0 is not allowed" in p.stderr,
              f"sweep: a bad length in the last --lengths is refused naming the flag ({p.stderr.strip()!r})")

        gen = [b, "generate", DATA, "--path", SIN, "--prompt", "a", "--temperature", "0"] + one
        p = run(gen + ["--max-len", "3", "--max-len", "5"])
        q = run(gen + ["--max-len", "5"])
        text = [x for x in p.stdout.splitlines() if x.strip()]
        check(p.returncode == 0 and text and len(text[-1].split()) == 1 + 5 and p.stdout == q.stdout,
              f"generate: --max-len 3 --max-len 5 generates 5 tokens, as --max-len 5 ({p.stdout!r}, {p.stderr[-200:]!r})")

        a, bdir = os.path.join(tmp, "a"), os.path.join(tmp, "b")
        p = run([b, "preprocess", "--only-source", "--trainpref", os.path.join(FIX, "train.txt"),
                 "--destdir", a, "--destdir", bdir])
        check(p.returncode == 0 and os.path.exists(os.path.join(bdir, "train.bin")) and not os.path.exists(a),
              f"preprocess: the last --destdir is written, the first never created ({p.stderr.strip()[-200:]!r})")

    if failures:
        print(f"{len(failures)} failure(s)")
        return 1
    print("all repeated-option checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
