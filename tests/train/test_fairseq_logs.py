#!/usr/bin/env python3
"""tests/train/test_fairseq_logs.py — `stretch train`'s log read by a reader of fairseq's format
(fairseq_log_reader.py, written from fairseq 0.12.2's source and checked on real fairseq lines).

A short run that stops at --max-update in the middle of epoch 2, in each --log-format:
  simple: every stdout line is a logging line; train_inner lines with fairseq's counter
          ("epoch 001:      4 / 13"), keys in fairseq's order and values as fairseq's meters round
          them ("{:g}" of loss to 3 decimals, ppl 2, wps 1, ...); "valid on 'valid' subset" lines
          (best_loss from the second on); the end-of-epoch "train" summary after each epoch and at
          the --max-update stop; "Saved checkpoint ..." lines naming files that exist, with the
          validation loss as score; the configuration as the first line.
  json:   the same records as JSON with fairseq's keys (valid_*, train_*), values as strings,
          "update" = epoch - 1 + i/size rounded to 3; the deterministic fields equal simple's.
  none:   no progress lines, still the checkpoint lines.
  tqdm:   under a pseudo-terminal, the bar on stderr as tqdm draws it, and no train_inner lines.
And train_wall continues across a resume (the checkpoint's train_clock grows, never restarts).
usage: test_fairseq_logs.py --stretch BIN
"""
import argparse
import json
import os
import pty
import re
import struct
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fairseq_log_reader as flr  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from testlib import failures, check, finish, synthetic_text, run  # noqa: E402

INNER_KEYS = ["loss", "ppl", "wps", "ups", "wpb", "bsz", "num_updates", "lr", "gnorm", "clip", "train_wall", "wall"]
ROUND = {"loss": 3, "ppl": 2, "wps": 1, "ups": 2, "wpb": 1, "bsz": 1, "gnorm": 3, "clip": 1, "train_wall": 0,
         "wall": 0, "best_loss": 3}
DETERMINISTIC = ["loss", "ppl", "wpb", "bsz", "num_updates", "lr", "gnorm", "clip", "best_loss"]


def train_args(stretch, data, save, fmt, max_update):
    return [stretch, "train", data, "--arch", "transformer_lm_tiny", "--decoder-layers", "1", "--decoder-embed-dim",
            "16", "--decoder-ffn-embed-dim", "32", "--decoder-attention-heads", "2", "--tokens-per-sample", "16",
            "--batch-size", "4", "--required-batch-size-multiple", "1", "--optimizer", "adam", "--lr", "1e-3",
            "--clip-norm", "0.5", "--max-update", str(max_update), "--log-interval", "2", "--threads", "1",
            "--seed", "3", "--validate-interval-updates", "4", "--save-interval-updates", "4", "--save-dir", save] + \
        (["--log-format", fmt] if fmt else [])


def checkpoint_metadata(path):
    """safetensors: 8-byte little-endian header length, then the JSON header with __metadata__."""
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        return json.loads(f.read(n)).get("__metadata__", {})


def check_values(fields, where):
    for k, v in fields.items():
        check(flr.g(float(v)) == v, f"{where}: {k}={v!r} is not fairseq's '{{:g}}' text")
        if k in ROUND:
            check(flr.decimals(v) <= ROUND[k], f"{where}: {k}={v} has more than {ROUND[k]} decimals")
    if "loss" in fields and "ppl" in fields:
        loss, ppl = float(fields["loss"]), float(fields["ppl"])
        check(abs(ppl - 2 ** loss) <= 4e-4 * ppl + 0.005, f"{where}: ppl {ppl} is not 2^loss ({loss})")


