#!/usr/bin/env python3
"""tests/train/signal_stress.py — SIGINT/SIGTERM at random moments of `stretch train` (issue 17).

Each run resumes the previous one's checkpoint_last.pt (one save directory), waits for its first
logged update, sleeps a random 0..--max-delay seconds and sends SIGINT or SIGTERM (chosen at
random). Every run must exit 128+sig by itself (not 134 "corrupted size vs. prev_size" or 139:
oneDNN issue #4845, docs/architecture.md "Signals"), say "received signal", leave
checkpoint_last.pt, and the next run must start at the update after the last one logged. Then
one uninterrupted run to the last update must log bit-identical JSON fields (the literal text of
loss, ppl, lr, gnorm, ...) at every update.

usage: signal_stress.py --stretch BIN [--signals N] [--short-signals N] [--seed S] [--max-delay SEC] [--arch ARCH]
  default --short-signals (40) signals; STRETCH_LONG=1 makes it 200; --signals N fixes the count.
  The sanitizer build (scripts/test.sh --sanitize) registers it with --short-signals 20. Exit 0: all clean; 1: a failure (listed).
"""
import argparse
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time

FIELDS = ("epoch", "loss", "ppl", "lr", "gnorm", "clip", "wpb", "bsz")


def synthetic_text(lines, seed, vocab=4000):
    """4..12 words a line, mostly one of two successors per word. A large vocabulary makes the
    output layer's weight-gradient GEMM (k = tokens > 252) most of the time: the oneDNN kernel
    that moves rsp into a heap workspace (#4845), where the old handler corrupted the heap."""
    rng = random.Random(seed)
    out = []
    for _ in range(lines):
        w, words = rng.randrange(vocab), []
        for _ in range(rng.randrange(4, 13)):
            words.append(f"w{w}")
            w = rng.randrange(vocab) if rng.randrange(4) == 0 else (w * 7 + 3 + rng.randrange(2)) % vocab
        out.append(" ".join(words))
    return "\n".join(out) + "\n"


