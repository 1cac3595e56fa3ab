#!/usr/bin/env python3
"""eval-lm parity: stretch's fairseq-eval-lm figures against the oracle's (REFERENCE §4.3-4.4).

usage: check_eval_lm.py --checkpoint CKPT --stream STREAM --tokens-per-sample l
                        [--context-window c] --result RESULT.json [--rtol 1e-4]

STREAM   safetensors with `tokens` [N] I32: the split's id stream as binarised (each line's
         ids then eos = 2), which eval-lm turns into blocks / context windows itself.
RESULT   JSON object written from stretch's eval-lm output: {"count": scored tokens,
         "loss_base2": -score_sum / count / ln 2, "ppl": 2^loss_base2} ("loss" is accepted for
         loss_base2).

The oracle (float64) builds the same windows (stretch_oracle.eval_lm: blocks of l - c tokens,
fairseq's LMContextWindowDataset rows, only the block's own targets scored, +-inf dropped) and
compares: count exactly, loss_base2 and ppl to --rtol relative (1e-4: a mean over many tokens of
per-token values that agree to ~1e-6, see check_transformer_lm.py). A window or count bug
(scoring the context tokens too, dropping the first target, eos not scored) changes count or
moves the loss by far more. Exit 0 agree; 1 disagree (a table); 2 bad input; 77 no torch (1 under CI=true: tests/oracle_skip.py).
"""

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

sys.path.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import oracle_skip  # noqa: E402  (tests/oracle_skip.py: missing torch fails under CI=true, else exits 77)

oracle_skip.require("torch")
import torch  # noqa: E402

from stretch_oracle.errors import InputError
from stretch_oracle.eval_lm import eval_lm, model_log_probs
from stretch_oracle.model import TransformerLM
from stretch_oracle.safetensors_io import load_file


def check(args):
    model = TransformerLM.from_checkpoint(args.checkpoint)
    V = model.cfg.vocab_size
    data, _ = load_file(args.stream)
    if "tokens" not in data or data["tokens"].dim() != 1:
        raise InputError(args.stream, "expected a tensor 'tokens' [N] I32")
    stream = data["tokens"].to(torch.int64)
    if len(stream) == 0 or int(stream.min()) < 0 or int(stream.max()) >= V:
        raise InputError(args.stream, f"'tokens' is empty or holds ids outside [0, {V})")
    l, c = args.tokens_per_sample, args.context_window
    if not 0 <= c < l:
        raise InputError("--context-window", f"{c} must satisfy 0 <= c < --tokens-per-sample {l}")
    if model.cfg.pos == "learned" and l > model.cfg.max_target_positions:
        raise InputError("--tokens-per-sample", f"{l} exceeds the learned table's max_target_positions "
                         f"{model.cfg.max_target_positions}")
    try:
        with open(args.result) as f:
            res = json.load(f)
    except (OSError, json.JSONDecodeError) as e:
        raise InputError(args.result, f"cannot read a JSON object ({e})")
    if not isinstance(res, dict) or "count" not in res or not ({"loss_base2", "loss"} & set(res)):
        raise InputError(args.result, "expected {\"count\": n, \"loss_base2\": x, \"ppl\": y}")
    ours = eval_lm(stream.tolist(), model_log_probs(model), l, c)
    theirs_loss = float(res.get("loss_base2", res.get("loss")))
    rows = [("count", ours.count, int(res["count"]), int(res["count"]) == ours.count),
            ("loss_base2", ours.loss_base2, theirs_loss,
             abs(theirs_loss - ours.loss_base2) <= args.rtol * abs(ours.loss_base2))]
    if "ppl" in res:
        rows.append(("ppl", ours.ppl, float(res["ppl"]), abs(float(res["ppl"]) - ours.ppl) <= args.rtol * ours.ppl))
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--checkpoint", required=True)
    ap.add_argument("--stream", required=True)
    ap.add_argument("--tokens-per-sample", type=int, required=True)
    ap.add_argument("--context-window", type=int, default=0)
    ap.add_argument("--result", required=True)
    ap.add_argument("--rtol", type=float, default=1e-4)
    args = ap.parse_args(argv)
    try:
        rows = check(args)
    except InputError as e:
        print(f"check_eval_lm: error: {e}", file=sys.stderr)
        return 2
    print(f"{'field':<11} {'oracle':>16} {'stretch':>16}  status")
    for name, o, t, ok in rows:
        print(f"{name:<11} {o:>16.8g} {t:>16.8g}  {'ok' if ok else 'FAIL'}")
    bad = [r for r in rows if not r[3]]
    print(f"check_eval_lm: {'FAIL' if bad else 'ok'} (l {args.tokens_per_sample}, c {args.context_window})")
    return 1 if bad else 0


if __name__ == "__main__":
    torch.set_num_threads(1)
    sys.exit(main())
