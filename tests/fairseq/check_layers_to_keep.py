#!/usr/bin/env python3
"""--model-overrides "{'decoder_layers_to_keep': '0,2'}" (fairseq's checkpoint_utils.prune_state_dict) against REAL
fairseq 0.12.2 (the venv of tests/fairseq/setup_fairseq.sh), on the fixture data-bin (tests/fixtures/fairseq):
 1. real fairseq-train of a tiny 3-layer pre-norm transformer_lm (10 adam updates); for each of '0,2', '1',
    '2, 0' (fairseq sorts) and '0,1,2': stretch eval-lm of the .pt with the override equals fairseq-eval-lm with
    it (loss within 1e-6 relative, the same count, every token within 5e-6), in block mode and with
    --context-window 16; the pruned results differ from each other and from the whole model's;
 2. a stretch-trained model (sinusoidal, exported with export-fairseq): fairseq-eval-lm of the export with
    '0,2' equals stretch eval-lm of the checkpoint with it.
Without the venv: tests/oracle_skip.py (a failure under CI=true, a loud skip elsewhere).
  --binary: no oracle: the pruned model equals a model file whose tensors were renamed by hand (layers 0 and 2
    of 3 -> 0 and 1, decoder_layers 2), on an ALiBi model with learnable slopes; generate takes the
    override; the refusals name the key and the value (a layer out of range, a layer twice, not a number, not a
    string, a model with alibi_layer_scale, a transformer_xl model).
Usage: check_layers_to_keep.py STRETCH_BINARY FAIRSEQ_VENV | check_layers_to_keep.py STRETCH_BINARY --binary
"""
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.append(os.path.join(HERE, ".."))
sys.path.insert(0, HERE)
import checklib  # noqa: E402
from checklib import DATA, compare_eval, fairseq_eval, run, stretch_eval  # noqa: E402
from testlib import check  # noqa: E402

MODEL = checklib.tiny_model(3)
FS_TRAIN = MODEL + checklib.FS_TRAIN_FLAGS + ["--lr", "0.005", "--max-update", "10"]
PROTOCOLS = (["--tokens-per-sample", "32"], ["--tokens-per-sample", "32", "--context-window", "16"])


def keep(layers):
    return ["--model-overrides", json.dumps({"decoder_layers_to_keep": layers})]


def with_oracle(stretch, venv, tmp):
    py = os.path.join(venv, "bin", "python")
    fs_dir = os.path.join(tmp, "fs")
    run([os.path.join(venv, "bin", "fairseq-train"), DATA] + FS_TRAIN + ["--save-dir", fs_dir])
    fs_ckpt = os.path.join(fs_dir, "checkpoint_last.pt")
    for flags in PROTOCOLS:
        losses = {"whole": stretch_eval(stretch, fs_ckpt, flags, tmp)["loss_base2"]}
        for layers in ("0,2", "1", "2, 0", "0,1,2"):
            fs = fairseq_eval(py, fs_ckpt, flags + keep(layers))
            st = stretch_eval(stretch, fs_ckpt, flags + keep(layers), tmp)
            compare_eval(fs, st, f"fairseq-trained .pt, keep '{layers}' {' '.join(flags)}")
            losses[layers] = st["loss_base2"]
        check(losses["0,2"] == losses["2, 0"] and losses["0,1,2"] == losses["whole"] and
              len({losses["whole"], losses["0,2"], losses["1"]}) == 3,
              f"{' '.join(flags)}: '0,2' = '2, 0', '0,1,2' = the whole model, the others differ: {losses}")
    save = os.path.join(tmp, "st")
    run([stretch, "train", DATA] + MODEL + ["--pos", "sinusoidal", "--optimizer", "adam", "--lr", "0.005",
        "--max-update", "10", "--save-dir", save, "--threads", "1", "--disable-validation",
        "--no-epoch-checkpoints", "--log-format", "none"])
    ckpt, exported = os.path.join(save, "checkpoint_last.pt"), os.path.join(tmp, "exported.pt")
    run([stretch, "export-fairseq", ckpt, "--out", exported])
    for flags in PROTOCOLS:
        compare_eval(fairseq_eval(py, exported, flags + keep("0,2")), stretch_eval(stretch, ckpt, flags + keep("0,2"), tmp),
                     f"stretch-trained, exported, keep '0,2' {' '.join(flags)}")


