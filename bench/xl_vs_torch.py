#!/usr/bin/env python3
"""stretch's Transformer-XL and ALiBi-with-memory training against PyTorch on the same
configuration (issue 13: both >= 1.3x faster than PyTorch), in one run.

Sides, all at the same size (L layers, C, H heads of C/H, FFN F, T tokens per segment, M memory
rows, B streams, V = data-bin/enwik8's 200 symbols, dropout 0.1, attention dropout 0, Adam, the
full softmax):
  stretch_xl     stretch train --task truncated_bptt_lm --arch transformer_xl (bench/xl_vs_alibi.sh's)
  hf_xl          HF TransfoXLLMHeadModel trained as fairseq's transformer_xl (bench/torch_xl.py hf_xl)
  stretch_alibi  stretch train --arch transformer_lm --pos alibi --post-norm --mem-len M
  torch_alibi    the same model with the same memory in PyTorch (bench/torch_xl.py alibi_mem)
stretch's speed is fairseq's wps of each logged update after the first two (median); PyTorch's is
B·T over the median step time after 2 warm-up steps. Each thread count is measured in rounds
that alternate the order (A B C D, D C B A, ...); each side's number is the median over rounds.

OPENBLAS_CORETYPE: PyTorch (Debian's 1.13) multiplies through OpenBLAS, whose kernels follow
OPENBLAS_CORETYPE; as bench/compare.py does, the PyTorch sides run as the environment has it
("env"), with it unset when it is set ("unset") and forced to SKYLAKEX where the CPU has avx512f
("skx"); every side runs with OMP_WAIT_POLICY=passive; a variant whose final loss differs from env's by more than 1e-3 relative is not used,
and the fastest agreeing variant is the anchor (all are printed).
Usage (from the repository root, after building; data-bin/enwik8 from scripts/data.sh enwik8):
  python3 bench/xl_vs_torch.py [--build build] [--threads 1,2] [--rounds 2]
Environment of the sizes as bench/xl_vs_alibi.sh: T (512) M (512) L (2) C (256) H (4) F (1024) B (2).
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SKX = "SKYLAKEX"


def sizes():
    return {k: int(os.environ.get(k, d)) for k, d in
            (("T", 512), ("M", 512), ("L", 2), ("C", 256), ("H", 4), ("F", 1024), ("B", 2))}


def stretch_cmd(args, s, model, threads):
    common = ["--task", "truncated_bptt_lm", "--tokens-per-sample", str(s["T"]), "--batch-size", str(s["B"]),
              "--mem-len", str(s["M"]), "--dropout", "0.1", "--optimizer", "adam", "--clip-norm", "0.25", "--lr",
              "0.00025", "--max-update", str(args.updates), "--seed", "2", "--log-format", "json",
              "--log-interval", "1", "--no-progress-bar", "--no-save", "--disable-validation", "--threads",
              str(threads)]
    if model == "xl":
        arch = ["--arch", "transformer_xl", "--n-layer", str(s["L"]), "--d-model", str(s["C"]), "--n-head",
                str(s["H"]), "--d-head", str(s["C"] // s["H"]), "--d-inner", str(s["F"])]
    else:
        arch = ["--arch", "transformer_lm", "--pos", "alibi", "--post-norm", "--decoder-layers", str(s["L"]),
                "--decoder-embed-dim", str(s["C"]), "--decoder-attention-heads", str(s["H"]),
                "--decoder-ffn-embed-dim", str(s["F"])]
    return [os.path.join(args.build, "bin", "stretch"), "train", args.data] + common + arch


def run_stretch(args, s, model, threads):
    p = subprocess.run(stretch_cmd(args, s, model, threads), capture_output=True, text=True,
                       env=dict(os.environ, OMP_WAIT_POLICY="passive"))  # both sides (see run_torch)
    if p.returncode != 0:
        raise SystemExit(f"stretch train ({model}) exited {p.returncode}:\n{p.stderr[-2000:]}")
    wps, loss = [], None
    for line in (p.stdout + p.stderr).splitlines():
        m = re.search(r"\{.*\}", line)
        if not m or '"num_updates"' not in line or '"wps"' not in line:
            continue
        j = json.loads(m.group(0))
        if int(j["num_updates"]) > 2:
            wps.append(float(j["wps"]))
        loss = float(j.get("loss", "nan"))
    return {"tokens_per_s": statistics.median(wps), "loss": loss}


def run_torch(args, s, model, threads, variant):
    # Passive OpenMP waits as for stretch: spinning threads on a loaded host cost PyTorch 5-10x at 2 threads.
    env = dict(os.environ, OMP_WAIT_POLICY="passive")
    if variant == "unset":
        env.pop("OPENBLAS_CORETYPE", None)
    elif variant == "skx":
        env["OPENBLAS_CORETYPE"] = SKX
    cmd = [args.python, os.path.join(ROOT, "bench", "torch_xl.py"), model, "--threads", str(threads), "--layers",
           str(s["L"]), "--d-model", str(s["C"]), "--heads", str(s["H"]), "--d-inner", str(s["F"]),
           "--tokens-per-sample", str(s["T"]), "--mem-len", str(s["M"]), "--batch", str(s["B"]), "--vocab",
           str(args.vocab), "--steps", str(args.steps)]
    p = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if p.returncode != 0:
        raise SystemExit(f"torch_xl.py {model} ({variant}) exited {p.returncode}:\n{p.stderr[-2000:]}")
    return json.loads(p.stdout.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--data", default=os.path.join(ROOT, "data-bin", "enwik8"))
    ap.add_argument("--python", default=os.path.join(ROOT, "build", "fairseq-venv", "bin", "python"))
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--updates", type=int, default=8, help="stretch updates per run (the first two not timed)")
    ap.add_argument("--steps", type=int, default=6, help="timed PyTorch steps per run (after 2 warm-up)")
    args = ap.parse_args()
    dict_txt = os.path.join(args.data, "dict.txt")
    if not os.path.isfile(dict_txt):
        raise SystemExit(f"{dict_txt} is missing: run `bash scripts/data.sh enwik8 --source local --dest {args.data}`")
    with open(dict_txt) as f:
        args.vocab = 4 + sum(1 for _ in f)
    s = sizes()
    variants = ["env"]
    if "OPENBLAS_CORETYPE" in os.environ:
        variants.append("unset")
    with open("/proc/cpuinfo") as f:
        if " avx512f" in f.read() and os.environ.get("OPENBLAS_CORETYPE") != SKX:
            variants.append("skx")
    sides = [("stretch_xl", None), *[("hf_xl", v) for v in variants], ("stretch_alibi", None),
             *[("torch_alibi", v) for v in variants]]
    t0, load0 = time.time(), os.getloadavg()
    print(f"sizes {s}, V {args.vocab}; OPENBLAS_CORETYPE {os.environ.get('OPENBLAS_CORETYPE', 'unset')} in the "
          f"environment; variants {variants}; load {load0[0]:.1f} / {load0[1]:.1f}", flush=True)
    results = {}
    for threads in [int(t) for t in args.threads.split(",")]:
        for r in range(args.rounds):
            order = sides if r % 2 == 0 else list(reversed(sides))
            for side, variant in order:
                if side.startswith("stretch"):
                    out = run_stretch(args, s, "xl" if side == "stretch_xl" else "alibi", threads)
                else:
                    out = run_torch(args, s, "hf_xl" if side == "hf_xl" else "alibi_mem", threads, variant)
                results.setdefault((threads, side, variant), []).append(out)
                print(f"  threads {threads} round {r + 1} {side}{'/' + variant if variant else ''}: "
                      f"{out['tokens_per_s']:.1f} tokens/s, loss {out['loss']:.5f}", flush=True)
    print()
    print("| threads | stretch XL | HF TransfoXL (anchor) | XL speed-up | stretch ALiBi+mem | PyTorch ALiBi+mem "
          "(anchor) | ALiBi speed-up |")
    print("|---|---|---|---|---|---|---|")
    for threads in [int(t) for t in args.threads.split(",")]:
        row = [str(threads)]
        for mine, theirs in (("stretch_xl", "hf_xl"), ("stretch_alibi", "torch_alibi")):
            med = lambda k: statistics.median(o["tokens_per_s"] for o in results[k])  # noqa: E731
            ref_loss = results[(threads, theirs, "env")][0]["loss"]
            best = None
            for v in variants:
                runs = results[(threads, theirs, v)]
                if abs(runs[0]["loss"] - ref_loss) > 1e-3 * abs(ref_loss):
                    print(f"  {theirs}/{v} at {threads} threads: loss {runs[0]['loss']} vs env's {ref_loss}: not used",
                          file=sys.stderr)
                    continue
                if best is None or med((threads, theirs, v)) > med((threads, theirs, best)):
                    best = v
            a, b = med((threads, mine, None)), med((threads, theirs, best))
            others = ", ".join(f"{v} {med((threads, theirs, v)):.0f}" for v in variants)
            row += [f"{a:.0f}", f"{b:.0f} ({best}; {others})", f"{a / b:.2f}x"]
        print("| " + " | ".join(row) + " |")
    load1 = os.getloadavg()
    print(f"\nmedian of {args.rounds} alternating rounds per side; tokens/s; load at end {load1[0]:.1f} / "
          f"{load1[1]:.1f}; {time.time() - t0:.0f} s in all")


if __name__ == "__main__":
    main()
