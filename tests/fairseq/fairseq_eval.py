#!/usr/bin/env python3
"""Runs REAL fairseq-eval-lm (fairseq_cli.eval_lm.cli_main, unchanged) and prints what it
computed as one JSON object, at full precision (fairseq's log rounds Loss to 4 decimals):
  {"loss_base2": float, "tokens": int, "nll": [per-token NLL in nats, stream order]}
"nll" comes from --output-word-probs (fairseq logs ln p to 6 decimals per sample; samples
are sorted by id, which is stream order for both --tokens-per-sample blocks and
--context-window). Under --task truncated_bptt_lm every row of a batch has the same id (the step),
so the samples are kept in the order fairseq logs them: step by step, row by row (stretch
eval-lm's --dump-nll order). "printed_loss" is the Loss (base 2) line as fairseq prints it
(4 decimals). STRETCH_FAIRSEQ_ALIBI=1 evaluates with the ALiBi fork's decoder
(fairseq_alibi_patch.py); STRETCH_FAIRSEQ_NORMFORMER=1 lets transformer_lm build NormFormer
(fairseq_normformer_patch.py). Usage (in the fairseq venv):
  fairseq_eval.py DATA --path CKPT [more fairseq-eval-lm flags]
"""
import json
import logging
import re
import sys


def main():
    import os
    import fairseq_cli.eval_lm as m

    if os.environ.get("STRETCH_FAIRSEQ_ALIBI") == "1":  # the ALiBi fork's decoder (fairseq_alibi_patch.py)
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        import fairseq_alibi_patch
        fairseq_alibi_patch.apply()
    if os.environ.get("STRETCH_FAIRSEQ_NORMFORMER") == "1":  # transformer_lm builds NormFormer (the patch's doc)
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        import fairseq_normformer_patch
        fairseq_normformer_patch.apply()

    captured = {}
    samples = {}
    logged = []  # (id, NLLs) in log order
    orig = m.eval_lm

    def eval_lm(*args, **kwargs):
        out = orig(*args, **kwargs)
        captured["loss_base2"] = float(out["loss"])
        return out

    m.eval_lm = eval_lm

    class Grab(logging.Handler):
        def emit(self, record):
            msg = record.getMessage()
            hit = re.match(r"^Evaluated ([\d,]+) tokens", msg)
            if hit:
                captured["tokens"] = int(hit.group(1).replace(",", ""))
                return
            hit = re.match(r"^Loss \(base 2\): ([0-9.]+|inf|nan)", msg)
            if hit:
                captured["printed_loss"] = hit.group(1)
                return
            hit = re.match(r"^(\d+) (.*)$", msg)
            if hit and "[" in msg:
                lps = [float(x) for x in re.findall(r" \[(-?[0-9.e+-]+|-?inf)\](?:\t|$)", msg)]
                samples[int(hit.group(1))] = [-lp for lp in lps]
                logged.append([-lp for lp in lps])

    logging.getLogger("fairseq_cli.eval_lm").addHandler(Grab())
    sys.argv = ["fairseq-eval-lm"] + sys.argv[1:] + ["--output-word-probs"]
    m.cli_main()
    if "truncated_bptt_lm" in sys.argv:
        nll = [x for row in logged for x in row]
    else:
        nll = [x for k in sorted(samples) for x in samples[k]]
    captured["nll"] = [round(x, 6) for x in nll]
    print(json.dumps(captured))


if __name__ == "__main__":
    main()