def simple_records(text, max_update, save):
    recs = flr.read_log(text)
    check(recs[0].logger == "fairseq_cli.train" and recs[0].message.startswith("{"), "the configuration comes first")
    json.loads(recs[0].message)
    inner = [r for r in recs if r.kind == "train_inner"]
    prints = [r for r in recs if r.kind == "print"]
    saved = [r for r in recs if r.kind == "saved"]
    check(len(inner) == max_update // 2, f"{len(inner)} train_inner lines, expected {max_update // 2}")
    size = inner[0].size if inner else 0
    for r in inner:
        check(list(r.fields) == INNER_KEYS, f"train_inner keys {list(r.fields)}")
        check_values(r.fields, f"train_inner @{r.fields.get('num_updates')}")
        n = int(r.fields["num_updates"])
        check(n % 2 == 0, "logged every --log-interval 2 updates")
        check(r.step == n - (r.epoch - 1) * size and r.size == size, f"counter {r.step} / {r.size} at update {n}")
    valid = [r for r in prints if r.prefix == "valid on 'valid' subset"]
    train = [r for r in prints if r.logger == "train" and r.prefix == ""]
    check(len(valid) >= 3, f"{len(valid)} validation lines")
    for i, r in enumerate(valid):
        check(r.logger == "valid", "the validation line's logger is the subset's name")
        want = ["loss", "ppl", "wps", "wpb", "bsz", "num_updates"] + (["best_loss"] if i > 0 else [])
        check(list(r.fields) == want, f"valid keys {list(r.fields)}")
        check_values(r.fields, f"valid @{r.fields.get('num_updates')}")
    best = min(float(r.fields["loss"]) for r in valid)
    check(float(valid[-1].fields["best_loss"]) == best, "best_loss is the lowest validation loss")
    # The epoch summaries: epoch 1 at its end, epoch 2 at the --max-update stop mid-epoch.
    check([r.epoch for r in train] == [1, 2], f"train summaries for epochs {[r.epoch for r in train]}")
    for r in train:
        check(list(r.fields) == INNER_KEYS, f"train keys {list(r.fields)}")
        check_values(r.fields, f"train epoch {r.epoch}")
    check(train and train[-1].fields["num_updates"] == str(max_update), "the last summary is at --max-update")
    check(size < max_update < 2 * size, f"--max-update {max_update} stops inside epoch 2 (epoch of {size})")
    ends = [r for r in recs if r.message.startswith("end of epoch ")]
    check(len(ends) == 2, "an 'end of epoch N (average epoch stats below)' line before each summary")
    check(any(r.message == f"Stopping training due to num_updates: {max_update} >= max_update: {max_update}"
              for r in recs), "the --max-update stop is logged")
    for r in saved:
        check(os.path.exists(r.fields["path"]), f"saved checkpoint {r.fields['path']} exists")
    check(len(saved) >= 3, f"{len(saved)} 'Saved checkpoint' lines")
    # Each save after a validation carries its (rounded) loss as score.
    last_valid = None
    for r in recs:
        if r.kind == "print" and r.prefix:
            last_valid = r.fields["loss"]
        if r.kind == "saved":
            check(r.fields["score"] == repr(float(last_valid)), f"score {r.fields['score']} vs valid loss {last_valid}")
    check(saved[-1].fields["path"].endswith("checkpoint_best.pt") or
          saved[-1].fields["path"].endswith("checkpoint_last.pt"), "the last save")
    check(saved[-1].fields["updates"] == str(max_update), "the last save is at --max-update")
    return inner, valid, train


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--stretch", required=True)
    args = ap.parse_args()
    flr.self_check()
    tmp = tempfile.mkdtemp(prefix="stretch-fairseq-logs-")
    for name, lines, seed in (("train", 60, 1), ("valid", 15, 2)):
        with open(os.path.join(tmp, name + ".txt"), "w") as f:
            f.write(synthetic_text(lines, seed, vocab=300))
    data = os.path.join(tmp, "data-bin")
    p = run([args.stretch, "preprocess", "--only-source", "--trainpref", os.path.join(tmp, "train.txt"),
             "--validpref", os.path.join(tmp, "valid.txt"), "--destdir", data])
    assert p.returncode == 0, p.stderr
    # One epoch's size, from a first simple run, then --max-update inside epoch 2.
    probe = run(train_args(args.stretch, data, os.path.join(tmp, "probe"), "simple", 2))
    assert probe.returncode == 0, probe.stderr
    size = next(r.size for r in flr.read_log(probe.stdout) if r.kind == "train_inner")
    max_update = size + size // 2 + (size // 2) % 2
    max_update += max_update % 2

    s = run(train_args(args.stretch, data, os.path.join(tmp, "simple"), "simple", max_update))
    check(s.returncode == 0, f"simple run exit {s.returncode}: {s.stderr[-2000:]}")
    inner, valid, train = simple_records(s.stdout, max_update, os.path.join(tmp, "simple"))

    # Without --log-format and stderr not a terminal: fairseq's default (tqdm) falls back to simple.
    d = run(train_args(args.stretch, data, os.path.join(tmp, "default"), None, 4))
    check(d.returncode == 0 and any(r.kind == "train_inner" for r in flr.read_log(d.stdout)),
          "the default format off a terminal is simple")

    j = run(train_args(args.stretch, data, os.path.join(tmp, "json"), "json", max_update))
    check(j.returncode == 0, f"json run exit {j.returncode}")
    jrecs = [r for r in flr.read_log(j.stdout) if r.kind == "json"]
    jinner = [r.fields for r in jrecs if r.logger == "train_inner"]
    jvalid = [r.fields for r in jrecs if r.logger == "valid"]
    jtrain = [r.fields for r in jrecs if r.logger == "train"]
    check(len(jinner) == len(inner) and len(jvalid) == len(valid) and len(jtrain) == len(train),
          "json has the same records as simple")
    for a, b in zip(jinner, inner):
        check(list(a)[:2] == ["epoch", "update"] and list(a)[2:] == INNER_KEYS, f"json keys {list(a)}")
        check(isinstance(a["epoch"], int) and isinstance(a["update"], float), "epoch int, update float")
        check(all(isinstance(a[k], str) for k in INNER_KEYS), "json values are strings, as fairseq's")
        check(a["update"] == round(b.epoch - 1 + b.step / b.size, 3), f"update {a['update']} at {b.step}/{b.size}")
        for k in DETERMINISTIC:
            if k in b.fields:
                check(a[k] == b.fields[k], f"json {k}={a[k]} vs simple {b.fields[k]}")
    for a, b in zip(jvalid, valid):
        check(all(a["valid_" + k] == b.fields[k] for k in DETERMINISTIC if k in b.fields), f"json valid {a}")
    for a, b in zip(jtrain, train):
        check(a["epoch"] == b.epoch and all(a["train_" + k] == b.fields[k] for k in DETERMINISTIC if k in b.fields),
              f"json train {a}")
        check("train_train_wall" in a and "train_wall" in a, "fairseq's keys train_train_wall and train_wall")

    n = run(train_args(args.stretch, data, os.path.join(tmp, "none"), "none", 4))
    nrecs = flr.read_log(n.stdout)
    check(n.returncode == 0 and not any(r.kind in ("train_inner", "print", "json") for r in nrecs),
          "--log-format none prints no progress lines")
    check(any(r.kind == "saved" for r in nrecs), "--log-format none still logs the saved checkpoints")

    # tqdm on a terminal: stderr is a pseudo-terminal.
    master, slave = pty.openpty()
    os.set_blocking(master, False)
    t = subprocess.Popen(train_args(args.stretch, data, os.path.join(tmp, "tqdm"), "tqdm", 6),
                         stdout=subprocess.PIPE, stderr=slave, text=True)
    out, _ = t.communicate(timeout=300)
    os.close(slave)
    err = b""
    try:
        while True:
            chunk = os.read(master, 65536)
            if not chunk:
                break
            err += chunk
    except (BlockingIOError, OSError):
        pass
    os.close(master)
    bar_text = err.decode("utf-8", "replace")
    trecs = flr.read_log(out)
    check(t.returncode == 0, "tqdm run exit")
    check(not any(r.kind == "train_inner" for r in trecs), "tqdm: the interval stats ride on the bar, no lines")
    check(any(r.kind == "print" and r.logger == "train" for r in trecs), "tqdm: the summaries are printed")
    bar = re.compile(r"epoch 001:\s+\d+%\|[█▏▎▍▌▋▊▉ ]+\| \d+/\d+ \[\d\d:\d\d<(\d\d:\d\d|\?), +(\?|[\d.]+)(it/s|s/it)"
                     r"(, loss=[\d.]+, ppl=[\d.]+, wps=)?")
    check(bar.search(bar_text) is not None, f"tqdm bar on the terminal: {bar_text[:300]!r}")
    check(re.search(r", loss=[\d.]+, ppl=[\d.]+, wps=", bar_text) is not None, "the bar carries the stats")

    # train_wall continues across a resume: the clock in checkpoint_last grows from the first run's.
    save = os.path.join(tmp, "resume")
    a = run(train_args(args.stretch, data, save, "simple", 4))
    c1 = json.loads(checkpoint_metadata(os.path.join(save, "checkpoint_last.pt"))["train_clock"])
    b = run(train_args(args.stretch, data, save, "simple", 8))
    c2 = json.loads(checkpoint_metadata(os.path.join(save, "checkpoint_last.pt"))["train_clock"])
    check(a.returncode == 0 and b.returncode == 0, "resume runs")
    check(any(r.message.startswith(f"Loaded checkpoint {save}/checkpoint_last.pt (epoch 1 @ 4 updates)")
              for r in flr.read_log(b.stdout)), "the resume says 'Loaded checkpoint ... (epoch 1 @ 4 updates)'")
    check(c1["train_wall"] > 0 and c2["train_wall"] > c1["train_wall"], f"train_wall {c1} then {c2}")
    check(c2["epoch_train_wall"] > c1["epoch_train_wall"], "the epoch's train_wall continues too")

    return finish(f"ok: simple/json/none/tqdm read as fairseq's logs ({len(inner)} train_inner, {len(valid)} valid, "
          f"{len(train)} train lines; epoch of {size} updates, stop at {max_update})")


if __name__ == "__main__":
    sys.exit(main())
