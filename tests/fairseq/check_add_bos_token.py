#!/usr/bin/env python3
"""--add-bos-token (issue 16) against REAL fairseq 0.12.2 (the venv of tests/fairseq/setup_fairseq.sh), on the
fixture data-bin (tests/fixtures/fairseq), everything generated at test time:
 1. real fairseq-train of a tiny transformer_lm with --add-bos-token (10 adam updates, dropout 0); stretch
    eval-lm of that .pt WITHOUT a flag (the import carries add_bos_token) equals fairseq-eval-lm
    --add-bos-token: loss (base 2) within 1e-6 relative, the same "Evaluated N tokens", per-token NLLs within
    5e-6 (fairseq logs ln p to 6 decimals; float32 NLLs of ~10 nats differ by ~1e-6), in block mode and with --context-window 16; control: fairseq-eval-lm
    without the flag differs (fairseq takes the flag from the command line, not from the checkpoint);
 2. the training rows: stretch train --finetune-from-model of that .pt with --add-bos-token follows
    fairseq-train --finetune-from-model --add-bos-token for 3 updates: loss (fairseq's 3 decimals: 1e-3 rel)
    and wpb (fairseq's ntokens = block tokens + one <s> per row) per update; control: stretch without the flag
    has another wpb and its first loss differs by over 10x the tolerance;
 3. the round trip: stretch train --add-bos-token -> export-fairseq (args.add_bos_token True) ->
    fairseq-eval-lm --add-bos-token equals stretch eval-lm of the checkpoint (1e-6 rel, both protocols).
Without the venv: tests/oracle_skip.py (a failure under CI=true, a loud skip elsewhere).
  --binary: no oracle, the flag through the binary: saved in the config (eval-lm with and without the flag
    equal, --model-overrides add_bos_token false differs), the refusals (one line naming the flag).
Usage: check_add_bos_token.py STRETCH_BINARY FAIRSEQ_VENV | check_add_bos_token.py STRETCH_BINARY --binary
"""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.append(os.path.join(HERE, ".."))
sys.path.insert(0, HERE)
import checklib  # noqa: E402
from checklib import DATA, compare_eval, fairseq_eval, run, stretch_eval, trajectory  # noqa: E402
from testlib import check  # noqa: E402

MODEL = checklib.tiny_model()
FS_TRAIN = MODEL + checklib.FS_TRAIN_FLAGS + ["--lr", "0.005"]
PROTOCOLS = (["--tokens-per-sample", "32"], ["--tokens-per-sample", "32", "--context-window", "16"])


def with_oracle(stretch, venv, tmp):
    py = os.path.join(venv, "bin", "python")
    # 1. fairseq trains with --add-bos-token; stretch evaluates the .pt as it is.
    fs_dir = os.path.join(tmp, "fs")
    run([os.path.join(venv, "bin", "fairseq-train"), DATA] + FS_TRAIN +
        ["--add-bos-token", "--max-update", "10", "--save-dir", fs_dir])
    fs_ckpt = os.path.join(fs_dir, "checkpoint_last.pt")
    for flags in PROTOCOLS:
        fs = fairseq_eval(py, fs_ckpt, flags + ["--add-bos-token"])
        st = stretch_eval(stretch, fs_ckpt, flags, tmp)
        compare_eval(fs, st, f"fairseq-trained .pt {' '.join(flags)}")
        check(st.get("add_bos_token") is True, "stretch eval-lm took add_bos_token from the fairseq checkpoint")
        ctl = fairseq_eval(py, fs_ckpt, flags)
        effect, agree = abs(ctl["loss_base2"] - fs["loss_base2"]), abs(st["loss_base2"] - fs["loss_base2"])
        check(effect > max(100 * agree, 1e-6 * fs["loss_base2"]), f"control {' '.join(flags)}: fairseq-eval-lm without the flag gives "
              f"{ctl['loss_base2']:.6f} / {ctl['tokens']} (moved {effect:.2e}, over 100x stretch's distance {agree:.1e})")

    # 2. the training rows, from the same weights: three updates of both trainers.
    tail = ["--max-update", "3", "--no-save", "--finetune-from-model", fs_ckpt]
    fs = trajectory([os.path.join(venv, "bin", "fairseq-train"), DATA] + FS_TRAIN + tail +
                    ["--add-bos-token", "--save-dir", os.path.join(tmp, "fs2")], "fairseq-train")
    st_cmd = [stretch, "train", DATA] + FS_TRAIN + tail + ["--pos", "sinusoidal", "--log-full-precision"]
    st = trajectory(st_cmd + ["--add-bos-token", "--save-dir", os.path.join(tmp, "st2")], "stretch train")
    check(len(fs) == 3 and len(st) == 3, f"{len(fs)} fairseq and {len(st)} stretch updates logged, 3 each")
    for (fu, fl, fw, fb), (su, sl, sw, sb) in zip(fs, st):
        rel = abs(sl - fl) / fl
        check(fu == su and rel <= 1e-3 and fw == sw and fb == sb,
              f"update {fu}: fairseq loss {fl:.3f} wpb {fw:g} bsz {fb:g} | stretch loss {sl:.6f} wpb {sw:g} "
              f"bsz {sb:g} (rel {rel:.1e})")
    no_bos = trajectory(st_cmd + ["--save-dir", os.path.join(tmp, "st3")], "stretch train without the flag")
    rel0 = abs(no_bos[0][1] - fs[0][1]) / fs[0][1]
    check(no_bos[0][2] != fs[0][2] and rel0 > 1e-2,
          f"control: without --add-bos-token stretch's first update has wpb {no_bos[0][2]:g} (fairseq {fs[0][2]:g}) "
          f"and loss {no_bos[0][1]:.4f} (rel {rel0:.1e} from fairseq's)")

    # 3. stretch trains with the flag; the export reads the same in real fairseq.
    save = os.path.join(tmp, "st")
    run([stretch, "train", DATA] + MODEL + ["--pos", "sinusoidal", "--add-bos-token", "--optimizer", "adam", "--lr",
        "0.005", "--max-update", "10", "--save-dir", save, "--threads", "1", "--disable-validation",
        "--no-epoch-checkpoints", "--log-format", "none"])
    ckpt, exported = os.path.join(save, "checkpoint_last.pt"), os.path.join(tmp, "exported.pt")
    run([stretch, "export-fairseq", ckpt, "--out", exported])
    arg = run([py, "-c", "import sys, torch; print(getattr(torch.load(sys.argv[1], map_location='cpu')['args'], "
               "'add_bos_token', None))", exported]).stdout.strip().splitlines()[-1]
    check(arg == "True", f"the export's args.add_bos_token is {arg}")
    for flags in PROTOCOLS:
        compare_eval(fairseq_eval(py, exported, flags + ["--add-bos-token"]), stretch_eval(stretch, ckpt, flags, tmp),
                     f"stretch-trained, exported {' '.join(flags)}")


