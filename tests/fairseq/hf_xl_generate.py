#!/usr/bin/env python3
"""Greedy generation by HuggingFace transformers 4.30.2's TransfoXLLMHeadModel.generate (with its
`mems`) on the model inside a real fairseq transformer_xl checkpoint, built by fairseq itself
(checkpoint_utils.load_model_ensemble_and_task: model.decoder.model is the HF model). Prints one
JSON object: {"ids": [new ids], "logprobs": [ln p of each under the model]}. The context is the
given ids; <s>, <pad>, <unk> (0, 1, 3) are banned as stretch generate bans them (bad_words_ids;
the scores are HF's log-probs, banning sets only the banned ids to -inf), no eos stop.
--model-overrides (a Python dict literal) is fairseq's, applied when the model is built.
Usage (in the fairseq venv):
  hf_xl_generate.py DATA CKPT USER_DIR --context 2,5,7,... --max-len N [--model-overrides DICT]
"""
import argparse
import ast
import json

import torch
from fairseq import checkpoint_utils, utils


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("data")
    ap.add_argument("ckpt")
    ap.add_argument("user_dir")
    ap.add_argument("--context", required=True)
    ap.add_argument("--max-len", type=int, required=True)
    ap.add_argument("--model-overrides", default="{}")
    a = ap.parse_args()
    utils.import_user_module(argparse.Namespace(user_dir=a.user_dir))
    overrides = dict(ast.literal_eval(a.model_overrides), data=a.data)
    models, _cfg, _task = checkpoint_utils.load_model_ensemble_and_task([a.ckpt], arg_overrides=overrides)
    hf = models[0].decoder.model
    hf.eval()
    ctx = torch.tensor([[int(t) for t in a.context.split(",")]], dtype=torch.long)
    with torch.no_grad():
        out = hf.generate(ctx, max_new_tokens=a.max_len, do_sample=False, num_beams=1,
                          bad_words_ids=[[0], [1], [3]], eos_token_id=None, pad_token_id=1,
                          output_scores=True, return_dict_in_generate=True)
    ids = out.sequences[0, ctx.shape[1]:].tolist()
    lps = [float(s[0, t]) for s, t in zip(out.scores, ids)]
    print(json.dumps({"ids": ids, "logprobs": lps, "mem_len": hf.transformer.mem_len,
                      "same_length": hf.transformer.same_length, "clamp_len": hf.transformer.clamp_len}))


if __name__ == "__main__":
    main()
