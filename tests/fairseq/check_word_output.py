#!/usr/bin/env python3
"""eval-lm's fairseq word-level output against REAL fairseq-eval-lm 0.12.2's:
--output-word-probs, --output-word-stats, --post-process / --remove-bpe (data-bin-bpe: every third
symbol a subword-nmt piece), --num-shards / --shard-id, with and without --context-window.
The expected lines are tests/fixtures/fairseq/word_output.json (make_word_output.sh: what
fairseq_eval_lines.py captured from the unchanged fairseq_cli.eval_lm). For each case stretch
eval-lm runs with the same flags and must print the same sample lines (same ids in the same
order, the same words, each ln p within 2e-5 of fairseq's and printed with 6 decimals), the same
word-stats lines (word, count, is_bpe and next-word count equal; the sums within 1e-4 + 1e-5·|x|,
written as Python's repr), the same "Evaluated N tokens" and a Loss within 2e-4 (4 decimals).
With --live it reruns real fairseq on one case (all under STRETCH_LONG=1) and requires the
committed lines back (ln p values within 1e-5, fairseq prints 6 decimals: its ATen kernels are chosen by
the CPU's vector width, and the fixtures, made on an AVX2 host, come back 4e-6 apart on an AVX-512 one):
without the venv that is tests/oracle_skip.py (a failure under CI=true).
Usage: check_word_output.py STRETCH_BINARY [--live FAIRSEQ_VENV]
"""
import json
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
FIX = os.path.join(HERE, "..", "fixtures", "fairseq")

# name: (data dir under FIX, checkpoint under FIX, eval-lm flags); also read by make_word_output.sh.
# (shard/window has 15 batches, 5 per shard: fairseq 0.12.2 crashes with KeyError 'net_input' when
# a context-window shard is padded with an empty batch; stretch has no such case to avoid.)
CASES = {
    "probs_stats/blocks": ("data-bin", "sin_post_tied.pt",
                           ["--tokens-per-sample", "16", "--output-word-probs", "--output-word-stats"]),
    "probs/window": ("data-bin", "learned_pre_untied.pt",
                     ["--tokens-per-sample", "16", "--context-window", "8", "--output-word-probs"]),
    "bpe/blocks": ("data-bin-bpe", "sin_post_tied.pt",
                   ["--tokens-per-sample", "16", "--post-process", "@@ ", "--output-word-probs",
                    "--output-word-stats"]),
    "bpe/window": ("data-bin-bpe", "nopos_pre_tied.pt",
                   ["--tokens-per-sample", "16", "--context-window", "4", "--remove-bpe", "@@ ",
                    "--output-word-probs"]),
    "remove_bpe_alone": ("data-bin-bpe", "sin_post_tied.pt", ["--tokens-per-sample", "16", "--remove-bpe"]),
    "shard/blocks": ("data-bin", "sin_post_tied.pt",
                     ["--tokens-per-sample", "16", "--max-tokens", "64", "--num-shards", "3", "--shard-id", "1",
                      "--output-word-probs"]),
    "shard/window": ("data-bin", "learned_pre_untied.pt",
                     ["--tokens-per-sample", "16", "--context-window", "8", "--max-tokens", "64", "--num-shards",
                      "3", "--shard-id", "2", "--output-word-probs"]),
}

SAMPLE = re.compile(r"^(\d+) (.*)$")
WORD = re.compile(r"^(.*) \[(-?(?:\d+\.\d{6}|inf))\]$")
REPR = re.compile(r"^-?(?:\d+\.\d+(?:e[+-]\d+)?|\d(?:\.\d+)?e[+-]\d+|inf)$")


def parse(lines):
    """(samples [(id, [(word, lp)])], stats [[6 fields]], tokens, loss)"""
    samples, stats, tokens, loss = [], [], None, None
    for x in lines:
        m = re.match(r"^Evaluated (\d+) tokens", x)
        if m:
            tokens = int(m.group(1))
            continue
        m = re.match(r"^Loss \(base 2\): ([0-9.]+), Perplexity", x)
        if m:
            loss = float(m.group(1))
            continue
        m = SAMPLE.match(x)
        if m and "[" in x:
            words = []
            for w in m.group(2).split("\t"):
                wm = WORD.match(w)
                if not wm:
                    raise ValueError(f"not a word entry {w!r} in {x[:80]!r}")
                words.append((wm.group(1), wm.group(2)))
            samples.append((int(m.group(1)), words))
            continue
        f = x.split("\t")
        if len(f) == 6:
            stats.append(f)
    return samples, stats, tokens, loss


def close(a, b, tol):
    return float(a) == float(b) or abs(float(a) - float(b)) <= tol


