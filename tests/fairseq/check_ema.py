#!/usr/bin/env python3
"""train --store-ema (fairseq's trainer-level EMA, fairseq/models/ema/ema.py) against REAL fairseq 0.12.2 (the
venv of tests/fairseq/setup_fairseq.sh), on the fixture data-bin (tests/fixtures/fairseq):
 1. fairseq's own EMA class on stretch's trajectory: stretch trains 7 updates with --ema-decay 0.9
    --ema-start-update 3 --ema-update-freq 2, keeping a checkpoint after every update; fairseq's EMA, built from
    the weights after update 1 (as fairseq-train builds it lazily) and stepped with the weights after each
    update, gives stretch's stored average bit for bit (torch.equal on every tensor), and differs from the
    final weights.
 2. the same flags in both programs, fine-tuning the same fairseq-trained start (itself trained with --store-ema
    --ema-start-update 1000, so its stored average is its weights: fairseq-train restores the average from
    extra_state["ema"], stretch starts it from the weights; fairseq 0.12.2 cannot fine-tune a start without
    an average, see docs/fairseq.md): every update's loss within 1e-3 relative and the same ema_decay field
    (0 before --ema-start-update, then 0.9); the two averages (fairseq's extra_state["ema"], stretch's
    export-fairseq extra_state["ema"], both read with fairseq's checkpoint_utils.load_ema_from_checkpoint)
    as close as the two runs' final weights, 100x closer than to those weights; fairseq's lacks the final
    LayerNorm (a fairseq bug, docs/fairseq.md), stretch's has it; fairseq-eval-lm of stretch's average as a
    model (save_ema_as_checkpoint) = stretch eval-lm --model-overrides "{'use_ema': True}" (loss 1e-6 rel,
    every token 5e-6), far from the final weights' loss.
 3. an adaptive input / tied adaptive softmax model trained by stretch with --store-ema: fairseq-eval-lm of its
    exported average = stretch eval-lm with use_ema.
 4. import-fairseq of fairseq-train --store-ema's extra_state["ema"]: a post-norm model's average is kept as ema.*,
    and stretch eval-lm with use_ema (of the import, and of the .pt read in memory) = fairseq-eval-lm after
    save_ema_as_checkpoint, the weights scoring otherwise; the pre-norm start of 2, whose average fairseq saved
    without the final LayerNorm, imports without its average and says why.
Without the venv: tests/oracle_skip.py (a failure under CI=true, a loud skip elsewhere).
  --binary: no oracle: with --ema-update-freq 2, 3 updates + a resume for 4 more give the 7-update run's
    average bit for bit (the update counter is saved; fairseq's restarts at 0 after a resume); stretch info
    counts the average; eval-lm's use_ema True scores it, False the weights; a resume of a run saved without
    --store-ema starts the average from its weights with one warning; use_ema on a checkpoint without an
    average, a use_ema that is not a bool, an --ema-decay outside [0, 1], --ema-update-freq 0 and
    --ema-seed-model are refused.
Usage: check_ema.py STRETCH_BINARY FAIRSEQ_VENV | check_ema.py STRETCH_BINARY --binary
"""
import json
import os
import struct
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.append(os.path.join(HERE, ".."))
sys.path.insert(0, HERE)
import checklib  # noqa: E402
from checklib import DATA, compare_eval, fairseq_eval, run, stretch_eval  # noqa: E402
from testlib import check  # noqa: E402

MODEL = checklib.tiny_model(2)
FS_TRAIN = MODEL + checklib.FS_TRAIN_FLAGS
# tests/fixtures/fairseq's adaptive_tied model (make_fixtures.sh).
ADAPTIVE = ("--arch transformer_lm_wiki103 --criterion adaptive_loss --decoder-layers 2 --decoder-embed-dim 32 "
            "--decoder-ffn-embed-dim 64 --decoder-attention-heads 2 --decoder-input-dim 32 --decoder-output-dim 32 "
            "--adaptive-softmax-cutoff 100,300 --adaptive-input-cutoff 100,300 --adaptive-softmax-dropout 0 --dropout 0 "
            "--attention-dropout 0 --activation-dropout 0 --tokens-per-sample 32 --max-tokens 256").split()