def binary(stretch, tmp):
    save = os.path.join(tmp, "st")
    train = [stretch, "train", DATA, "--arch", "transformer_lm_tiny", "--tokens-per-sample", "16", "--batch-size", "8",
             "--max-update", "4", "--threads", "1", "--disable-validation", "--no-epoch-checkpoints",
             "--log-format", "none"]
    run(train + ["--add-bos-token", "--save-dir", save])
    ckpt = os.path.join(save, "checkpoint_last.pt")
    for flags in (["--tokens-per-sample", "16"], ["--tokens-per-sample", "16", "--context-window", "8"]):
        a = stretch_eval(stretch, ckpt, flags, tmp)
        b = stretch_eval(stretch, ckpt, flags + ["--add-bos-token"], tmp)
        c = stretch_eval(stretch, ckpt, flags + ["--model-overrides", "{'add_bos_token': False}"], tmp)
        check(a["loss_base2"] == b["loss_base2"] and a["count"] == b["count"] and a.get("add_bos_token") is True,
              f"{' '.join(flags)}: the saved config adds <s>: without the flag {a['loss_base2']!r} == with it "
              f"{b['loss_base2']!r}, {a['count']} tokens both")
        check(c["loss_base2"] != a["loss_base2"] and c["count"] == a["count"] and "add_bos_token" not in c,
              f"{' '.join(flags)}: --model-overrides add_bos_token False scores without <s>: {c['loss_base2']!r}")
    refusals = [
        (train + ["--add-bos-token", "--task", "truncated_bptt_lm", "--save-dir", os.path.join(tmp, "x1")],
         ["--add-bos-token", "truncated_bptt_lm"]),
        ([stretch, "eval-lm", DATA, "--path", ckpt, "--gen-subset", "valid", "--kv-cache"],
         ["--add-bos-token", "--kv-cache"]),
        ([stretch, "eval-lm", DATA, "--path", ckpt, "--gen-subset", "valid", "--task", "truncated_bptt_lm",
          "--batch-size", "2"], ["--add-bos-token", "truncated_bptt_lm"]),
        ([stretch, "eval-lm", DATA, "--path", ckpt, "--gen-subset", "valid", "--task", "masked_lm",
          "--add-bos-token"], ["--add-bos-token", "masked_lm"]),
        (train + ["--add-bos-token", "--pos", "learned", "--save-dir", os.path.join(tmp, "x1")],
         ["--add-bos-token", "--max-target-positions 16"]),
        ([stretch, "train", DATA, "--arch", "transformer_xl", "--add-bos-token", "--task", "truncated_bptt_lm",
          "--batch-size", "2", "--max-update", "1", "--save-dir", os.path.join(tmp, "x2")], ["add_bos_token"]),
    ]
    for cmd, words in refusals:
        p = run(cmd, ok=False)
        err = p.stderr.strip()
        first = next((line for line in err.splitlines() if "rror" in line), err.splitlines()[0] if err else "")
        check(p.returncode != 0 and all(w in first for w in words) and not os.path.exists(os.path.join(tmp, "x1")),
              f"refused (exit {p.returncode}): {' '.join(cmd[1:2] + cmd[-4:])}: {first}")


if __name__ == "__main__":
    sys.exit(checklib.main(__doc__, with_oracle, binary, "real fairseq-train / fairseq-eval-lm"))