def compare(name, want, got, lp_tol, failures):
    ws, wt, wtok, wloss = parse(want)
    gs, gt, gtok, gloss = parse(got)
    if [i for i, _ in ws] != [i for i, _ in gs]:
        failures.append(f"{name}: sample ids {[i for i, _ in gs][:12]}... vs fairseq's {[i for i, _ in ws][:12]}...")
        return
    worst = 0.0
    for (i, w), (_, g) in zip(ws, gs):
        if [x for x, _ in w] != [x for x, _ in g]:
            failures.append(f"{name}: sample {i} words {[x for x, _ in g]} vs fairseq's {[x for x, _ in w]}")
            return
        for (_, a), (_, b) in zip(w, g):
            worst = max(worst, abs(float(a) - float(b)) if a != b else 0.0)
    if worst > lp_tol:
        failures.append(f"{name}: a word's ln p differs by {worst:.2e} (> {lp_tol})")
    if len(wt) != len(gt):
        failures.append(f"{name}: {len(gt)} word-stats lines vs fairseq's {len(wt)}")
    for a, b in zip(wt, gt):
        if (a[0], a[1], a[3], a[5]) != (b[0], b[1], b[3], b[5]):
            failures.append(f"{name}: stats line {b} vs fairseq's {a}")
            break
        if not (REPR.match(b[2]) and (b[4] == "0" or REPR.match(b[4]))) or (a[4] == "0") != (b[4] == "0"):
            failures.append(f"{name}: stats sums {b[2]!r} {b[4]!r} not written as fairseq's {a[2]!r} {a[4]!r}")
            break
        if not close(a[2], b[2], 1e-4 + 1e-5 * abs(float(a[2]))) or not close(a[4], b[4], 1e-4 + 1e-5 * abs(float(a[4]))):
            failures.append(f"{name}: stats sums {b} vs fairseq's {a}")
            break
    if wtok != gtok:
        failures.append(f"{name}: Evaluated {gtok} tokens vs fairseq's {wtok}")
    if wloss is None or gloss is None or abs(wloss - gloss) > 2e-4:
        failures.append(f"{name}: Loss (base 2) {gloss} vs fairseq's {wloss}")
    print(f"{name}: {len(gs)} samples, {len(gt)} stats lines, {gtok} tokens, loss {gloss} (fairseq {wloss}), "
          f"largest ln p difference {worst:.1e}")


def main():
    stretch = sys.argv[1]
    live = sys.argv[2:3] == ["--live"]
    with open(os.path.join(FIX, "word_output.json")) as f:
        expected = json.load(f)
    if set(expected) != set(CASES):
        raise SystemExit(f"FAIL: word_output.json has cases {sorted(expected)}, the test {sorted(CASES)}: "
                         "rerun tests/fixtures/fairseq/make_word_output.sh")
    failures = []
    if live:
        sys.path.append(os.path.join(HERE, ".."))
        import oracle_skip
        venv = os.path.abspath(sys.argv[3])
        py = os.path.join(venv, "bin", "python")
        if not os.path.exists(os.path.join(venv, "bin", "fairseq-eval-lm")) or "fairseq" in oracle_skip.hidden():
            oracle_skip.missing("fairseq", install="tests/fairseq/setup_fairseq.sh (makes " + venv + ")",
                                detail="real fairseq-eval-lm")
        names = sorted(CASES) if os.environ.get("STRETCH_LONG") == "1" else ["bpe/blocks"]
        for name in names:
            data, ckpt, flags = CASES[name]
            p = subprocess.run([py, os.path.join(HERE, "fairseq_eval_lines.py"), data, "--path", ckpt, "--cpu",
                                "--gen-subset", "valid"] + flags, capture_output=True, text=True, cwd=FIX)
            if p.returncode != 0:
                raise SystemExit(f"FAIL: fairseq-eval-lm {name} exited {p.returncode}:\n{p.stderr[-3000:]}")
            got = [x for x in json.loads(p.stdout) if not x.startswith("Evaluated ")]  # (timing)
            want = [x for x in expected[name]["lines"] if not x.startswith("Evaluated ")]
            compare(name + " (real fairseq now vs committed)", want, got, 1e-5, failures)
            if len(got) != len(want):
                failures.append(f"{name}: real fairseq now logs {len(got)} lines, word_output.json {len(want)}")
    else:
        for name, (data, ckpt, flags) in CASES.items():
            p = subprocess.run([stretch, "eval-lm", data, "--path", ckpt, "--gen-subset", "valid"] + flags,
                               capture_output=True, text=True, cwd=FIX)
            if p.returncode != 0:
                failures.append(f"{name}: stretch eval-lm exited {p.returncode}: {p.stderr[-2000:]}")
                continue
            compare(name, expected[name]["lines"], p.stdout.splitlines(), 2e-5, failures)
    for f in failures:
        print("FAIL:", f)
    if failures:
        sys.exit(1)
    print("all cases agree")


if __name__ == "__main__":
    main()