RENAME = r'''
import json, struct, sys
src, dst = sys.argv[1], sys.argv[2]
with open(src, "rb") as f:
    n = struct.unpack("<Q", f.read(8))[0]
    head = json.loads(f.read(n))
    body = f.read()
meta = head.pop("__metadata__")
cfg = json.loads(meta["config"])
cfg["decoder_layers"] = 2
meta["config"] = json.dumps(cfg)
names = {}
for name in head:
    if ".layers.1." in name or not name.startswith("decoder") and ".layers." in name:
        continue
    names[name] = name.replace(".layers.2.", ".layers.1.")
out, chunks, off = {"__metadata__": meta}, [], 0
for name, new in names.items():
    a, b = head[name]["data_offsets"]
    out[new] = dict(head[name], data_offsets=[off, off + b - a])
    chunks.append(body[a:b])
    off += b - a
blob = json.dumps(out).encode()
with open(dst, "wb") as f:
    f.write(struct.pack("<Q", len(blob)) + blob + b"".join(chunks))
'''


def binary(stretch, tmp):
    train = [stretch, "train", DATA, "--arch", "transformer_lm_tiny", "--decoder-layers", "3", "--tokens-per-sample", "16",
             "--batch-size", "8", "--max-update", "4", "--threads", "1", "--disable-validation",
             "--no-epoch-checkpoints", "--log-format", "none"]
    save = os.path.join(tmp, "alibi")
    run(train + ["--alibi-learnable-slopes", "--save-dir", save])
    ckpt, by_hand = os.path.join(save, "checkpoint_last.pt"), os.path.join(tmp, "by_hand.pt")
    run([sys.executable, "-c", RENAME, ckpt, by_hand])
    flags = ["--tokens-per-sample", "16"]
    pruned = stretch_eval(stretch, ckpt, flags + keep("0,2"), tmp)
    hand = stretch_eval(stretch, by_hand, flags, tmp)
    whole = stretch_eval(stretch, ckpt, flags, tmp)
    check(pruned["loss_base2"] == hand["loss_base2"] and pruned["loss_base2"] != whole["loss_base2"],
          f"ALiBi, learnable slopes: keep '0,2' {pruned['loss_base2']!r} = the file renamed by hand "
          f"{hand['loss_base2']!r} (the whole model: {whole['loss_base2']!r})")
    p = run([stretch, "generate", DATA, "--path", ckpt, "--max-len", "4", "--seed", "1"] + keep("1"), ok=False)
    check(p.returncode == 0, f"generate takes the override (exit {p.returncode}) {p.stderr.strip()[-200:]!r}")
    scaled = os.path.join(tmp, "scaled")
    run(train + ["--alibi-layer-scale", "linear:0.5", "--save-dir", scaled])
    xl = os.path.join(tmp, "xl")
    run([stretch, "train", DATA, "--arch", "transformer_xl", "--task", "truncated_bptt_lm", "--tokens-per-sample", "16",
         "--batch-size", "2", "--max-update", "1", "--threads", "1", "--disable-validation", "--no-epoch-checkpoints",
         "--log-format", "none", "--n-layer", "2", "--d-model", "16", "--n-head", "2", "--d-head", "8", "--d-inner",
         "32", "--mem-len", "8", "--save-dir", xl])
    ev = [stretch, "eval-lm", DATA, "--gen-subset", "valid", "--tokens-per-sample", "16"]
    refusals = [
        (ev + ["--path", ckpt] + keep("0,3"), ["decoder_layers_to_keep", "'0,3'", "layer 3"]),
        (ev + ["--path", ckpt] + keep("1,1"), ["decoder_layers_to_keep", "'1,1'", "twice"]),
        (ev + ["--path", ckpt] + keep("0,x"), ["decoder_layers_to_keep", "'x'", "not a layer number"]),
        (ev + ["--path", ckpt, "--model-overrides", '{"decoder_layers_to_keep": 2}'], ["decoder_layers_to_keep", "not a string"]),
        (ev + ["--path", os.path.join(scaled, "checkpoint_last.pt")] + keep("0,2"), ["decoder_layers_to_keep", "alibi_layer_scale"]),
        ([stretch, "eval-lm", DATA, "--gen-subset", "valid", "--task", "truncated_bptt_lm", "--batch-size", "2",
          "--tokens-per-sample", "16", "--path", os.path.join(xl, "checkpoint_last.pt")] + keep("0"),
         ["decoder_layers_to_keep", "transformer_lm"]),
    ]
    for cmd, words in refusals:
        p = run(cmd, ok=False)
        err = [line for line in p.stderr.splitlines() if "error" in line]
        check(p.returncode == 2 and err and all(w in err[0] for w in words),
              f"refused (exit {p.returncode}): {' '.join(cmd[-2:])}: {err[:1]}")


if __name__ == "__main__":
    sys.exit(checklib.main(__doc__, with_oracle, binary, "real fairseq-train / fairseq-eval-lm"))