def make_data_bin(stretch, work):
    for split, lines, seed in (("train", 2000, 1), ("valid", 20, 2)):
        with open(os.path.join(work, f"{split}.txt"), "w") as f:
            f.write(synthetic_text(lines, seed))
    dest = os.path.join(work, "data-bin")
    subprocess.run([stretch, "preprocess", "--only-source", "--trainpref", os.path.join(work, "train.txt"),
                    "--validpref", os.path.join(work, "valid.txt"), "--destdir", dest],
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    return dest


def train_args(stretch, data, save_dir, max_update, arch):
    # Dropout on (its masks are replayed on resume); a narrow model and one thread, so the
    # signal (delivered to the main thread) mostly lands in that GEMM; validation and a save at
    # every epoch end (~30 updates).
    return [stretch, "train", data, "--arch", arch, "--decoder-embed-dim", "64", "--decoder-ffn-embed-dim", "128",
            "--decoder-attention-heads", "2", "--tokens-per-sample", "64", "--batch-size", "8",
            "--required-batch-size-multiple", "1", "--dropout", "0.1", "--optimizer", "adam", "--lr", "0.001",
            "--clip-norm", "1.0", "--max-update", str(max_update), "--seed", "5", "--log-format", "json", "--log-full-precision",
            "--log-interval", "1", "--threads", "1", "--no-progress-bar", "--save-dir", save_dir]


def records(stdout):
    """{num_updates: {field: literal text}} of the train_inner JSON lines."""
    recs = {}
    for line in stdout.splitlines():
        if " | {" in line and '"num_updates"' in line:  # fairseq's "DATE | INFO | train_inner | {...}"
            j = json.loads(line[line.index(" | {") + 3:], parse_float=str, parse_int=str)
            recs[int(j["num_updates"])] = {k: j[k] for k in FIELDS}
    return recs


def run_and_signal(args, sig, delay, timeout=120):
    """Starts args, waits for the first logged update, sleeps `delay`, sends sig; returns
    (status as a shell sees it, stdout, stderr)."""
    p = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out, err, first = [], [], threading.Event()

    def pump_out():
        for line in p.stdout:
            out.append(line)
            if '"num_updates"' in line:
                first.set()
        first.set()

    def pump_err():
        err.append(p.stderr.read())

    threads = [threading.Thread(target=pump_out), threading.Thread(target=pump_err)]
    for t in threads:
        t.start()
    if first.wait(timeout) and p.poll() is None:
        time.sleep(delay)
        p.send_signal(sig)
    try:
        p.wait(timeout)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()
    for t in threads:
        t.join()
    rc = p.returncode if p.returncode >= 0 else 128 - p.returncode
    return rc, "".join(out), "".join(err)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--stretch", required=True)
    ap.add_argument("--signals", type=int, default=None)
    ap.add_argument("--short-signals", type=int, default=40, help="the count without STRETCH_LONG=1")
    ap.add_argument("--seed", type=int, default=int(time.time()))
    ap.add_argument("--max-delay", type=float, default=0.8)
    ap.add_argument("--arch", default="transformer_lm_tiny")
    ap.add_argument("--no-reference", action="store_true", help="only the clean-exit checks (repro counts)")
    a = ap.parse_args()
    if a.signals is None:
        a.signals = 200 if os.environ.get("STRETCH_LONG") == "1" else a.short_signals
    rng = random.Random(a.seed)
    t0 = time.time()
    failures, chain = [], {}
    with tempfile.TemporaryDirectory(prefix="stretch-signals-") as work:
        data = make_data_bin(a.stretch, work)
        save_dir = os.path.join(work, "ckpt")
        ckpt = os.path.join(save_dir, "checkpoint_last.pt")
        abnormal, last = {}, 0
        for i in range(a.signals):
            sig = rng.choice((signal.SIGINT, signal.SIGTERM))
            rc, out, err = run_and_signal(train_args(a.stretch, data, save_dir, 10**9, a.arch), sig,
                                          rng.uniform(0, a.max_delay))
            recs = records(out)
            why = []
            if rc != 128 + sig:
                why.append(f"exit {rc}, expected {128 + sig}")
                abnormal[rc] = abnormal.get(rc, 0) + 1
            elif f"received signal {int(sig)}" not in err:
                why.append("no 'received signal' message")
            if not os.path.exists(ckpt):
                why.append("no checkpoint_last.pt")
            if not recs:
                why.append("no update logged")
            elif min(recs) != last + 1:
                why.append(f"started at update {min(recs)}, expected {last + 1} (checkpoint_last not at the stop)")
            for u, r in recs.items():
                if u in chain and chain[u] != r:
                    why.append(f"update {u} logged differently after resume")
                chain[u] = r
            if recs:
                last = max(recs)
            if why:
                tail = err.strip().splitlines()[-3:]
                failures.append(f"signal {i + 1} ({signal.Signals(sig).name}): " + "; ".join(why) +
                                (" | stderr: " + " / ".join(tail) if tail else ""))
        print(f"{a.signals} signals (seed {a.seed}, {a.arch}): {a.signals - len(failures)} clean stops, "
              f"abnormal exits {abnormal or 0}, {last} updates in all, {time.time() - t0:.0f} s")
        if not a.no_reference and last > 0:
            p = subprocess.run(train_args(a.stretch, data, os.path.join(work, "ref"), last, a.arch),
                               capture_output=True, text=True)
            ref = records(p.stdout)
            if p.returncode != 0:
                failures.append(f"uninterrupted run: exit {p.returncode}: {p.stderr.strip()[-300:]}")
            missing = [u for u in range(1, last + 1) if u not in chain]
            if missing:
                failures.append(f"updates never logged by the interrupted runs: {missing[:10]}")
            diff = [u for u in sorted(ref) if chain.get(u) != ref[u]]
            if diff:
                u = diff[0]
                failures.append(f"resume not exact at {len(diff)} updates; first {u}: "
                                f"interrupted {chain.get(u)} vs uninterrupted {ref[u]}")
            elif len(ref) != last:
                failures.append(f"uninterrupted run logged {len(ref)} updates, expected {last}")
            else:
                print(f"resume exact: {last} updates bit-identical to one uninterrupted run, {time.time() - t0:.0f} s")
    for f in failures:
        print("FAIL:", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
