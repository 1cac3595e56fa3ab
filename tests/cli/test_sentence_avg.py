#!/usr/bin/env python3
"""train --sentence-avg through the binary (issue 16), fairseq 0.12.2's cross_entropy criterion:
sample_size = target.size(0) (the batch's rows: blocks with --sample-break-mode none, one line
each with eos) instead of the non-pad targets; the gradient is divided by it, "loss" is
Σ NLL / sample_size / ln 2, and "nll_loss" = Σ NLL / ntokens / ln 2 is logged with ppl = 2^nll_loss.
On the committed fixture, one update of transformer_lm_tiny, same seed with and without:
  * train_inner: nll_loss = the plain run's loss; loss = nll_loss · wpb/bsz (16 with full blocks of 16);
    ppl unchanged; gnorm = the plain run's · wpb/bsz (the same gradient, another divisor);
  * with --lr 0 (weights unchanged) the valid line: valid_nll_loss = the plain valid_loss and
    valid_loss = it · 930/59 (the valid split's 930 targets in 59 blocks of at most 16);
  * --sample-break-mode eos: a sentence is a line, loss / nll_loss = wpb / bsz of that batch;
  * without the flag no nll_loss key (fairseq logs it only when sample_size != ntokens).
Usage: test_sentence_avg.py STRETCH_BINARY
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


def train(b, flags):
    with tempfile.TemporaryDirectory() as tmp:
        p = subprocess.run([b, "train", DATA, "--arch", "transformer_lm_tiny", "--optimizer", "sgd", "--max-update", "1",
                            "--log-format", "json", "--log-interval", "1", "--no-save", "--save-dir", tmp, "--threads", "1",
                            "--tokens-per-sample", "16", "--batch-size", "4", "--dropout", "0"] + flags,
                           capture_output=True, text=True, timeout=300)
    lines = {}
    for line in p.stdout.splitlines():
        for kind in ("train_inner", "valid"):
            if f"| {kind} | {{" in line:
                lines[kind] = {k: float(v) if k != "epoch" else v for k, v in json.loads(line[line.index("{"):]).items()}
    return p, lines


def near(a, b, tol):
    return abs(a - b) <= tol


def main():
    b = sys.argv[1]
    p0, plain = train(b, ["--lr", "0.1"])
    p1, sa = train(b, ["--lr", "0.1", "--sentence-avg"])
    check(p0.returncode == 0 and p1.returncode == 0, f"both runs train ({p1.stderr.strip()[-300:]!r})")
    t0, t1 = plain.get("train_inner", {}), sa.get("train_inner", {})
    check("nll_loss" not in t0, "no nll_loss without --sentence-avg")
    ratio = t1.get("wpb", 0) / max(t1.get("bsz", 1), 1)
    check(ratio == 16, f"full blocks of 16: wpb/bsz = 16 ({ratio})")
    check(t1.get("nll_loss") == t0.get("loss") and t1.get("ppl") == t0.get("ppl"),
          f"nll_loss and ppl are the plain run's loss and ppl ({t1} vs {t0})")
    check(near(t1.get("loss", 0), t0.get("loss", 0) * ratio, 0.0005 * ratio + 0.0005),
          f"loss = nll_loss x wpb/bsz ({t1.get('loss')} vs {t0.get('loss', 0) * ratio})")
    check(near(t1.get("gnorm", 0), t0.get("gnorm", 0) * ratio, 0.0005 * ratio + 0.0005),
          f"gnorm = the plain gnorm x wpb/bsz ({t1.get('gnorm')} vs {t0.get('gnorm', 0) * ratio})")

    _, v0 = train(b, ["--lr", "0"])
    _, v1 = train(b, ["--lr", "0", "--sentence-avg"])
    a, c = v0.get("valid", {}), v1.get("valid", {})
    check("valid_nll_loss" not in a and c.get("valid_nll_loss") == a.get("valid_loss"),
          f"valid: valid_nll_loss = the plain valid_loss ({c} vs {a})")
    check(near(c.get("valid_loss", 0), a.get("valid_loss", 0) * 930 / 59, 0.0005 * 930 / 59 + 0.0005),
          f"valid: valid_loss = valid_nll_loss x 930/59 ({c.get('valid_loss')} vs {a.get('valid_loss', 0) * 930 / 59})")

    p2, eos = train(b, ["--lr", "0.1", "--sentence-avg", "--sample-break-mode", "eos"])
    t2 = eos.get("train_inner", {})
    r2 = t2.get("wpb", 0) / max(t2.get("bsz", 1), 1)
    check(p2.returncode == 0 and t2.get("bsz") == 4 and r2 != 16
          and near(t2.get("loss", 0), t2.get("nll_loss", 0) * r2, 0.0005 * r2 + 0.0005),
          f"eos: a sentence is a line, loss = nll_loss x wpb/bsz ({t2}, {p2.stderr.strip()[-200:]!r})")

    if failures:
        print(f"{len(failures)} failure(s)")
        return 1
    print("all --sentence-avg checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
