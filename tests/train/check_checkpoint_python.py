#!/usr/bin/env python3
"""A real `stretch train` checkpoint opened with Python's `safetensors.safe_open`, checked against
the documented layout (docs/formats.md, "Checkpoint contents").

usage: check_checkpoint_python.py --stretch build/bin/stretch

Two short runs on a synthetic data-bin (made with `stretch preprocess` in a temporary directory):
  learned positions, untied output, adam   -> embed_positions, output_projection, exp_avg/exp_avg_sq
  t5 bias, tied output, post-norm, nag      -> relative_attention_bias, no output_projection, no final
                                               norm, momentum_buffer, NAG's lr_old
For each, checkpoint_last.pt must open with safe_open (framework "pt"), hold exactly the model
tensors under fairseq's state-dict names with the shapes the config implies (F32), one
"optimizer.<param>.<slot>" tensor [numel] per parameter and slot, and the metadata keys format,
config (fairseq argument names at the top level + the trainer's groups), dict_hash, train_state
and optimizer (JSON). Exit 0 ok, 1 a mismatch (listed), 77 safetensors or torch missing (1 under CI=true).
"""

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile

sys.path.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import oracle_skip  # noqa: E402  (tests/oracle_skip.py: a missing oracle fails under CI=true, else exits 77)

oracle_skip.require("torch", "safetensors")
import torch  # noqa: E402,F401  (safe_open's "pt" framework)
from safetensors import safe_open  # noqa: E402

# The epoch sums of fairseq's end-of-epoch "train | ..." line (bsz, gnorm, clip, updates) came with
# issue 16's logs; checkpoints written before them lack them (read as 0, train/train_state.h), and
# lr_plateau (reduce_lr_on_plateau's state, a fresh one when absent), epoch_metric_sums (a family's
# extra train_inner metrics over the epoch: adaptive_span's spans; empty otherwise), ema_update_counter
# (--store-ema --ema-update-freq's counter, 0 when absent), bf16_products (--bf16's products, "" for fp32).
TRAIN_STATE_KEYS = {"num_updates", "epoch", "next_batch", "best_loss", "epoch_loss_sum", "epoch_ntokens", "seed",
                    "epoch_nsentences", "epoch_gnorm_sum", "epoch_clip_count", "epoch_updates", "lr_plateau",
                    "epoch_metric_sums", "ema_update_counter", "bf16_products"}
CONFIG_KEYS = {"decoder_layers", "decoder_embed_dim", "decoder_ffn_embed_dim", "decoder_attention_heads",
               "decoder_normalize_before", "no_decoder_final_norm", "share_decoder_input_output_embed",
               "no_scale_embedding", "activation_fn", "pos", "tokens_per_sample", "max_target_positions",
               "vocab_size", "padding_idx", "dropout", "attention_dropout", "activation_dropout", "arch",
               "task", "dataset", "optimization", "optimizer", "lr_scheduler", "checkpoint", "common"}
SLOTS = {"adam": ["exp_avg", "exp_avg_sq"], "nag": ["momentum_buffer"]}


def synthetic(lines, seed):
    rng = random.Random(seed)
    return "".join(" ".join(f"w{rng.randrange(30)}" for _ in range(rng.randrange(4, 12))) + "\n"
                   for _ in range(lines))


def expected_shapes(cfg):
    V, C, F, H, L = (cfg["vocab_size"], cfg["decoder_embed_dim"], cfg["decoder_ffn_embed_dim"],
                     cfg["decoder_attention_heads"], cfg["decoder_layers"])
    s = {"decoder.embed_tokens.weight": [V, C]}
    if cfg["pos"] == "learned":
        s["decoder.embed_positions.weight"] = [cfg["max_target_positions"] + 2, C]
    for n in range(L):
        p = f"decoder.layers.{n}."
        for proj in ("q", "k", "v", "out"):
            s[p + f"self_attn.{proj}_proj.weight"] = [C, C]
            s[p + f"self_attn.{proj}_proj.bias"] = [C]
        for ln in ("self_attn_layer_norm", "final_layer_norm"):
            s[p + ln + ".weight"] = [C]
            s[p + ln + ".bias"] = [C]
        s[p + "fc1.weight"], s[p + "fc1.bias"] = [F, C], [F]
        s[p + "fc2.weight"], s[p + "fc2.bias"] = [C, F], [C]
    if cfg["decoder_normalize_before"] and not cfg["no_decoder_final_norm"]:
        s["decoder.layer_norm.weight"] = [C]
        s["decoder.layer_norm.bias"] = [C]
    if not cfg["share_decoder_input_output_embed"]:
        s["decoder.output_projection.weight"] = [V, C]
    if cfg["pos"] == "t5":
        s["decoder.relative_attention_bias.weight"] = [cfg["t5_num_buckets"], H]
    return s


