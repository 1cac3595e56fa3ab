#!/usr/bin/env python3
"""Honest defaults and the explosion warning, through the binary (issue 16):
  * no --optimizer: fairseq 0.12.2 refuses ("--optimizer is required!", fairseq/optim/__init__.py
    registers it with required=True); stretch trains with nag and says so once, naming the --lr and
    --lr-scheduler it uses; those are fairseq's defaults (OptimizationConfig.lr = [0.25],
    lr_scheduler "fixed" in fairseq/dataclass/configs.py), read from --dump-config;
  * a validation loss over 10x the initial one (the first validation's, at most log2 V; or non-finite) gives exactly one warning naming the
    likely causes (the --lr and optimizer, no warmup, no clipping); a sane run gives none.
Usage: test_defaults_explosion.py STRETCH_BINARY
"""
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from testlib import failures, check, finish  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "..", "fixtures", "fairseq", "data-bin")


def main():
    b = sys.argv[1]
    tiny = [b, "train", DATA, "--arch", "transformer_lm_tiny", "--decoder-layers", "1", "--decoder-embed-dim", "16",
            "--decoder-ffn-embed-dim", "32", "--decoder-attention-heads", "2", "--tokens-per-sample", "16",
            "--batch-size", "8", "--threads", "1", "--log-format", "simple", "--seed", "2"]
    p = subprocess.run(tiny + ["--dump-config"], capture_output=True, text=True)
    cfg = json.loads(p.stdout) if p.returncode == 0 else {}
    check(p.returncode == 0, "--dump-config without --optimizer runs")
    check(cfg.get("optimization", {}).get("lr") in (0.25, [0.25]), f"--lr defaults to fairseq's [0.25] ({cfg.get('optimization')})")
    check(cfg.get("lr_scheduler", {}).get("_name") == "fixed", "--lr-scheduler defaults to fairseq's fixed")
    check(p.stderr.count("no --optimizer given (fairseq 0.12.2 refuses that): using nag with --lr 0.25 "
                         "(fairseq's default) and --lr-scheduler fixed") == 1, f"one notice naming them ({p.stderr!r})")
    p = subprocess.run(tiny + ["--optimizer", "adam", "--dump-config"], capture_output=True, text=True)
    check(p.returncode == 0 and "no --optimizer given" not in p.stderr, "no notice with --optimizer")

    with tempfile.TemporaryDirectory() as tmp:
        runs = {"sane": ["--optimizer", "adam", "--lr", "0.001"], "exploding": ["--optimizer", "sgd", "--lr", "3000"]}
        for name, flags in runs.items():
            p = subprocess.run(tiny + flags + ["--max-update", "8", "--save-interval-updates", "2", "--no-save",
                                               "--save-dir", os.path.join(tmp, name)],
                               capture_output=True, text=True, timeout=600)
            n = p.stderr.count("the validation loss exploded")
            print(f"--- {name}: exit {p.returncode}")
            print("\n".join(x for x in (p.stdout + p.stderr).splitlines() if "valid on" in x or "exploded" in x))
            if name == "sane":
                check(p.returncode == 0 and n == 0, "a sane run: no explosion warning")
            else:
                check(n == 1, f"an exploding run: exactly one warning (found {n})")
                check("Likely causes: --lr 3000.0 may be too high for --optimizer sgd; there is no warmup "
                      "(--warmup-updates 0); gradients are not clipped (--clip-norm 0)" in p.stderr,
                      "it names the likely causes")
    sys.exit(finish())


if __name__ == "__main__":
    main()
