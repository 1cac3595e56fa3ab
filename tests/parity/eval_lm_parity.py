#!/usr/bin/env python3
"""End-to-end eval-lm parity: the stretch binary against the PyTorch oracle (check_eval_lm.py).

usage: eval_lm_parity.py --stretch build/bin/stretch --pos alibi [--adaptive] [--keep DIR]

--adaptive: the model has an adaptive input and a tied adaptive softmax with tied projections
(the wiki103 layout at cutoffs 12,24, factor 2) trained with --criterion adaptive_loss; eval-lm
scores only the target's head and tail rows, the oracle takes the full log-softmax (REFERENCE §2.5).

For one position method, in a temporary directory:
  1. a synthetic corpus (seeded; 40 word types, lines of 3-9 words) -> `stretch preprocess`;
  2. `stretch train` a tiny model (2 layers, C 32, 4 heads, F 64) at L_train = 16 for 8 updates,
     so the weights are trained, not just initialised;
  3. the ALiBi README's fairseq-eval-lm command (REFERENCE.md §4.4), program name swapped, on
     the valid split with --results-json, at l = L_train and l = 2 L_train (learned: l <= its
     table of 16, so l = 16 and 8), each non-overlapping (--context-window 0) and sliding
     (--context-window l-1); and once with --stride 5 (= --context-window l-5);
  4. the split's token stream read from valid.{idx,bin} by the MMIDIDX reader below (written
     from the format, REFERENCE.md §4.2, not from stretch's reader) into a safetensors `tokens`;
  5. check_eval_lm.py for each run: count exactly, loss and ppl to 1e-4 (its docstring).
Exit 0 all agree; 1 a disagreement or a failed stretch command (printed); 77 torch missing (1 under CI=true).
"""

import argparse
import os
import random
import struct
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

sys.path.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import oracle_skip  # noqa: E402  (tests/oracle_skip.py: missing torch fails under CI=true, else exits 77)

oracle_skip.require("torch")
import torch  # noqa: E402

import check_eval_lm
from stretch_oracle.safetensors_io import save_file

# MMIDIDX v1 dtype codes (fairseq indexed_dataset._code_to_dtype).
CODES = {1: ("B", 1), 2: ("b", 1), 3: ("h", 2), 4: ("i", 4), 5: ("q", 8), 8: ("H", 2), 9: ("I", 4), 10: ("Q", 8)}


def read_stream(prefix):
    """All items of PREFIX.{idx,bin} concatenated: .idx = magic 'MMIDIDX\\0\\0', u64 version 1,
    u8 dtype code, u64 n, i32 sizes[n], i64 byte pointers[n] (fairseq 0.12); .bin = the ids."""
    with open(prefix + ".idx", "rb") as f:
        if f.read(9) != b"MMIDIDX\x00\x00":
            raise SystemExit(f"{prefix}.idx: bad magic")
        (version,) = struct.unpack("<Q", f.read(8))
        (code,) = struct.unpack("<B", f.read(1))
        (n,) = struct.unpack("<Q", f.read(8))
        sizes = struct.unpack(f"<{n}i", f.read(4 * n))
        pointers = struct.unpack(f"<{n}q", f.read(8 * n))
    if version != 1 or code not in CODES:
        raise SystemExit(f"{prefix}.idx: version {version}, dtype code {code} not understood")
    fmt, width = CODES[code]
    with open(prefix + ".bin", "rb") as f:
        raw = f.read()
    out = []
    for size, ptr in zip(sizes, pointers):
        out.extend(struct.unpack(f"<{size}{fmt}", raw[ptr:ptr + size * width]))
    return out


def corpus(lines, seed):
    rng = random.Random(seed)
    return "".join(" ".join(f"w{rng.randrange(40)}" for _ in range(rng.randrange(3, 10))) + "\n"
                   for _ in range(lines))


def run(cmd):
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if r.returncode != 0:
        print(" ".join(cmd) + "\n" + r.stdout, file=sys.stderr)
        raise SystemExit(1)
    return r.stdout


