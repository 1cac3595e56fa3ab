#!/usr/bin/env python3
"""NormFormer (--scale-heads, --scale-attn, --scale-fc, --scale-resids: fairseq 0.12.2's
TransformerDecoderLayerBase c_attn, attn_ln, ffn_layernorm, w_resid) against REAL fairseq 0.12.2 (the venv of
tests/fairseq/setup_fairseq.sh), on the fixture data-bin (tests/fixtures/fairseq). fairseq 0.12.2's
transformer_lm drops the four flags (fairseq_normformer_patch.py says why), so:
 0. unpatched fairseq-train --scale-*: its .pt has the flags in cfg and no NormFormer tensor; import-fairseq
    imports it without NormFormer (one note per flag) and its eval-lm = unpatched fairseq-eval-lm's;
and with the patch (STRETCH_FAIRSEQ_NORMFORMER=1: fairseq's own NormFormer layer code runs):
 1. fairseq-train a 2-layer model with the four flags (8 adam updates, so the scales and LayerNorms move off
    their init); its .pt has the NormFormer tensors of every layer, moved;
 2. import-fairseq of that .pt: stretch eval-lm = real fairseq-eval-lm (loss 1e-6 relative, every token's NLL
    within 5e-6); controls: fairseq-eval-lm of copies with ONE piece reset to its init (c_attn 1, w_resid 1,
    attn_ln 1/0, ffn_layernorm 1/0) each moves the loss by over 100x stretch's distance to fairseq, so the
    agreement is not blind to any of the four;
 3. both programs fine-tune that .pt for 4 updates (adam, dropout 0): every update's loss within 1e-3 relative
    (fairseq's 3 decimals) and the same wpb; eval-lm of each result within 2e-5 relative of the other's;
 4. export-fairseq of stretch's result: real fairseq-eval-lm on it = stretch eval-lm (as in 2), and a layer's
    state-dict keys come in fairseq's order (its own parameters c_attn, w_resid first).
Without the venv: tests/oracle_skip.py (a failure under CI=true, a loud skip elsewhere).
  --binary: no oracle: training with the four flags and dropout, 3 updates + a resume give the 6-update run's
    losses bit for bit; `stretch info` counts the NormFormer parameters; the flags are refused for
    transformer_xl (they are transformer_lm's).
Usage: check_normformer.py STRETCH_BINARY FAIRSEQ_VENV | check_normformer.py STRETCH_BINARY --binary
"""
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.append(os.path.join(HERE, ".."))
sys.path.insert(0, HERE)
import checklib  # noqa: E402
from checklib import DATA, compare_eval, fairseq_eval, run, stretch_eval, trajectory  # noqa: E402
from testlib import check  # noqa: E402

NF = ["--scale-heads", "--scale-attn", "--scale-fc", "--scale-resids"]
FS_TRAIN = checklib.tiny_model(2) + checklib.FS_TRAIN_FLAGS + NF
PIECES = {"c_attn": (1.0,), "w_resid": (1.0,), "attn_ln": (1.0, 0.0), "ffn_layernorm": (1.0, 0.0)}
# A fairseq .pt: its keys, how far each NormFormer piece moved off its init, and one copy per piece with that
# piece reset to its init (argv[2] = the copies' prefix).
INSPECT = r'''
import json, sys, torch
PIECES = %s
ck = torch.load(sys.argv[1], map_location="cpu")
m = ck["model"]
moved = {}
for piece, init in PIECES.items():
    names = [k for k in m if k.split(".")[3:4] == [piece] or k.endswith("." + piece)]
    moved[piece] = [len(names), max(float((m[k] - (init[0] if k.endswith(("c_attn", "w_resid", "weight")) else init[1])).abs().max()) for k in names) if names else 0.0]
    if len(sys.argv) > 2:
        c = torch.load(sys.argv[1], map_location="cpu")
        for k in names:
            c["model"][k].fill_(init[0] if k.endswith(("c_attn", "w_resid", "weight")) else init[1])
        torch.save(c, sys.argv[2] + piece + ".pt")
args = ck["args"] if ck.get("args") is not None else None
flags = {f: bool(getattr(args, f, False)) if args is not None else bool(ck["cfg"]["model"].get(f, False))
         for f in ("scale_heads", "scale_attn", "scale_fc", "scale_resids")}
print(json.dumps({"keys": list(m.keys()), "moved": moved, "flags": flags}))
''' % json.dumps(PIECES)


