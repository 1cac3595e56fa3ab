#!/usr/bin/env python3
"""train --log-file FILE against REAL fairseq 0.12.2 (the venv of tests/fairseq/setup_fairseq.sh), on the
fixture data-bin (tests/fixtures/fairseq), 2 epochs with validation, simple and json formats:
 1. which loggers reach the file: of the stdout lines "<time> | INFO | <logger> | <message>", fairseq's
    file holds the messages of exactly fairseq_cli.train and the progress bar's tags (train_inner, train,
    valid), bare; stretch's file holds the messages of the same loggers, and none of the others
    (fairseq.checkpoint_utils, fairseq.trainer, ...);
 2. the progress lines: from "Start iterating over samples" on, the file's lines with every number masked
    are fairseq's, once fairseq's repeats are dropped (fairseq adds one more FileHandler to the progress
    bar's logger at each epoch, so its epoch N writes each progress line N times; stretch writes it once);
 3. a second run resuming in the same save dir appends to the file (fairseq's FileHandler mode "a").
Without the venv: tests/oracle_skip.py (a failure under CI=true, a loud skip elsewhere).
  --binary: no oracle: the file is the bare messages of stdout's fairseq_cli.train and progress lines, in
    order, each once; json lines parse; the resume appends; a directory, a missing directory and an
    unwritable file are refused before training (exit 2 / 1, the path named, no save dir made); /dev/full
    warns once and the training finishes with its checkpoints.
Usage: check_log_file.py STRETCH_BINARY FAIRSEQ_VENV | check_log_file.py STRETCH_BINARY --binary
"""
import json
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.append(os.path.join(HERE, ".."))
import oracle_skip  # noqa: E402
from testlib import check, finish  # noqa: E402

DATA = os.path.join(HERE, "..", "fixtures", "fairseq", "data-bin")
TRAIN = ("--task language_modeling --arch transformer_lm --decoder-layers 1 --decoder-embed-dim 32 "
         "--decoder-ffn-embed-dim 64 --decoder-attention-heads 2 --tokens-per-sample 32 --max-tokens 256 "
         "--optimizer adam --lr 0.001 --seed 1 --no-epoch-checkpoints --log-interval 5").split()
LINE = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d \| \w+ \| ([\w.]+) \| (.*)$")
PROGRESS = {"fairseq_cli.train", "train_inner", "train", "valid"}


def run(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300, **kw)


def split_loggers(stdout, file_lines):
    """(loggers whose messages are in the file, loggers whose messages are not)."""
    inside, outside = set(), set()
    lines = set(file_lines)
    for line in stdout.splitlines():
        m = LINE.match(line)
        if m:
            (inside if m.group(2) in lines else outside).add(m.group(1))
    return inside, outside


def masked_progress(file_lines, dedup):
    start = file_lines.index("Start iterating over samples") if "Start iterating over samples" in file_lines else 0
    out, last = [], None
    for line in file_lines[start:]:
        if not (dedup and line == last):
            out.append(re.sub(r"-?\d+(\.\d+)?(e[-+]?\d+)?", "N", line))
        last = line
    return out


def train(cmd, save, log, fmt, epochs):
    return run(cmd + [DATA] + TRAIN + ["--save-dir", save, "--log-file", log, "--log-format", fmt,
                                       "--max-epoch", str(epochs)])


