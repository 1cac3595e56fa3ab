#!/usr/bin/env python3
"""eval-lm --sample-break-mode eos|complete against REAL fairseq-eval-lm 0.12.2 (the venv of
tests/fairseq/setup_fairseq.sh), on the committed fairseq checkpoints and data-bin (tests/fixtures/fairseq):
 1. for eos and complete, with --context-window 0 and 8, on a sinusoidal post-norm and a learned pre-norm
    model at --tokens-per-sample 32: Loss (base 2) within 1e-6 relative, the same "Evaluated N tokens", every
    token's NLL within 5e-6 (fairseq logs ln p to 6 decimals); lines longer than the model's
    max_target_positions are skipped by both (fairseq's warning: the same count and, at --context-window 0,
    the same first sample ids);
 2. --model-overrides "{'max_target_positions': 256}" on the sinusoidal model: nothing skipped, the same
    numbers in both.
Without the venv: tests/oracle_skip.py (a failure under CI=true, a loud skip elsewhere).
  --binary: no oracle: eos/complete skip exactly the lines longer than max_target_positions (the token count
    is the kept lines' tokens, from the data-bin's .idx), differ from none; with the limit raised they count
    every token of the split; eos/complete with --kv-cache or --task truncated_bptt_lm, and complete_doc,
    are usage errors naming the flag.
Usage: check_break_modes.py STRETCH_BINARY FAIRSEQ_VENV | check_break_modes.py STRETCH_BINARY --binary
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

FIX = os.path.join(HERE, "..", "fixtures", "fairseq")
DATA = os.path.join(FIX, "data-bin")
MODELS = ("sin_post_tied.pt", "learned_pre_untied.pt")
BASE = ["--gen-subset", "valid", "--tokens-per-sample", "32"]
WARNING = re.compile(r"(\d+) samples have invalid sizes and will be skipped, max_positions=(\d+), "
                     r"first few sample ids=\[([\d, ]*)\]")


def run(cmd):
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300)


def stretch_eval(stretch, tmp, ckpt, flags):
    rj, nll = os.path.join(tmp, "r.json"), os.path.join(tmp, "nll.tsv")
    p = run([stretch, "eval-lm", DATA, "--path", os.path.join(FIX, ckpt), "--threads", "1", "--results-json", rj,
             "--dump-nll", nll] + BASE + flags)
    if p.returncode != 0:
        return None, p.stderr
    r = json.load(open(rj))
    rows = sorted((int(x.split("\t")[0]), float(x.split("\t")[2])) for x in open(nll).read().splitlines()[1:] if x)
    r["nll"] = [v for _, v in rows]
    return r, p.stderr


def fairseq_eval(venv, ckpt, flags):
    p = run([os.path.join(venv, "bin", "python"), os.path.join(HERE, "fairseq_eval.py"), DATA, "--path",
             os.path.join(FIX, ckpt), "--cpu"] + BASE + flags)
    if p.returncode != 0:
        return None, p.stderr
    return json.loads(p.stdout.strip().splitlines()[-1]), p.stderr


def with_oracle(stretch, venv, tmp):
    cases = [(m, mode, cw) for m in MODELS for mode in ("eos", "complete") for cw in ("0", "8")]
    cases.append((MODELS[0], "eos", "0", "--model-overrides", "{'max_target_positions': 256}"))
    for ckpt, mode, cw, *more in cases:
        flags = ["--sample-break-mode", mode, "--context-window", cw] + more
        what = f"{ckpt} {' '.join(flags)}"
        fs, fs_err = fairseq_eval(venv, ckpt, flags)
        st, st_err = stretch_eval(stretch, tmp, ckpt, flags)
        if not check(fs is not None and st is not None, f"{what}: both evaluate ({(fs_err + st_err)[-300:]!r})"):
            continue
        rel = abs(st["loss_base2"] - fs["loss_base2"]) / fs["loss_base2"]
        worst = max((abs(a - b) for a, b in zip(st["nll"], fs["nll"])), default=float("inf"))
        check(rel < 1e-6 and st["count"] == fs["tokens"] == len(fs["nll"]) == len(st["nll"]) and worst < 5e-6,
              f"{what}: loss {st['loss_base2']:.7f} / fairseq {fs['loss_base2']:.7f} (rel {rel:.1e}), "
              f"{st['count']} / {fs['tokens']} tokens, worst token {worst:.1e}")
        a, b = WARNING.findall(fs_err), WARNING.findall(st_err)
        same = [x[:2] for x in a] == [x[:2] for x in b] and (cw != "0" or a == b)
        check(same and (a != [] or more), f"{what}: skipped lines: fairseq {a}, stretch {b}")


def line_lengths(prefix):
    """The token count of every item of a fairseq MMIDIDX .idx: magic (9 bytes), u64 version, u8 dtype,
    u64 N, int32 sizes[N], ... (fairseq/data/indexed_dataset.py, MMapIndexedDataset.Index)."""
    with open(prefix + ".idx", "rb") as f:
        data = f.read()
    n = struct.unpack("<Q", data[18:26])[0]
    return list(struct.unpack(f"<{n}i", data[26:26 + 4 * n]))


def binary(stretch, tmp):
    sizes = line_lengths(os.path.join(DATA, "valid"))
    limit = 32  # the sinusoidal fixture's max_target_positions (= its tokens_per_sample)
    kept = sum(s for s in sizes if s <= limit)
    none, _ = stretch_eval(stretch, tmp, MODELS[0], [])
    for mode in ("eos", "complete"):
        r, err = stretch_eval(stretch, tmp, MODELS[0], ["--sample-break-mode", mode])
        w = WARNING.findall(err)
        check(r is not None and r["count"] == kept and w and int(w[0][0]) == sum(s > limit for s in sizes)
              and r["loss_base2"] != none["loss_base2"],
              f"{mode}: the {sum(s > limit for s in sizes)} lines over {limit} tokens skipped, {kept} tokens scored "
              f"({r and r['count']}, {w})")
        r, err = stretch_eval(stretch, tmp, MODELS[0], ["--sample-break-mode", mode, "--model-overrides",
                                                        "{'max_target_positions': 1000}"])
        check(r is not None and r["count"] == sum(sizes) == none["count"] and not WARNING.findall(err),
              f"{mode} with max_target_positions 1000: every token ({r and r['count']} of {sum(sizes)})")
    ck = os.path.join(FIX, MODELS[0])
    for flags, words in ((["--sample-break-mode", "eos", "--kv-cache"], "--sample-break-mode eos with --kv-cache"),
                         (["--sample-break-mode", "complete", "--task", "truncated_bptt_lm"],
                          "--sample-break-mode complete with --task truncated_bptt_lm"),
                         (["--sample-break-mode", "complete_doc"], "--sample-break-mode: complete_doc not in")):
        p = run([stretch, "eval-lm", DATA, "--path", ck] + BASE + flags)
        check(p.returncode == 2 and words in p.stderr, f"{' '.join(flags)}: usage error ({p.stderr.strip()[:160]!r})")


def main():
    usage = oracle_skip.fairseq_or_binary(__doc__, with_oracle, binary, "real fairseq-eval-lm --sample-break-mode")
    return usage if usage is not None else finish()


if __name__ == "__main__":
    sys.exit(main())