EMA = ["--store-ema", "--ema-decay", "0.9", "--ema-start-update", "3", "--ema-update-freq", "2"]

# 1: fairseq's EMA class stepped with stretch's per-update weights = stretch's average.
REPLAY = checklib.LOAD_STRETCH_PY + r'''
import collections, sys
from types import SimpleNamespace
from fairseq.models.ema import EMA
save_dir, n = sys.argv[1], int(sys.argv[2])
def weights(u):
    d = load_stretch(f"{save_dir}/checkpoint_1_{u}.pt")
    return collections.OrderedDict((k, v) for k, v in d.items() if not k.startswith(("ema.", "optimizer.")))
class Holder(torch.nn.Module):  # a module whose state_dict is the given tensors
    def __init__(self, d):
        super().__init__()
        self.d = collections.OrderedDict((k, v.clone()) for k, v in d.items())
    def state_dict(self, *a, **k):
        return collections.OrderedDict(self.d)
    def load_state_dict(self, sd, strict=True, **k):
        for key, v in sd.items():
            self.d[key].copy_(v)
cfg = SimpleNamespace(ema_decay=0.9, ema_start_update=3, ema_update_freq=2, ema_fp32=False, ema_seed_model=None)
ema = None
for u in range(1, n + 1):
    model = Holder(weights(u))
    if ema is None:
        ema = EMA(model, cfg)  # fairseq-train builds it at its first use, after update 1
    ema.step(model, u)
got = load_stretch(f"{save_dir}/checkpoint_last.pt")
want = ema.get_model().state_dict()
last = weights(n)
print(json.dumps({"tensors": len(want),
                  "equal": sum(torch.equal(got["ema." + k], v) for k, v in want.items()),
                  "max_diff": max(float((got["ema." + k] - v).abs().max()) for k, v in want.items()),
                  "moved_from_weights": sum(not torch.equal(want[k], last[k]) for k in want)}))
'''

# 2: two .pt files' averages (checkpoint_utils.load_ema_from_checkpoint) and weights; the second's average as a model.
COMPARE = r'''
import json, sys, torch
from fairseq import checkpoint_utils
a = checkpoint_utils.load_ema_from_checkpoint(sys.argv[1])["model"]
b = checkpoint_utils.load_ema_from_checkpoint(sys.argv[2])["model"]
wa = torch.load(sys.argv[1], map_location="cpu")["model"]
wb = torch.load(sys.argv[2], map_location="cpu")["model"]
checkpoint_utils.save_ema_as_checkpoint(sys.argv[2], sys.argv[3])
keys = [k for k in a if k in b and a[k].is_floating_point() and not k.endswith(("_float_tensor", "version"))]
print(json.dumps({"keys": len(keys), "only_stretch": sorted(set(b) - set(a)), "only_fairseq": sorted(set(a) - set(b)),
                  "ema_diff": max(float((a[k] - b[k]).abs().max()) for k in keys),
                  "weights_diff": max(float((wa[k] - wb[k]).abs().max()) for k in keys),
                  "to_weights": max(float((b[k] - wb[k]).abs().max()) for k in keys)}))
'''


def ema_log(cmd, name):
    """(num_updates, loss, ema_decay) of each train_inner line of a --log-format json run."""
    p = run(cmd)
    out = []
    for line in (p.stdout + p.stderr).splitlines():
        if "| train_inner | " in line:
            d = json.loads(line.split("| train_inner | ", 1)[1])
            out.append((int(float(d["num_updates"])), float(d["loss"]), float(d.get("ema_decay", "nan"))))
    check(out, f"{name} logged train_inner lines")
    return out, p