def inspect(py, pt, copies=None):
    return json.loads(run([py, "-c", INSPECT, pt] + ([copies] if copies else [])).stdout.strip().splitlines()[-1])


def layer_keys(keys, layer=0):
    p = f"decoder.layers.{layer}."
    return [k[len(p):] for k in keys if k.startswith(p)]


def with_oracle(stretch, venv, tmp):
    py = os.path.join(venv, "bin", "python")
    flags = ["--tokens-per-sample", "32"]
    unpatched = os.path.join(tmp, "unpatched")
    run([os.path.join(venv, "bin", "fairseq-train"), DATA] + FS_TRAIN + ["--lr", "0.01", "--max-update", "3",
                                                                         "--save-dir", unpatched])
    pt = os.path.join(unpatched, "checkpoint_last.pt")
    info = inspect(py, pt)
    check(all(info["flags"].values()) and not any(n for n, _ in info["moved"].values()),
          f"unpatched fairseq-train --scale-*: cfg {info['flags']}, NormFormer tensors "
          f"{ {k: n for k, (n, _) in info['moved'].items()} }")
    p = run([stretch, "import-fairseq", pt, "--out", os.path.join(tmp, "unpatched.stretch")])
    notes = [x for x in (p.stdout + p.stderr).splitlines() if "ignores --scale-" in x]
    check(len(notes) == 4, f"import-fairseq: {len(notes)} notes, one per flag: {notes[:1]}")
    compare_eval(fairseq_eval(py, pt, flags), stretch_eval(stretch, os.path.join(tmp, "unpatched.stretch"), flags, tmp),
                 "import-fairseq of unpatched fairseq-train --scale-* (a plain model)")

    os.environ["STRETCH_FAIRSEQ_NORMFORMER"] = "1"  # fairseq_eval.py and fairseq_train.py apply the patch
    fairseq_train = os.path.join(tmp, "fairseq-train")
    with open(fairseq_train, "w") as f:
        f.write(f"#!/bin/sh\nexec {py} {os.path.join(HERE, 'fairseq_train.py')} \"$@\"\n")
    os.chmod(fairseq_train, 0o755)
    base_dir = os.path.join(tmp, "base")
    run([fairseq_train, DATA] + FS_TRAIN + ["--lr", "0.01", "--max-update", "8", "--save-dir", base_dir])
    base = os.path.join(base_dir, "checkpoint_last.pt")
    info = inspect(py, base, os.path.join(tmp, "reset_"))
    for piece, (count, moved) in info["moved"].items():
        want = 2 if piece in ("c_attn", "w_resid") else 4
        check(count == want and moved > 1e-3, f"fairseq's .pt: {count} {piece} tensors (want {want}), moved "
                                              f"{moved:.3g} off their init by 8 updates")
    imported = os.path.join(tmp, "base.stretch")
    run([stretch, "import-fairseq", base, "--out", imported])
    fs = fairseq_eval(py, base, flags)
    st = stretch_eval(stretch, imported, flags, tmp)
    compare_eval(fs, st, "import-fairseq of fairseq-train's NormFormer .pt")
    agree = abs(st["loss_base2"] - fs["loss_base2"])
    for piece in PIECES:
        ctl = fairseq_eval(py, os.path.join(tmp, "reset_" + piece + ".pt"), flags)["loss_base2"]
        effect = abs(ctl - fs["loss_base2"])
        check(effect > max(100 * agree, 1e-7), f"control: fairseq with {piece} reset to its init moves the loss by "
                                               f"{effect:.2e}, over 100x stretch's distance to fairseq ({agree:.2e})")

    tail = ["--lr", "0.01", "--max-update", "4", "--finetune-from-model", base]
    fs_dir, st_dir = os.path.join(tmp, "fs"), os.path.join(tmp, "st")
    fs_rows = trajectory([fairseq_train, DATA] + FS_TRAIN + tail + ["--save-dir", fs_dir], "fairseq-train")
    st_rows = trajectory([stretch, "train", DATA] + FS_TRAIN + tail + ["--pos", "sinusoidal", "--log-full-precision",
                                                                       "--threads", "1", "--save-dir", st_dir],
                         "stretch train")
    check(len(fs_rows) == len(st_rows) == 4, f"{len(fs_rows)} fairseq and {len(st_rows)} stretch updates logged, 4 each")
    for (fu, fl, fw, _), (su, sl, sw, _) in zip(fs_rows, st_rows):
        rel = abs(sl - fl) / fl
        check(fu == su and rel <= 1e-3 and fw == sw,
              f"fine-tune update {fu}: fairseq loss {fl:.3f} wpb {fw:g} | stretch loss {sl:.6f} wpb {sw:g} (rel {rel:.1e})")
    st_ckpt = os.path.join(st_dir, "checkpoint_last.pt")
    fs_loss = fairseq_eval(py, os.path.join(fs_dir, "checkpoint_last.pt"), flags)["loss_base2"]
    st_res = stretch_eval(stretch, st_ckpt, flags, tmp)
    rel = abs(st_res["loss_base2"] - fs_loss) / fs_loss
    check(rel <= 2e-5, f"eval-lm of each fine-tuned result: fairseq {fs_loss:.7f}, stretch {st_res['loss_base2']:.7f} "
                       f"(rel {rel:.1e})")

    exported = os.path.join(tmp, "exported.pt")
    run([stretch, "export-fairseq", st_ckpt, "--out", exported])
    compare_eval(fairseq_eval(py, exported, flags), st_res, "export-fairseq of stretch's fine-tuned result")
    exp = inspect(py, exported)
    check(all(exp["flags"].values()), f"the export's args: {exp['flags']}")
    ours = [k for k in layer_keys(exp["keys"]) if k in layer_keys(info["keys"])]
    theirs = [k for k in layer_keys(info["keys"]) if k in ours]
    check(ours == theirs and ours[:2] == ["c_attn", "w_resid"] and len(ours) >= 20,
          f"layer 0's {len(ours)} keys in fairseq's order: {ours[:6]} ...")


