#!/usr/bin/env python3
"""train --checkpoint-suffix against REAL fairseq 0.12.2 (the venv of tests/fairseq/setup_fairseq.sh), on the
fixture data-bin (tests/fixtures/fairseq), everything generated at test time:
 1. both programs fine-tune the same fairseq-trained start (--finetune-from-model) with --checkpoint-suffix -x
    and every kind of checkpoint: epoch files (7 updates per epoch; --keep-last-epochs 1), interval files
    (--save-interval-updates 3, --keep-interval-updates 2), checkpoint_best, --keep-best-checkpoints 2,
    checkpoint_last; validating every 3 updates, dropout 0. Each --save-dir starts with decoys without the
    suffix (checkpoint_last.pt, checkpoint_1_3.pt, checkpoint1.pt, checkpoint.best_loss_1.0000.pt): they
    are neither resumed (the first launch fine-tunes: fairseq's "loading pretrained model" line) nor pruned.
    After 10 updates the two --save-dirs hold the same file names, and the "Saved checkpoint" lines name
    the same files in the same order;
 2. a second launch of each (--max-update 17) resumes checkpoint_last-x.pt: the same "Loaded checkpoint
    .../checkpoint_last-x.pt (epoch 2 @ 10 updates)" line; the same names again after it;
 3. --restore-file DIR/checkpoint_1_6.pt with the suffix loads DIR/checkpoint_1_6-x.pt in both (fairseq's
    restore_file.replace(".pt", suffix + ".pt")): the same "Loaded checkpoint" line.
Without the venv: tests/oracle_skip.py (a failure under CI=true, a loud skip elsewhere).
  --binary: no oracle: --dump-config holds checkpoint_suffix; a suffix with '/' or ".pt" is refused before
    anything is written; a stop signal saves checkpoint_last-x.pt; eval-lm reads checkpoint_best-x.pt; a run
    without the suffix in the same --save-dir starts afresh beside the suffixed files and leaves them.
Usage: check_checkpoint_suffix.py STRETCH_BINARY FAIRSEQ_VENV | ... STRETCH_BINARY --binary
"""
import os
import re
import shutil
import signal
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.append(os.path.join(HERE, ".."))
sys.path.insert(0, HERE)
import checklib  # noqa: E402
from checklib import DATA, run  # noqa: E402
from testlib import check  # noqa: E402

MODEL = checklib.tiny_model(1, max_tokens=1024) + ("--task language_modeling --optimizer adam --lr 0.005 "
         "--log-format simple --log-interval 1 --num-workers 0").split()
KEEP = ("--checkpoint-suffix=-x --save-interval-updates 3 --validate-interval-updates 3 --keep-interval-updates 2 "
        "--keep-last-epochs 1 --keep-best-checkpoints 2").split()
DECOYS = ("checkpoint_last.pt", "checkpoint_1_3.pt", "checkpoint1.pt", "checkpoint.best_loss_1.0000.pt")


def listing(d):
    """The checkpoint files of a --save-dir (stretch's lock file .stretch-train.lock left out)."""
    return sorted(f for f in os.listdir(d) if not f.startswith(".")) if os.path.isdir(d) else []


def saved(out):
    """The basenames of the "Saved checkpoint X (epoch" lines, in order."""
    return [os.path.basename(m) for m in re.findall(r"Saved checkpoint (\S+) \(epoch", out)]


def loaded(out, save_dir):
    m = re.search(r"Loaded checkpoint (\S+) \((epoch \d+ @ \d+ updates)\)", out)
    return None if m is None else (m.group(1).replace(save_dir, "SAVE"), m.group(2))


