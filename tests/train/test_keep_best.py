#!/usr/bin/env python3
"""train --keep-best-checkpoints N through the binary against fairseq 0.12.2's rule
(checkpoint_utils.save_checkpoint), replayed here from the validation lines stretch logged:
  name  = "checkpoint.best_<metric>_{v:.3f}{r}.pt", v the logged (3-decimal) validation loss,
          r = np.random.randint(0, N) after np.random.seed(int(hash((epoch, updates, v)) % 1e6))
          (Python's own hash and numpy: the oracle, not stretch's code);
  write when no such file exists and v <= the running best, else when v <= the worst file's value
  read back from its name (the digit glued on: float("4.1232")); >= for maximize;
  prune to the N best after each save.
Two runs of 10 updates, validating and saving every update: minimize (N = 3) and
--maximize-best-checkpoint-metric (N = 2); the checkpoint.best_* files left must be exactly the
replay's, and each must be a complete checkpoint (`stretch info` reads it).
numpy comes from build/pyenv or build/fairseq-venv; without it: tests/oracle_skip.py.
Usage: test_keep_best.py STRETCH_BINARY
"""
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..", "..")
sys.path.append(os.path.join(HERE, ".."))
import oracle_skip  # noqa: E402

DATA = os.path.join(ROOT, "tests", "fixtures", "fairseq", "data-bin")
ORACLE = r"""
import json, sys
import numpy as np
out = []
for epoch, updates, v, keep in json.loads(sys.argv[1]):
    np.random.seed(int(hash((epoch, updates, v)) % 1e6))
    out.append(int(np.random.randint(0, keep)))
print(json.dumps(out))
"""


def numpy_python():
    for py in (os.path.join(ROOT, "build", "pyenv", "bin", "python"),
               os.path.join(ROOT, "build", "fairseq-venv", "bin", "python"), sys.executable):
        if os.path.exists(py) and "numpy" not in oracle_skip.hidden() and subprocess.run(
                [py, "-c", "import numpy"], capture_output=True).returncode == 0:
            return py
    oracle_skip.missing("numpy", install="scripts/setup.sh (python3-numpy, build/pyenv)",
                        detail="np.random.randint after numpy_seed, as fairseq draws the tie digit")


def replay(vals, keep, maximize, py):
    """The files fairseq would leave, from [(epoch, updates, v)]."""
    import json
    digits = json.loads(subprocess.run([py, "-c", ORACLE, json.dumps([[e, u, v, keep] for e, u, v in vals])],
                                       capture_output=True, text=True, check=True).stdout)
    files, best = {}, None
    better = (lambda a, b: a >= b) if maximize else (lambda a, b: a <= b)
    for (e, u, v), r in zip(vals, digits):
        best = v if best is None else (max if maximize else min)(v, best)
        worst = best
        if files:
            ordered = sorted(((float(re.fullmatch(r"checkpoint\.best_loss_(\d+\.?\d*)\.pt", f).group(1)), f)
                              for f in files), reverse=True)
            worst = ordered[-1][0] if maximize else ordered[0][0]
        if better(v, worst):
            files["checkpoint.best_loss_{:.3f}{}.pt".format(v, r)] = True
        ordered = sorted(((float(re.fullmatch(r"checkpoint\.best_loss_(\d+\.?\d*)\.pt", f).group(1)), f)
                          for f in files), reverse=True)
        if not maximize:
            ordered = ordered[::-1]
        for _, f in ordered[keep:]:
            del files[f]
    return sorted(files)


def main():
    b = sys.argv[1]
    py = numpy_python()
    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        for keep, maximize in ((3, False), (2, True)):
            save = os.path.join(tmp, f"ck{keep}")
            cmd = [b, "train", DATA, "--arch", "transformer_lm_tiny", "--decoder-layers", "1", "--decoder-embed-dim",
                   "16", "--decoder-ffn-embed-dim", "32", "--decoder-attention-heads", "2", "--tokens-per-sample", "16",
                   "--batch-size", "8", "--optimizer", "adam", "--lr", "0.01", "--max-update", "10", "--threads", "1",
                   "--save-interval-updates", "1", "--no-epoch-checkpoints", "--log-format", "simple",
                   "--keep-best-checkpoints", str(keep), "--save-dir", save, "--seed", "3"]
            if maximize:
                cmd.append("--maximize-best-checkpoint-metric")
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
            if p.returncode != 0:
                failures.append(f"train exited {p.returncode}: {p.stderr[-2000:]}")
                continue
            vals = [(int(m.group(1)), int(m.group(3)), float(m.group(2))) for m in re.finditer(
                r"valid \| epoch (\d+) \| valid on 'valid' subset \| loss ([0-9.]+) \|.*?\| num_updates (\d+)",
                p.stdout + p.stderr)]
            if len(vals) < 10:
                failures.append(f"expected 10 validations, found {len(vals)}")
                continue
            want = replay(vals, keep, maximize, py)
            got = sorted(f for f in os.listdir(save) if f.startswith("checkpoint.best_"))
            print(f"N={keep} maximize={maximize}: losses {[v for _, _, v in vals]}\n  fairseq's rule: {want}\n"
                  f"  stretch left:   {got}")
            if got != want:
                failures.append(f"N={keep} maximize={maximize}: {got} != {want}")
            for f in got:
                q = subprocess.run([b, "info", os.path.join(save, f)], capture_output=True, text=True)
                if q.returncode != 0:
                    failures.append(f"{f} is not a readable checkpoint: {q.stderr[-500:]}")
            if not os.path.exists(os.path.join(save, "checkpoint_best.pt")) or not os.path.exists(
                    os.path.join(save, "checkpoint_last.pt")):
                failures.append("checkpoint_best.pt / checkpoint_last.pt are still written")
    for f in failures:
        print("FAIL:", f)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