def binary(stretch, tmp):
    train = [stretch, "train", DATA, "--arch", "transformer_lm_tiny", "--tokens-per-sample", "16", "--batch-size", "8",
             "--threads", "1", "--disable-validation", "--no-epoch-checkpoints", "--log-format", "json",
             "--log-interval", "1", "--log-full-precision", "--optimizer", "adam", "--lr", "0.005",
             "--dropout", "0.1", "--activation-dropout", "0.1"] + NF
    whole_dir = checklib.check_resume(train, tmp, "NormFormer with dropout")
    ckpt = os.path.join(whole_dir, "checkpoint_last.pt")
    plain = [a for a in train if a not in NF]
    trajectory(plain + ["--max-update", "1", "--save-dir", os.path.join(tmp, "plain")], "without NormFormer")
    count = {}
    for name, path in (("normformer", ckpt), ("plain", os.path.join(tmp, "plain", "checkpoint_last.pt"))):
        line = [x for x in run([stretch, "info", path]).stdout.splitlines() if x.startswith("parameters:")][0]
        count[name] = int(line.split()[1].rstrip(","))
    C, F, H, L = 128, 512, 4, 2  # transformer_lm_tiny
    want = L * (H + 2 * C + 2 * F + C)
    check(count["normformer"] - count["plain"] == want,
          f"stretch info: {count['normformer']} parameters, {count['normformer'] - count['plain']} more than without "
          f"NormFormer; L·(H + 2C + 2F + C) = {want}")
    p = run([stretch, "train", DATA, "--arch", "transformer_xl", "--scale-fc", "--max-update", "1", "--save-dir",
             os.path.join(tmp, "xl")], ok=False)
    err = [line for line in p.stderr.splitlines() if "error" in line]
    check(p.returncode == 2 and err and "scale_fc" in err[0], f"--scale-fc with transformer_xl refused: {err[:1]}")


if __name__ == "__main__":
    sys.exit(checklib.main(__doc__, with_oracle, binary, "real fairseq-train / fairseq-eval-lm"))
