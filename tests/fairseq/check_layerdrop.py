#!/usr/bin/env python3
"""train --decoder-layerdrop (fairseq's LayerDropModuleList) against REAL fairseq 0.12.2 (the venv of
tests/fairseq/setup_fairseq.sh), on the fixture data-bin (tests/fixtures/fairseq). fairseq draws the skipped
blocks from torch's generator, so only p = 1 (every block skipped in every training forward) is comparable
draw for draw; it checks what a skipped block means for the update:
 1. both programs fine-tune the same fairseq-trained 3-layer start with --decoder-layerdrop 1 --weight-decay 0.1
    (adam, 4 updates, dropout 0): every update's loss within 1e-3 relative (fairseq's 3 decimals); the blocks'
    weights are bit for bit the start's in both results (fairseq's Adam skips a parameter whose .grad is None:
    no step and no weight decay; stepping them with zero gradients would decay them by lr·wd), the other
    weights moved; each program's eval-lm of its own result within 2e-5 relative of the other's (evaluation
    runs every block); control: without LayerDrop stretch's result evaluates over 100x farther away.
Without the venv: tests/oracle_skip.py (a failure under CI=true, a loud skip elsewhere).
  --binary: no oracle: p = 0.5 trains, and 3 updates + a resume for 3 more give the 6-update run's losses bit
    for bit (the draws are a function of seed, update and micro-batch); eval-lm of that model runs every
    block (its loss differs from the same weights with --model-overrides decoder_layers_to_keep '0,1' and
    equals itself with decoder_layerdrop 0 overridden); p outside [0, 1] and p with --mem-len are refused.
Usage: check_layerdrop.py STRETCH_BINARY FAIRSEQ_VENV | check_layerdrop.py STRETCH_BINARY --binary
"""
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.append(os.path.join(HERE, ".."))
sys.path.insert(0, HERE)
import checklib  # noqa: E402
from checklib import DATA, fairseq_eval, run, stretch_eval, trajectory  # noqa: E402
from testlib import check  # noqa: E402

MODEL = checklib.tiny_model(3)
FS_TRAIN = MODEL + checklib.FS_TRAIN_FLAGS
# The weights of a fairseq .pt or a stretch checkpoint (safetensors) as {name: list}, in the venv's python.
WEIGHTS = checklib.LOAD_STRETCH_PY + r'''
import json, sys
def load(path):
    with open(path, "rb") as f:
        if f.read(2) == b"PK":
            return {k: v.float() for k, v in torch.load(path, map_location="cpu")["model"].items()}
    return load_stretch(path)
base, got = load(sys.argv[1]), load(sys.argv[2])
layers = [k for k in base if k.startswith("decoder.layers.")]
others = [k for k in base if not k.startswith("decoder.layers.") and k in got and not k.endswith("_float_tensor")]
print(json.dumps({"layers": len(layers), "layers_equal": all(torch.equal(base[k], got[k]) for k in layers),
                  "others": len(others), "others_moved": sum(not torch.equal(base[k], got[k]) for k in others)}))
'''


