#!/usr/bin/env python3
"""--shorten-method / --shorten-data-split-list (fairseq's maybe_shorten_dataset, data/shorten_dataset.py) against
REAL fairseq 0.12.2 (the venv of tests/fairseq/setup_fairseq.sh), on the fixture data-bin (tests/fixtures/fairseq),
whose lines are longer than the 16 tokens of these runs:
 1. fairseq-train and stretch train with --sample-break-mode eos (one line per block, so a shortened line is a
    block of its own and every crop shows in the loss) for 6 updates of adam from the same fairseq-trained start,
    with --shorten-method truncate and with random_crop (crops drawn under numpy_seed(seed, 0, index): fairseq's
    language_modeling never passes the epoch on): every update's loss within 1e-3 relative (fairseq's 3
    decimals) and the same wpb and bsz; controls: without shortening, and random_crop with another --seed, the
    losses differ (and so a wrong crop would show);
 2. fairseq-eval-lm and stretch eval-lm of that start with --sample-break-mode eos and each method, and with
    --shorten-data-split-list train (valid left whole): the same loss (1e-6 relative), counts and per-token NLLs;
    control: without shortening, eval-lm leaves the lines longer than 16 out (fewer tokens scored).
Without the venv: tests/oracle_skip.py (a failure under CI=true, a loud skip elsewhere).
  --binary: no oracle: truncate and random_crop train and resume (3 + 3 updates = 6, bit for bit); the dumped
    config holds the flags; --shorten-method with --task truncated_bptt_lm and with eval-lm --kv-cache, and an
    unknown method, are refused naming the flag.
Usage: check_shorten.py STRETCH_BINARY FAIRSEQ_VENV | check_shorten.py STRETCH_BINARY --binary
"""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.append(os.path.join(HERE, ".."))
sys.path.insert(0, HERE)
import checklib  # noqa: E402
from checklib import DATA, compare_eval, fairseq_eval, run, stretch_eval, trajectory  # noqa: E402
from testlib import check  # noqa: E402

MODEL = checklib.tiny_model(2, max_tokens=128)
MODEL[MODEL.index("--tokens-per-sample") + 1] = "16"
FS_TRAIN = MODEL + checklib.FS_TRAIN_FLAGS + ["--sample-break-mode", "eos"]


def with_oracle(stretch, venv, tmp):
    py = os.path.join(venv, "bin", "python")
    fairseq_train = os.path.join(venv, "bin", "fairseq-train")
    base_dir = os.path.join(tmp, "base")
    run([fairseq_train, DATA] + FS_TRAIN + ["--lr", "0.005", "--max-update", "3", "--save-dir", base_dir])
    base = os.path.join(base_dir, "checkpoint_last.pt")
    tail = ["--lr", "0.005", "--max-update", "6", "--finetune-from-model", base]
    losses = {}
    for method, extra in (("truncate", []), ("random_crop", []), ("random_crop", ["--seed", "2"])):
        flags = ["--shorten-method", method] + extra
        name = " ".join(flags)
        d = os.path.join(tmp, name.replace(" ", "_"))
        fs = trajectory([fairseq_train, DATA] + FS_TRAIN + tail + flags + ["--save-dir", d + "_fs"], "fairseq-train")
        st = trajectory([stretch, "train", DATA] + FS_TRAIN + tail + flags + ["--pos", "sinusoidal",
                        "--log-full-precision", "--threads", "1", "--save-dir", d + "_st"], "stretch train")
        check(len(fs) == len(st) == 6, f"{name}: {len(fs)} fairseq and {len(st)} stretch updates logged, 6 each")
        worst = max(abs(s[1] - f[1]) / f[1] for f, s in zip(fs, st))
        same = all(f[0] == s[0] and f[2] == s[2] and f[3] == s[3] for f, s in zip(fs, st))
        check(worst <= 1e-3 and same, f"{name}: every update's loss within {worst:.1e} rel of fairseq-train's, "
                                      f"wpb and bsz equal: {[round(s[1], 4) for s in st]} vs {[f[1] for f in fs]}")
        losses[name] = [s[1] for s in st]
    st = trajectory([stretch, "train", DATA] + FS_TRAIN + tail + ["--pos", "sinusoidal", "--log-full-precision",
                    "--threads", "1", "--save-dir", os.path.join(tmp, "plain")], "stretch train")
    losses["none"] = [s[1] for s in st]
    names = list(losses)
    check(all(losses[a] != losses[b] for i, a in enumerate(names) for b in names[i + 1:]),
          f"controls: the four runs ({', '.join(names)}) log four different trajectories")

    for flags in (["--shorten-method", "truncate"], ["--shorten-method", "random_crop"],
                  ["--shorten-method", "random_crop", "--seed", "3"],
                  ["--shorten-method", "truncate", "--shorten-data-split-list", "train"]):
        ev = ["--tokens-per-sample", "16", "--sample-break-mode", "eos"] + flags
        compare_eval(fairseq_eval(py, base, ev), stretch_eval(stretch, base, ev, tmp), "eval-lm " + " ".join(flags))
    whole = stretch_eval(stretch, base, ["--tokens-per-sample", "16", "--sample-break-mode", "eos"], tmp)
    cut = stretch_eval(stretch, base, ["--tokens-per-sample", "16", "--sample-break-mode", "eos",
                                       "--shorten-method", "truncate"], tmp)
    check(cut["count"] > whole["count"], f"control: with truncate {cut['count']} tokens are scored, without it "
                                         f"{whole['count']} (the lines longer than 16 are left out, as in fairseq)")


def binary(stretch, tmp):
    train = [stretch, "train", DATA, "--arch", "transformer_lm_tiny", "--tokens-per-sample", "16", "--batch-size", "8",
             "--sample-break-mode", "eos", "--threads", "1", "--disable-validation", "--no-epoch-checkpoints",
             "--log-format", "json", "--log-interval", "1", "--log-full-precision", "--optimizer", "adam", "--lr",
             "0.005"]
    for method in ("truncate", "random_crop"):
        d = os.path.join(tmp, method)
        os.makedirs(d)
        checklib.check_resume(train + ["--shorten-method", method], d, method)
    p = run(train + ["--shorten-method", "random_crop", "--shorten-data-split-list", "train,valid", "--dump-config"])
    check('"shorten_method": "random_crop"' in p.stdout and '"shorten_data_split_list": "train,valid"' in p.stdout,
          "--dump-config holds shorten_method and shorten_data_split_list")
    for cmd, words in (
            ([stretch, "train", DATA, "--task", "truncated_bptt_lm", "--arch", "transformer_xl", "--batch-size", "2",
              "--shorten-method", "truncate", "--max-update", "1", "--save-dir", os.path.join(tmp, "x")],
             ["--shorten-method", "truncated_bptt_lm"]),
            (train + ["--shorten-method", "crop", "--max-update", "1", "--save-dir", os.path.join(tmp, "y")],
             ["--shorten-method", "crop"])):
        p = run(cmd, ok=False)
        err = [line for line in (p.stdout + p.stderr).splitlines() if "error" in line.lower() or "shorten" in line]
        check(p.returncode == 2 and err and all(w in " ".join(err) for w in words), f"refused: {err[:1]}")


if __name__ == "__main__":
    sys.exit(checklib.main(__doc__, with_oracle, binary, "real fairseq-train / fairseq-eval-lm"))