def with_oracle(stretch, venv, tmp):
    fs_train = [os.path.join(venv, "bin", "fairseq-train")]
    for fmt in ("simple", "json"):
        fs_log, st_log = os.path.join(tmp, f"fs_{fmt}.log"), os.path.join(tmp, f"st_{fmt}.log")
        fs = train(fs_train + ["--cpu"], os.path.join(tmp, f"fs_{fmt}"), fs_log, fmt, 2)
        st = train([stretch, "train", "--threads", "1"], os.path.join(tmp, f"st_{fmt}"), st_log, fmt, 2)
        if not check(fs.returncode == 0 and st.returncode == 0,
                     f"{fmt}: both train 2 epochs (fairseq {fs.returncode}, stretch {st.returncode}: "
                     f"{(fs.stderr + st.stderr).strip()[-300:]!r})"):
            continue
        fs_lines, st_lines = open(fs_log).read().splitlines(), open(st_log).read().splitlines()
        fs_in, fs_out = split_loggers(fs.stdout, fs_lines)
        st_in, st_out = split_loggers(st.stdout, st_lines)
        check(fs_in == PROGRESS and st_in == fs_in and not (st_out & fs_in),
              f"{fmt}: the file holds the loggers {sorted(fs_in)} in fairseq, {sorted(st_in)} in stretch "
              f"(left out: fairseq {sorted(fs_out)}, stretch {sorted(st_out)})")
        a, b = masked_progress(fs_lines, dedup=True), masked_progress(st_lines, dedup=False)
        check(a == b, f"{fmt}: the progress lines, numbers masked, are fairseq's ({len(a)} and {len(b)} lines)"
              + ("" if a == b else f"\n  fairseq: {a}\n  stretch: {b}"))
        dup = masked_progress(fs_lines, dedup=False)
        check(len(dup) > len(a), f"{fmt}: (fairseq repeats its epoch-2 lines: {len(dup)} lines before dropping "
                                 f"repeats, {len(a)} after)")


def binary(stretch, tmp):
    save, log = os.path.join(tmp, "st"), os.path.join(tmp, "train.log")
    cmd = [stretch, "train", "--threads", "1"]
    p = train(cmd, save, log, "simple", 2)
    lines = open(log).read().splitlines() if os.path.exists(log) else []
    want = [m.group(2) for m in map(LINE.match, p.stdout.splitlines()) if m and m.group(1) in PROGRESS]
    check(p.returncode == 0 and lines == want and len(want) > 10,
          f"simple: the file is stdout's fairseq_cli.train and progress messages, bare, in order ({len(lines)} lines)")
    check(not any(LINE.match(x) for x in lines) and not any("checkpoint_utils" in x for x in lines),
          "simple: no time, level or logger prefix, no checkpoint_utils line")
    # Resume: 1 more epoch appends.
    p2 = train(cmd, save, log, "json", 3)
    lines2 = open(log).read().splitlines()
    added = lines2[len(lines):]
    want2 = [m.group(2) for m in map(LINE.match, p2.stdout.splitlines()) if m and m.group(1) in PROGRESS]
    check(p2.returncode == 0 and lines2[:len(lines)] == lines and added == want2,
          f"json resume: appended after the first run's {len(lines)} lines ({len(added)} new)")
    parsed = [json.loads(x) for x in added if x.startswith("{")]
    check(any("train_loss" in x for x in parsed) and any("loss" in x and "epoch" in x for x in parsed),
          f"json resume: the progress lines are JSON ({len(parsed)} of them)")

    # Refused before training: nothing made.
    os.makedirs(os.path.join(tmp, "ro"))
    ro_file = os.path.join(tmp, "ro", "x.log")
    open(ro_file, "w").close()
    os.chmod(ro_file, 0o444)
    cases = [(tmp, 2, "is a directory"), (os.path.join(tmp, "no", "such", "x.log"), 1, "does not exist")]
    if os.geteuid() != 0:  # root writes through 0444
        cases.append((ro_file, 1, "cannot write"))
    for path, code, words in cases:
        bad_save = os.path.join(tmp, "bad")
        q = train(cmd, bad_save, path, "simple", 1)
        first = next((x for x in q.stderr.splitlines() if "error" in x), "")
        check(q.returncode == code and "--log-file" in first and path in first and words in first
              and not os.path.exists(bad_save),
              f"--log-file {path}: exit {q.returncode} (want {code}), nothing made: {first!r}")
    # A full disk: one warning, the training goes on.
    full_save = os.path.join(tmp, "full")
    q = train(cmd, full_save, "/dev/full", "simple", 1)
    warned = [x for x in q.stderr.splitlines() if "--log-file /dev/full: cannot write" in x]
    check(q.returncode == 0 and len(warned) == 1 and os.path.exists(os.path.join(full_save, "checkpoint_last.pt")),
          f"--log-file /dev/full: one warning, the run finishes ({q.returncode}, {warned})")


def main():
    usage = oracle_skip.fairseq_or_binary(__doc__, with_oracle, binary, "real fairseq-train --log-file")
    return usage if usage is not None else finish()

if __name__ == "__main__":
    sys.exit(main())