def with_oracle(stretch, venv, tmp):
    py = os.path.join(venv, "bin", "python")
    fairseq_train = os.path.join(venv, "bin", "fairseq-train")
    st_flags = ["--pos", "sinusoidal", "--log-full-precision", "--threads", "1"]
    # 1. fairseq's EMA class on stretch's own trajectory.
    d1 = os.path.join(tmp, "every")
    run([stretch, "train", DATA] + FS_TRAIN + st_flags + EMA + ["--lr", "0.01", "--max-update", "7", "--save-interval-updates",
        "1", "--save-dir", d1])
    r = json.loads(run([py, "-c", REPLAY, d1, "7"]).stdout.strip().splitlines()[-1])
    check(r["tensors"] > 0 and r["equal"] == r["tensors"] and r["moved_from_weights"] == r["tensors"],
          f"fairseq's EMA class stepped with stretch's 7 updates = stretch's average: {r['equal']} of {r['tensors']} "
          f"tensors bit for bit (max diff {r['max_diff']:.1e}); {r['moved_from_weights']} differ from the last weights")
    # 2. both programs, the same start and flags.
    base_dir = os.path.join(tmp, "base")
    run([fairseq_train, DATA] + FS_TRAIN + ["--lr", "0.005", "--max-update", "5", "--store-ema", "--ema-start-update",
        "1000", "--save-dir", base_dir])
    base = os.path.join(base_dir, "checkpoint_last.pt")
    tail = EMA + ["--lr", "0.01", "--max-update", "6", "--finetune-from-model", base]
    fs_dir, st_dir = os.path.join(tmp, "fs"), os.path.join(tmp, "st")
    fs, _ = ema_log([fairseq_train, DATA] + FS_TRAIN + tail + ["--save-dir", fs_dir], "fairseq-train")
    st, p = ema_log([stretch, "train", DATA] + FS_TRAIN + st_flags + tail + ["--save-dir", st_dir], "stretch train")
    check("holds no EMA" in p.stderr, "stretch says the fairseq .pt's average is not imported (starts from its weights)")
    check(len(fs) == len(st) == 6, f"{len(fs)} fairseq and {len(st)} stretch updates logged, 6 each")
    for (fu, fl, fd), (su, sl, sd) in zip(fs, st):
        rel = abs(sl - fl) / fl
        check(fu == su and rel <= 1e-3 and fd == sd,
              f"update {fu}: fairseq loss {fl:.3f} ema_decay {fd:g} | stretch loss {sl:.6f} ema_decay {sd:g} (rel {rel:.1e})")
    export = os.path.join(tmp, "st_export.pt")
    out = run([stretch, "export-fairseq", os.path.join(st_dir, "checkpoint_last.pt"), "--out", export]).stdout
    check("extra_state['ema']" in out, f"export-fairseq says it wrote the average: {out.strip().splitlines()[-1:]}")
    st_ema = os.path.join(tmp, "st_ema.pt")
    c = json.loads(run([py, "-c", COMPARE, os.path.join(fs_dir, "checkpoint_last.pt"), export, st_ema])
                   .stdout.strip().splitlines()[-1])
    check(c["keys"] > 0 and c["ema_diff"] <= 2 * c["weights_diff"] + 1e-7 and c["to_weights"] > 100 * c["ema_diff"],
          f"the averages of {c['keys']} tensors: fairseq's and stretch's within {c['ema_diff']:.1e}, as close as the "
          f"two runs' final weights ({c['weights_diff']:.1e}); stretch's average from its final weights "
          f"{c['to_weights']:.1e}")
    # fairseq 0.12.2's EMA.restore goes through load_state_dict's upgrade_state_dict, which reads the decoder.version
    # its step leaves out as 1 and drops the final LayerNorm of a pre-norm model: fairseq's average lacks it.
    final_ln = ["decoder.layer_norm.bias", "decoder.layer_norm.weight"]
    check(c["only_stretch"] == final_ln and not c["only_fairseq"],
          f"only stretch's average has the final LayerNorm (fairseq's EMA drops it): {c['only_stretch']}")
    flags = ["--tokens-per-sample", "32"]
    fs_avg = fairseq_eval(py, st_ema, flags)
    fs_w = fairseq_eval(py, export, flags)
    st_avg = stretch_eval(stretch, os.path.join(st_dir, "checkpoint_last.pt"),
                          flags + ["--model-overrides", "{'use_ema': True}"], tmp)
    rel = compare_eval(fs_avg, st_avg, "stretch's average as a model: fairseq-eval-lm after save_ema_as_checkpoint "
                       "vs stretch eval-lm --model-overrides \"{'use_ema': True}\"")
    check(abs(fs_w["loss_base2"] - fs_avg["loss_base2"]) > 1000 * rel * fs_avg["loss_base2"],
          f"control: the final weights score {fs_w['loss_base2']:.7f}, the average {fs_avg['loss_base2']:.7f}")
    # 3. an adaptive input / tied adaptive softmax model (its state dict names tied tensors twice): the exported
    # average as a model in fairseq-eval-lm = stretch eval-lm with use_ema.
    ad_dir = os.path.join(tmp, "adaptive")
    run([stretch, "train", DATA] + checklib.FS_TRAIN_FLAGS + st_flags + ADAPTIVE + ["--store-ema", "--ema-decay", "0.5",
        "--lr", "0.005", "--max-update", "4", "--save-dir", ad_dir])
    ad_export, ad_ema = os.path.join(tmp, "ad_export.pt"), os.path.join(tmp, "ad_ema.pt")
    run([stretch, "export-fairseq", os.path.join(ad_dir, "checkpoint_last.pt"), "--out", ad_export])
    run([py, "-c", "import sys; from fairseq import checkpoint_utils as c; c.save_ema_as_checkpoint(*sys.argv[1:])",
         ad_export, ad_ema])
    compare_eval(fairseq_eval(py, ad_ema, flags),
                 stretch_eval(stretch, os.path.join(ad_dir, "checkpoint_last.pt"),
                              flags + ["--model-overrides", "{'use_ema': True}"], tmp),
                 "adaptive input + tied adaptive softmax: the average in fairseq-eval-lm vs stretch use_ema")
    # 4. import-fairseq of fairseq-train --store-ema's average: a post-norm model (its average is whole) keeps it as
    # ema.*, and stretch eval-lm with use_ema = fairseq-eval-lm after save_ema_as_checkpoint; the pre-norm start of
    # 2 (whose average fairseq saved without the final LayerNorm) imports without it, saying why.
    post_dir = os.path.join(tmp, "fs_post")
    post = [a for a in FS_TRAIN if a != "--decoder-normalize-before"]
    run([fairseq_train, DATA] + post + ["--store-ema", "--ema-decay", "0.5", "--lr", "0.01", "--max-update", "6",
                                        "--save-dir", post_dir])
    pt, imported, fs_ema = (os.path.join(post_dir, "checkpoint_last.pt"), os.path.join(tmp, "post.stretch"),
                            os.path.join(tmp, "post_ema.pt"))
    notes = run([stretch, "import-fairseq", pt, "--out", imported]).stdout
    check("kept as ema.*" in notes, "import-fairseq keeps a post-norm model's extra_state['ema'] as ema.*")
    run([py, "-c", "import sys; from fairseq import checkpoint_utils as c; c.save_ema_as_checkpoint(*sys.argv[1:])",
         pt, fs_ema])
    use_ema = flags + ["--model-overrides", "{'use_ema': True}"]
    st_imp = stretch_eval(stretch, imported, use_ema, tmp)
    compare_eval(fairseq_eval(py, fs_ema, flags), st_imp,
                 "fairseq-train's average: fairseq-eval-lm after save_ema_as_checkpoint vs stretch eval-lm use_ema of "
                 "the import")
    direct = stretch_eval(stretch, pt, use_ema, tmp)["loss_base2"]
    plain = stretch_eval(stretch, imported, flags, tmp)["loss_base2"]
    check(direct == st_imp["loss_base2"] and plain != direct,
          f"use_ema on the .pt itself {direct!r} = on the import; the weights score {plain!r}")
    notes = run([stretch, "import-fairseq", base, "--out", os.path.join(tmp, "pre.stretch")]).stdout
    check("is not imported" in notes and "final LayerNorm" in notes,
          "a pre-norm model's average (fairseq saved it without decoder.layer_norm) is left out with a note: " +
          [x for x in notes.splitlines() if "extra_state" in x][0][:160])