def with_oracle(stretch, venv, tmp):
    fairseq_train = os.path.join(venv, "bin", "fairseq-train")
    base_dir = os.path.join(tmp, "base")
    run([fairseq_train, DATA] + MODEL + ["--max-update", "3", "--disable-validation", "--save-dir", base_dir])
    base = os.path.join(base_dir, "checkpoint_last.pt")
    programs = {"fairseq": [fairseq_train, DATA] + MODEL,
                "stretch": [stretch, "train", DATA] + MODEL + ["--pos", "sinusoidal", "--threads", "1"]}
    dirs, first, second = {}, {}, {}
    for name, cmd in programs.items():
        d = dirs[name] = os.path.join(tmp, "save-" + name)
        os.makedirs(d)
        for decoy in DECOYS:
            shutil.copy(base, os.path.join(d, decoy))
        p = run(cmd + KEEP + ["--max-update", "10", "--finetune-from-model", base, "--save-dir", d])
        out = p.stdout + p.stderr
        first[name] = (saved(out), listing(d), "loading pretrained model from " + base in out)
        p = run(cmd + KEEP + ["--max-update", "17", "--finetune-from-model", base, "--save-dir", d])
        out = p.stdout + p.stderr
        second[name] = (saved(out), listing(d), loaded(out, d))
    (fs_saved, fs_files, fs_ft), (st_saved, st_files, st_ft) = first["fairseq"], first["stretch"]
    check(fs_ft and st_ft, f"first launch: both fine-tune from the start file (the decoy checkpoint_last.pt is not "
                           f"resumed): fairseq {fs_ft}, stretch {st_ft}")
    check(fs_saved == st_saved and len(fs_saved) >= 5,
          f"first launch: 'Saved checkpoint' names: fairseq {fs_saved} | stretch {st_saved}")
    check(fs_files == st_files and all(d in st_files for d in DECOYS) and "checkpoint_last-x.pt" in st_files,
          f"first launch: --save-dir files: fairseq {fs_files} | stretch {st_files}")
    (fs_saved, fs_files, fs_load), (st_saved, st_files, st_load) = second["fairseq"], second["stretch"]
    check(fs_load == st_load and st_load is not None and st_load[0] == "SAVE/checkpoint_last-x.pt",
          f"second launch resumes: fairseq {fs_load} | stretch {st_load}")
    check(fs_saved == st_saved and len(fs_saved) >= 3,
          f"second launch: 'Saved checkpoint' names: fairseq {fs_saved} | stretch {st_saved}")
    check(fs_files == st_files and all(d in st_files for d in DECOYS) and "checkpoint2-x.pt" in st_files,
          f"second launch: --save-dir files: fairseq {fs_files} | stretch {st_files}")
    # --restore-file with the suffix: the full path given, the suffix inserted before its ".pt".
    restored = {}
    for name, cmd in programs.items():
        d = dirs[name]
        target = os.path.join(d, "checkpoint_2_12.pt")
        if not os.path.exists(os.path.join(d, "checkpoint_2_12-x.pt")):
            restored[name] = None
            continue
        p = run(cmd + ["--checkpoint-suffix=-x", "--restore-file", target, "--max-update", "13",
                       "--disable-validation", "--save-dir", os.path.join(tmp, "restore-" + name)])
        restored[name] = loaded(p.stdout + p.stderr, d)
    check(restored["fairseq"] == restored["stretch"] and restored["stretch"] is not None and
          restored["stretch"][0] == "SAVE/checkpoint_2_12-x.pt",
          f"--restore-file {{save}}/checkpoint_2_12.pt --checkpoint-suffix -x loads: fairseq {restored['fairseq']} | "
          f"stretch {restored['stretch']}")


def binary(stretch, tmp):
    train = [stretch, "train", DATA, "--arch", "transformer_lm_tiny", "--tokens-per-sample", "32", "--max-tokens", "1024",
             "--threads", "1", "--log-format", "simple", "--log-interval", "1"]
    dump = run(train + ["--checkpoint-suffix", "-x", "--dump-config"]).stdout
    check('"checkpoint_suffix": "-x"' in dump, "--dump-config holds checkpoint_suffix -x")
    for bad in ("a/b", "-x.pt"):
        d = os.path.join(tmp, "bad")
        p = run(train + ["--checkpoint-suffix", bad, "--max-update", "2", "--save-dir", d], ok=False)
        err = p.stderr.strip().splitlines()
        check(p.returncode == 2 and err and "--checkpoint-suffix" in err[0] and not os.path.exists(d),
              f"--checkpoint-suffix {bad} refused before anything is written: {err[:1]}")
    # A stop signal saves checkpoint_last-x.pt.
    d = os.path.join(tmp, "sig")
    proc = subprocess.Popen(train + ["--checkpoint-suffix", "-x", "--max-update", "100000", "--disable-validation",
                                     "--no-epoch-checkpoints", "--save-dir", d],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 60
    line = ""
    while time.time() < deadline and "num_updates" not in line:
        line = proc.stdout.readline()
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=120)
    files = listing(d)
    check(proc.returncode == 128 + signal.SIGTERM and files == ["checkpoint_last-x.pt"],
          f"SIGTERM: exit {proc.returncode}, --save-dir holds {files}; {[x for x in err.splitlines() if 'signal' in x]}")
    # Validation: checkpoint_best-x.pt, read by eval-lm; a run without the suffix beside it starts afresh.
    d = os.path.join(tmp, "best")
    run(train + ["--checkpoint-suffix", "-x", "--max-update", "4", "--validate-interval-updates", "2",
                 "--save-interval-updates", "2", "--save-dir", d])
    files = listing(d)
    check(files == ["checkpoint_1_2-x.pt", "checkpoint_1_4-x.pt", "checkpoint_best-x.pt", "checkpoint_last-x.pt"],
          f"4 updates, saving every 2: {files}")
    p = run([stretch, "eval-lm", DATA, "--path", os.path.join(d, "checkpoint_best-x.pt"), "--gen-subset", "valid"])
    check("Loss (base 2)" in p.stdout, "eval-lm reads checkpoint_best-x.pt")
    p = run(train + ["--max-update", "2", "--disable-validation", "--no-epoch-checkpoints", "--save-dir", d])
    after = listing(d)
    check("No existing checkpoint found" in p.stdout + p.stderr and set(files) <= set(after) and
          "checkpoint_last.pt" in after, f"without the suffix: a fresh run beside them: {after}")


if __name__ == "__main__":
    sys.exit(checklib.main(__doc__, with_oracle, binary, "real fairseq-train"))
