#!/usr/bin/env python3
"""tests/eval/test_eval_progress.py — eval-lm's and sweep's progress, through the binary.

- The header ("stretch | eval-lm | valid | non-overlapping, L = 16") is the first stdout line;
  off a terminal stderr gets a line per tenth, ending at the total the result reports.
- Under a pseudo-terminal stderr shows the bar (tokens/s, ETA) and clears it.
- SIGINT while evaluating (the test hook STRETCH_TEST_EVAL_STALL_AFTER_PASS holds it after pass 3):
  exit 130, the partial result on stdout, equal to the mean NLL of the first K targets of a complete
  run's --dump-nll dump; no --results-json written, the interrupted dump removed.
- sweep shows the same progress for each cell.
usage: test_eval_progress.py --stretch BIN
"""
import argparse
import math
import os
import pty
import re
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from testlib import failures, check, finish, synthetic_text, run, read_pty  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--stretch", required=True)
    b = ap.parse_args().stretch
    tmp = tempfile.mkdtemp(prefix="stretch-eval-progress-")
    for name, lines, seed in (("train", 40, 1), ("valid", 60, 2)):
        with open(os.path.join(tmp, name + ".txt"), "w") as f:
            f.write(synthetic_text(lines, seed, vocab=200))
    data = os.path.join(tmp, "data-bin")
    p = run([b, "preprocess", "--only-source", "--trainpref", os.path.join(tmp, "train.txt"), "--validpref",
             os.path.join(tmp, "valid.txt"), "--destdir", data])
    assert p.returncode == 0, p.stderr
    save = os.path.join(tmp, "ck")
    p = run([b, "train", data, "--arch", "transformer_lm_tiny", "--decoder-layers", "1", "--decoder-embed-dim", "16",
             "--decoder-ffn-embed-dim", "32", "--decoder-attention-heads", "2", "--tokens-per-sample", "16",
             "--batch-size", "4", "--required-batch-size-multiple", "1", "--optimizer", "adam", "--lr", "1e-3",
             "--max-update", "3", "--threads", "1", "--disable-validation", "--save-dir", save])
    assert p.returncode == 0, p.stderr
    ck = os.path.join(save, "checkpoint_last.pt")
    ev = [b, "eval-lm", data, "--path", ck, "--gen-subset", "valid", "--tokens-per-sample", "16", "--max-sentences",
          "1", "--threads", "1"]

    # Off a terminal: the header first, lines per tenth on stderr, the last at the total.
    full_dump = os.path.join(tmp, "full.tsv")
    r = run(ev + ["--dump-nll", full_dump])
    check(r.returncode == 0, f"eval-lm exit {r.returncode}: {r.stderr}")
    out = r.stdout.splitlines()
    check(out[0] == "stretch | eval-lm | valid | non-overlapping, L = 16", f"header {out[0]!r}")
    total = int(re.search(r"Evaluated (\d+) tokens", r.stdout).group(1))
    lines = re.findall(r"stretch \| progress \| eval-lm valid: (\d+)/(\d+) tokens \((\d+)%\), [\d.]+ tokens/s, "
                       r"ETA (\d\d:\d\d|\?)", r.stderr)
    check(len(lines) == 10, f"{len(lines)} progress lines, one per tenth: {r.stderr[:500]}")
    check([int(d) for d, _, _, _ in lines] == sorted(int(d) for d, _, _, _ in lines), "progress only grows")
    check(lines and int(lines[-1][0]) == total and int(lines[-1][1]) == total, "the last line is at the total")

    # On a terminal: the bar, cleared at the end.
    master, slave = pty.openpty()
    t = subprocess.Popen(ev, stdout=subprocess.PIPE, stderr=slave, text=True)
    tout, _ = t.communicate(timeout=300)
    os.close(slave)
    bar = read_pty(master)
    os.close(master)
    check(t.returncode == 0, "eval-lm on a terminal")
    check(re.search(r"eval-lm valid:\s+\d+%\|[█▏▎▍▌▋▊▉ ]*\| \d+/" + str(total) +
                    r" tokens \[\d\d:\d\d<(\d\d:\d\d|\?), [\d.]+ tokens/s\]", bar) is not None,
          f"the bar on the terminal: {bar[:300]!r}")
    check(bar.endswith("\r"), "the bar is cleared at the end")
    check("stretch | progress" not in bar, "no progress lines on a terminal")

    # SIGINT: the partial result, exit 130, nothing claiming the whole split.
    dump = os.path.join(tmp, "partial.tsv")
    res = os.path.join(tmp, "partial.json")
    env = dict(os.environ, STRETCH_TEST_EVAL_STALL_AFTER_PASS="3")
    c = subprocess.Popen(ev + ["--output-word-probs-file", dump, "--results-json", res], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, env=env)
    err = ""
    deadline = time.time() + 120
    while "stretch-test: eval stalled after pass 3" not in err and time.time() < deadline:
        line = c.stderr.readline()
        if not line:
            break
        err += line
    c.send_signal(signal.SIGINT)
    pout, perr = c.communicate(timeout=120)
    err += perr
    check(c.returncode == 130, f"exit {c.returncode} after SIGINT (want 130): {err}")
    m = re.search(r"Partial result \(interrupted\): (\d+) of (\d+) tokens", pout)
    check(m is not None, f"the partial result is printed: {pout!r}")
    if m:
        k = int(m.group(1))
        check(0 < k < total and int(m.group(2)) == total, f"partial {k} of {m.group(2)} (total {total})")
        rows = [l.split("\t") for l in open(full_dump).read().splitlines()[1:]]
        want = sum(float(x[2]) for x in rows[:k]) / k / math.log(2)
        got = float(re.search(r"Loss \(base 2\): ([\d.]+)", pout).group(1))
        check(abs(got - want) < 1e-4, f"partial loss {got} vs the first {k} targets of the full dump {want:.4f}")
    check("stopped by signal 2" in err and "partial" in err, f"the warning says what happened: {err}")
    check(not os.path.exists(res), "no --results-json for a partial run")
    check(not os.path.exists(dump), "the interrupted --output-word-probs-file dump is removed")

    # sweep: each cell shows its progress.
    s = run([b, "sweep", data, "--path", ck, "--gen-subset", "valid", "--lengths", "16,32", "--threads", "1",
             "--max-sentences", "1",
             "--results-dir", os.path.join(tmp, "sweep")])
    check(s.returncode == 0, f"sweep exit {s.returncode}: {s.stderr}")
    for L in (16, 32):
        n = len(re.findall(r"stretch \| progress \| sweep [^:]* L=" + str(L) + r": \d+/\d+ tokens", s.stderr))
        check(n == 10, f"sweep cell L={L}: {n} progress lines")

    return finish(f"ok: eval-lm/sweep progress, SIGINT partial result ({total} tokens)")


if __name__ == "__main__":
    sys.exit(main())