def tensors(path):
    """A stretch checkpoint's tensors as {name: raw bytes} (standard library only)."""
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        head = json.loads(f.read(n))
        body = f.read()
    return {k: body[v["data_offsets"][0]:v["data_offsets"][1]] for k, v in head.items() if k != "__metadata__"}


def binary(stretch, tmp):
    train = [stretch, "train", DATA, "--arch", "transformer_lm_tiny", "--tokens-per-sample", "16", "--batch-size",
             "8", "--threads", "1", "--disable-validation", "--no-epoch-checkpoints", "--log-format", "json",
             "--log-interval", "1", "--optimizer", "adam", "--lr", "0.005"]
    with_ema = train + EMA
    whole = os.path.join(tmp, "whole")
    run(with_ema + ["--max-update", "7", "--save-dir", whole])
    d = os.path.join(tmp, "resumed")
    run(with_ema + ["--max-update", "3", "--save-dir", d])
    run(with_ema + ["--max-update", "7", "--save-dir", d])
    a, b = tensors(os.path.join(whole, "checkpoint_last.pt")), tensors(os.path.join(d, "checkpoint_last.pt"))
    averages = [k for k in a if k.startswith("ema.")]
    info = run([stretch, "info", os.path.join(whole, "checkpoint_last.pt")]).stdout
    check(averages and a == b and "EMA values" in info,
          f"--ema-update-freq 2: 3 updates + a resume = 7 updates, every tensor bit for bit ({len(averages)} averages "
          f"among {len(a)}); info: {[x for x in info.splitlines() if 'EMA' in x]}")
    ckpt = os.path.join(whole, "checkpoint_last.pt")
    ev = [stretch, "eval-lm", DATA, "--path", ckpt, "--gen-subset", "valid", "--tokens-per-sample", "16",
          "--log-format", "none", "--results-json"]
    losses = {}
    for name, o in (("weights", "{}"), ("average", "{'use_ema': True}"), ("off", "{'use_ema': False}")):
        rj = os.path.join(tmp, name + ".json")
        run(ev + [rj, "--model-overrides", o])
        losses[name] = json.load(open(rj))["loss_base2"]
    check(losses["average"] != losses["weights"] == losses["off"],
          f"eval-lm use_ema True scores the average, False the weights: {losses}")
    plain = os.path.join(tmp, "plain")
    run(train + ["--max-update", "2", "--save-dir", plain])
    p = run(with_ema + ["--ema-update-freq", "1", "--ema-start-update", "1000", "--max-update", "3", "--save-dir",
                        plain])
    check(p.stderr.count("holds no EMA") == 1, "a resume of a run without --store-ema: one warning, the average "
          "starts from its weights")
    first = os.path.join(tmp, "first")
    run(train + ["--max-update", "1", "--save-dir", first])
    for o, words in (("{'use_ema': True}", ["holds no moving average", "--store-ema"]),
                     ("{'use_ema': 'yes'}", ["'use_ema'", "True or False"])):
        p = run([stretch, "eval-lm", DATA, "--path", os.path.join(first, "checkpoint_last.pt"), "--gen-subset", "valid",
                 "--model-overrides", o], ok=False)
        check(p.returncode != 0 and all(w in p.stderr for w in words),
              f"eval-lm --model-overrides {o} refused: {p.stderr.strip().splitlines()[:1]}")
    for extra, words in ((["--ema-decay", "1.5"], ["--ema-decay", "[0, 1]"]),
                         (["--ema-decay", "nan"], ["--ema-decay"]),
                         (["--ema-update-freq", "0"], ["--ema-update-freq"]),
                         (["--ema-seed-model", "x.pt"], ["--ema-seed-model", "not supported"])):
        bad = os.path.join(tmp, "bad")
        p = run(with_ema + extra + ["--max-update", "1", "--save-dir", bad], ok=False)
        err = [line for line in p.stderr.splitlines() if "error" in line or "not allowed" in line]
        check(p.returncode == 2 and err and all(w in err[0] for w in words) and not os.path.exists(
            os.path.join(bad, "checkpoint_last.pt")), f"{' '.join(extra)} refused: {err[:1]}")


if __name__ == "__main__":
    sys.exit(checklib.main(__doc__, with_oracle, binary, "real fairseq-train / fairseq-eval-lm"))
