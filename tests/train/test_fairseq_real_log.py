#!/usr/bin/env python3
"""fairseq_log_reader.py on logs REAL fairseq-train 0.12.2 wrote (tests/fixtures/fairseq/logs/,
make_logs.sh: 12 updates of a tiny LM, --log-interval 5, validating and saving every 6 updates,
--log-format simple and json), then the same reader on stretch's log of the same command: the
same records in the same order (train_inner at 5 and 10, valid at 6 and 12 — best_loss from the
second on —, a "Saved checkpoint" after each, the end-of-epoch "train" summary at the
--max-update stop), each with the same keys in the same order, every value written as fairseq's
format_stat writes it ("{:g}" of the value rounded as its meter rounds it), JSON values strings
(but epoch, an int, and update, a number rounded to 3).
Lines that are not logging lines (the model's multi-line repr fairseq prints) are skipped, as a
log parser must.
Usage: test_fairseq_real_log.py STRETCH_BINARY
"""
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import fairseq_log_reader as flr  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from testlib import failures, check, finish  # noqa: E402

FIX = os.path.join(HERE, "..", "fixtures", "fairseq")
ROUND = {"loss": 3, "ppl": 2, "wps": 1, "ups": 2, "wpb": 1, "bsz": 1, "gnorm": 3, "clip": 1, "train_wall": 0,
         "wall": 0, "best_loss": 3}


def records(text):
    recs = [r for r in (flr.parse_line(x) for x in text.splitlines()) if r is not None]
    out = []
    for r in recs:
        if r.kind == "train_inner":
            out.append(("train_inner", r))
        elif r.kind == "print":
            out.append(("valid" if r.prefix else r.logger, r))
        elif r.kind == "saved":
            out.append(("saved", r))
        elif r.kind == "json" and r.logger in ("train_inner", "valid", "train"):
            out.append(("json " + r.logger, r))
    return out


def formatted_as_fairseq(key, text):
    base = key.split("_", 1)[1] if key.startswith(("valid_", "train_")) and key not in ("train_wall",) else key
    if base not in ROUND:
        return True
    try:
        v = float(text)
    except ValueError:
        return False
    return text == flr.g(round(v, ROUND[base]))


def compare(fmt, real, ours):
    check([k for k, _ in real] == [k for k, _ in ours],
          f"{fmt}: the same records in order: fairseq {[k for k, _ in real]}, stretch {[k for k, _ in ours]}")
    for (k, a), (_, b) in zip(real, ours):
        ka, kb = list(a.fields), list(b.fields)
        if k == "saved":
            check(a.fields["score"] == flr.g(float(a.fields["score"])) and b.fields["score"] == flr.g(float(b.fields["score"])),
                  f"{fmt}: the saved line's score is the logged loss ({a.fields['score']} / {b.fields['score']})")
            continue
        check(ka == kb, f"{fmt} {k}: keys {kb} = fairseq's {ka}")
        for rec, who in ((a, "fairseq"), (b, "stretch")):
            bad = [(key, v) for key, v in rec.fields.items() if isinstance(v, str) and not formatted_as_fairseq(key, v)]
            if k.startswith("json"):
                # values are strings, except epoch (an int) and update (a number rounded to 3), as fairseq's
                bad += [(key, v) for key, v in rec.fields.items() if key not in ("epoch", "update") and not isinstance(v, str)]
                if "update" in rec.fields and not (isinstance(rec.fields["update"], float)
                                                   and round(rec.fields["update"], 3) == rec.fields["update"]):
                    bad.append(("update", rec.fields["update"]))
            check(not bad, f"{fmt} {k}: {who}'s values written as format_stat writes them {bad}")
        if k == "train_inner":
            check((a.step, a.size > 0) == (b.step, b.size > 0), f"{fmt}: train_inner at update {b.step} as fairseq's {a.step}")


def main():
    b = sys.argv[1]
    logs = {f: open(os.path.join(FIX, "logs", f"train_{f}.log")).read() for f in ("simple", "json")}
    # The reader first proves itself on fairseq's own lines.
    for f, text in logs.items():
        real = records(text)
        check(len(real) >= 7, f"real fairseq {f} log: {len(real)} records read")
    with tempfile.TemporaryDirectory() as tmp:
        for f, text in logs.items():
            cmd = [b, "train", os.path.join(FIX, "data-bin"), "--task", "language_modeling", "--arch", "transformer_lm",
                   "--cpu", "--seed", "1", "--decoder-layers", "1", "--decoder-embed-dim", "16",
                   "--decoder-ffn-embed-dim", "32", "--decoder-attention-heads", "2", "--tokens-per-sample", "32",
                   "--max-tokens", "256", "--max-update", "12", "--optimizer", "adam", "--lr", "0.005",
                   "--clip-norm", "1.0", "--dropout", "0", "--num-workers", "0", "--log-format", f,
                   "--log-interval", "5", "--save-interval-updates", "6", "--validate-interval-updates", "6",
                   "--no-epoch-checkpoints", "--save-dir", os.path.join(tmp, f), "--threads", "1"]
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
            check(p.returncode == 0, f"stretch train --log-format {f} ({p.stderr[-500:]!r})")
            compare(f, records(text), records(p.stdout))
    sys.exit(finish())


if __name__ == "__main__":
    main()