def readme_eval(stretch, data, ckpt, l, c, result):
    """REFERENCE.md §4.4's command, program name swapped, plus --results-json."""
    return [stretch, "eval-lm", data, "--path", ckpt, "--sample-break-mode", "none", "--gen-subset", "valid",
            "--max-sentences", "1", "--model-overrides",
            f"{{'max_tokens':{l}, 'tokens_per_sample':{l}, 'max_target_positions':{l}}}",
            "--tokens-per-sample", str(l), "--max-tokens", str(l), "--max-target-positions", str(l),
            "--context-window", str(c), "--threads", "1", "--results-json", result]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--stretch", required=True)
    ap.add_argument("--pos", required=True, choices=("alibi", "sinusoidal", "learned", "rope", "t5", "none"))
    ap.add_argument("--adaptive", action="store_true", help="adaptive input + tied adaptive softmax")
    ap.add_argument("--keep", help="work in this directory and keep it")
    args = ap.parse_args()
    work = args.keep or tempfile.mkdtemp(prefix="stretch-eval-parity-")
    os.makedirs(work, exist_ok=True)
    for split, lines, seed in (("train", 200, 1), ("valid", 30, 2)):
        with open(os.path.join(work, f"{split}.txt"), "w") as f:
            f.write(corpus(lines, seed))
    data = os.path.join(work, "bin")
    run([args.stretch, "preprocess", "--only-source", "--trainpref", os.path.join(work, "train.txt"),
         "--validpref", os.path.join(work, "valid.txt"), "--destdir", data])
    save = os.path.join(work, "ckpt")
    run([args.stretch, "train", data, "--arch", "transformer_lm_tiny", "--pos", args.pos, "--decoder-layers", "2",
         "--decoder-embed-dim", "32", "--decoder-ffn-embed-dim", "64", "--decoder-attention-heads", "4",
         "--max-target-positions", "16", "--tokens-per-sample", "16", "--max-tokens", "128", "--max-update", "8",
         "--optimizer", "nag", "--lr", "0.5", "--clip-norm", "0.1", "--save-dir", save, "--no-epoch-checkpoints",
         "--disable-validation", "--threads", "1", "--seed", "3"] +
        (["--adaptive-input", "--adaptive-input-cutoff", "12,24", "--adaptive-softmax-cutoff", "12,24",
          "--adaptive-input-factor", "2", "--adaptive-softmax-factor", "2", "--tie-adaptive-weights",
          "--tie-adaptive-proj", "--adaptive-softmax-dropout", "0.1", "--criterion", "adaptive_loss"]
         if args.adaptive else []))
    ckpt = os.path.join(save, "checkpoint_last.pt")
    stream = os.path.join(work, "valid.tokens.safetensors")
    save_file(stream, {"tokens": torch.tensor(read_stream(os.path.join(data, "valid")), dtype=torch.int32)})

    lengths = (16, 8) if args.pos == "learned" else (16, 32)
    runs = [(l, c) for l in lengths for c in (0, l - 1)] + [(lengths[1], lengths[1] - 5)]
    failed = 0
    for i, (l, c) in enumerate(runs):
        result = os.path.join(work, f"result{i}.json")
        cmd = readme_eval(args.stretch, data, ckpt, l, c, result)
        if i == len(runs) - 1:  # the --stride form of the same evaluation
            cmd[cmd.index("--context-window"):cmd.index("--context-window") + 2] = ["--stride", str(l - c)]
        run(cmd)
        print(f"== {args.pos}: l {l}, " + (f"stride {l - c}" if i == len(runs) - 1 else f"context window {c}"))
        rc = check_eval_lm.main(["--checkpoint", ckpt, "--stream", stream, "--tokens-per-sample", str(l),
                                 "--context-window", str(c), "--result", result])
        failed += rc != 0
    print(f"eval_lm_parity {args.pos}{' adaptive' if args.adaptive else ''}: {'FAIL' if failed else 'ok'} ({len(runs) - failed}/{len(runs)} agree)")
    if not args.keep:
        import shutil
        shutil.rmtree(work, ignore_errors=True)
    return 1 if failed else 0


if __name__ == "__main__":
    torch.set_num_threads(1)
    sys.exit(main())