def with_oracle(stretch, venv, tmp):
    py = os.path.join(venv, "bin", "python")
    fairseq_train = os.path.join(venv, "bin", "fairseq-train")
    base_dir = os.path.join(tmp, "base")
    run([fairseq_train, DATA] + FS_TRAIN + ["--lr", "0.005", "--max-update", "5", "--save-dir", base_dir])
    base = os.path.join(base_dir, "checkpoint_last.pt")
    tail = ["--lr", "0.01", "--weight-decay", "0.1", "--max-update", "4", "--finetune-from-model", base]
    fs_dir, st_dir, ctl_dir = (os.path.join(tmp, n) for n in ("fs", "st", "ctl"))
    fs = trajectory([fairseq_train, DATA] + FS_TRAIN + tail + ["--decoder-layerdrop", "1", "--save-dir", fs_dir],
                    "fairseq-train")
    st_cmd = [stretch, "train", DATA] + FS_TRAIN + tail + ["--pos", "sinusoidal", "--log-full-precision", "--threads", "1"]
    st = trajectory(st_cmd + ["--decoder-layerdrop", "1", "--save-dir", st_dir], "stretch train")
    check(len(fs) == len(st) == 4, f"{len(fs)} fairseq and {len(st)} stretch updates logged, 4 each")
    for (fu, fl, fw, _), (su, sl, sw, _) in zip(fs, st):
        rel = abs(sl - fl) / fl
        check(fu == su and rel <= 1e-3 and fw == sw,
              f"update {fu}: fairseq loss {fl:.3f} wpb {fw:g} | stretch loss {sl:.6f} wpb {sw:g} (rel {rel:.1e})")
    for name, d in (("fairseq", fs_dir), ("stretch", st_dir)):
        w = json.loads(run([py, "-c", WEIGHTS, base, os.path.join(d, "checkpoint_last.pt")]).stdout.strip().splitlines()[-1])
        check(w["layers"] > 0 and w["layers_equal"] and w["others_moved"] > 0,
              f"{name}: the {w['layers']} block tensors are the start's bit for bit, {w['others_moved']} of "
              f"{w['others']} other tensors moved")
    trajectory(st_cmd + ["--save-dir", ctl_dir], "stretch train without LayerDrop")
    flags = ["--tokens-per-sample", "32"]
    fs_loss = fairseq_eval(py, os.path.join(fs_dir, "checkpoint_last.pt"), flags)["loss_base2"]
    st_loss = stretch_eval(stretch, os.path.join(st_dir, "checkpoint_last.pt"), flags, tmp)["loss_base2"]
    ctl_loss = stretch_eval(stretch, os.path.join(ctl_dir, "checkpoint_last.pt"), flags, tmp)["loss_base2"]
    rel = abs(st_loss - fs_loss) / fs_loss
    check(rel <= 2e-5 and abs(ctl_loss - fs_loss) > 100 * abs(st_loss - fs_loss),
          f"eval-lm of each result (every block runs): fairseq {fs_loss:.7f}, stretch {st_loss:.7f} (rel {rel:.1e}); "
          f"without LayerDrop {ctl_loss:.7f}")


def binary(stretch, tmp):
    train = [stretch, "train", DATA, "--arch", "transformer_lm_tiny", "--decoder-layers", "3", "--tokens-per-sample",
             "16", "--batch-size", "8", "--threads", "1", "--disable-validation", "--no-epoch-checkpoints",
             "--log-format", "json", "--log-interval", "1", "--log-full-precision", "--optimizer", "adam", "--lr",
             "0.005", "--decoder-layerdrop", "0.5"]
    whole_dir = checklib.check_resume(train, tmp, "p 0.5")
    ckpt = os.path.join(whole_dir, "checkpoint_last.pt")
    flags = ["--tokens-per-sample", "16"]
    a = stretch_eval(stretch, ckpt, flags, tmp)["loss_base2"]
    b = stretch_eval(stretch, ckpt, flags + ["--model-overrides", "{'decoder_layerdrop': 0}"], tmp)["loss_base2"]
    c = stretch_eval(stretch, ckpt, flags + ["--model-overrides", "{'decoder_layers_to_keep': '0,1'}"], tmp)["loss_base2"]
    check(a == b and a != c, f"eval-lm runs every block: {a!r} = with decoder_layerdrop 0 {b!r}; 2 of 3 blocks {c!r}")
    base = [x for x in train if x not in ("--decoder-layerdrop", "0.5")]
    for extra, words in ((["--decoder-layerdrop", "1.5"], ["--decoder-layerdrop", "1.5"]),
                         (["--decoder-layerdrop", "-0.1"], ["--decoder-layerdrop", "-0.1"]),
                         (["--decoder-layerdrop", "0.2", "--mem-len", "16"], ["--decoder-layerdrop", "--mem-len"])):
        d = os.path.join(tmp, "bad")
        p = run(base + extra + ["--max-update", "1", "--save-dir", d], ok=False)
        err = [line for line in p.stderr.splitlines() if "error" in line]
        check(p.returncode == 2 and err and all(w in err[0] for w in words) and not os.path.exists(
            os.path.join(d, "checkpoint_last.pt")), f"{' '.join(extra)} refused: {err[:1]}")


if __name__ == "__main__":
    sys.exit(checklib.main(__doc__, with_oracle, binary, "real fairseq-train / fairseq-eval-lm"))