def check_file(path, optimizer, problems):
    def bad(msg):
        problems.append(f"{os.path.basename(os.path.dirname(path))}: {msg}")

    with safe_open(path, framework="pt") as f:
        meta = f.metadata()
        names = set(f.keys())
        tensors = {k: f.get_tensor(k) for k in names}
    for key in ("format", "config", "dict_hash", "train_state", "optimizer"):
        if key not in meta:
            bad(f"metadata has no '{key}'")
            return
    if meta["format"] != "stretch-checkpoint-1":
        bad(f"format is {meta['format']!r}")
    cfg, state, opt = (json.loads(meta[k]) for k in ("config", "train_state", "optimizer"))
    for k in CONFIG_KEYS - set(cfg):
        bad(f"config has no '{k}'")
    if set(state) != TRAIN_STATE_KEYS:
        bad(f"train_state keys {sorted(state)} != {sorted(TRAIN_STATE_KEYS)}")
    if state.get("num_updates") != 2:
        bad(f"train_state.num_updates is {state.get('num_updates')}, expected 2")
    if opt.get("optimizer") != optimizer:
        bad(f"optimizer scalars name {opt.get('optimizer')!r}, expected {optimizer!r}")
    if optimizer == "nag" and not isinstance(opt.get("lr_old"), float):
        bad("NAG state has no numeric lr_old")
    if len(meta["dict_hash"]) < 8:
        bad(f"dict_hash {meta['dict_hash']!r} looks empty")
    want = expected_shapes(cfg)
    model_names = {n for n in names if not n.startswith("optimizer.")}
    for n in sorted(set(want) - model_names):
        bad(f"missing tensor {n}")
    for n in sorted(model_names - set(want)):
        bad(f"unexpected tensor {n}")
    for n in sorted(set(want) & model_names):
        t = tensors[n]
        if list(t.shape) != want[n] or t.dtype != torch.float32:
            bad(f"{n} is {t.dtype} {list(t.shape)}, expected float32 {want[n]}")
    want_opt = {f"optimizer.{n}.{slot}": [int(torch.Size(s).numel())] for n, s in want.items() for slot in SLOTS[optimizer]}
    opt_names = names - model_names
    for n in sorted(set(want_opt) ^ opt_names):
        bad(f"optimizer tensor {n} {'missing' if n in want_opt else 'unexpected'}")
    for n in sorted(set(want_opt) & opt_names):
        if list(tensors[n].shape) != want_opt[n]:
            bad(f"{n} has shape {list(tensors[n].shape)}, expected {want_opt[n]}")
    if set(opt.get("steps", {})) != set(want):
        bad("optimizer scalars 'steps' do not name every parameter")
    return len(names)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--stretch", required=True, help="path of the stretch binary")
    args = ap.parse_args(argv)
    problems = []
    with tempfile.TemporaryDirectory(prefix="stretch-ckpt-py-") as work:
        for split, n, seed in (("train", 60, 1), ("valid", 10, 2)):
            with open(os.path.join(work, split + ".txt"), "w") as f:
                f.write(synthetic(n, seed))
        data = os.path.join(work, "data-bin")
        subprocess.run([args.stretch, "preprocess", "--only-source", "--trainpref", os.path.join(work, "train.txt"),
                        "--validpref", os.path.join(work, "valid.txt"), "--destdir", data],
                       check=True, capture_output=True)
        runs = {
            "learned-untied-adam": (["--pos", "learned", "--optimizer", "adam", "--lr", "1e-3"], "adam"),
            "t5-tied-postnorm-nag": (["--pos", "t5", "--share-decoder-input-output-embed", "--post-norm",
                                      "--optimizer", "nag", "--lr", "0.1"], "nag"),
        }
        for name, (flags, optimizer) in runs.items():
            save = os.path.join(work, name)
            cmd = [args.stretch, "train", data, "--arch", "transformer_lm_tiny", "--decoder-layers", "2",
                   "--decoder-embed-dim", "16", "--decoder-ffn-embed-dim", "24", "--decoder-attention-heads", "2",
                   "--tokens-per-sample", "16", "--batch-size", "4", "--max-update", "2", "--threads", "1",
                   "--no-progress-bar", "--log-format", "none", "--save-dir", save] + flags
            p = subprocess.run(cmd, capture_output=True, text=True)
            if p.returncode != 0:
                print(f"check_checkpoint_python: {' '.join(cmd)} failed:\n{p.stderr}", file=sys.stderr)
                return 1
            count = check_file(os.path.join(save, "checkpoint_last.pt"), optimizer, problems)
            print(f"{name}: checkpoint_last.pt opened with safetensors.safe_open, {count} tensors")
    if problems:
        print("check_checkpoint_python: FAIL\n  " + "\n  ".join(problems))
        return 1
    print("check_checkpoint_python: both checkpoints match docs/formats.md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
