#!/usr/bin/env python3
"""CTest driver of the model parity check: stretch_parity_dump writes a fresh checkpoint and one
batch's logits / loss / gradients, check_transformer_lm.check() compares them with the float64
oracle (tolerance and its reasons: check_transformer_lm.py's docstring, rtol 1e-4).

usage: run_model_parity.py --dump-tool PATH --case NAME [--case NAME ...] [--list]

Cases (all: 2 layers, C 48, H 6 — not a power of two, D 8 —, F 96, V 50, B 3, T 16, the last row
right-padded with 3 pad tokens, dropout 0):
  <pos>-prenorm-untied   pre-norm, final LayerNorm, untied output   for each --pos
  <pos>-postnorm-tied    post-norm, output tied to the embedding    for each --pos
  sinusoidal-gelu-nofinalnorm-noscale   pre-norm without final norm, exact GELU, no √C scale
  alibi-gelu-nofinalnorm-noscale        the same with ALiBi
  alibi-gelu-accurate, sinusoidal-tanh-postnorm-tied, learned-linear   fairseq's other activations
  layernorm-embedding-*   --layernorm-embedding with alibi, sinusoidal post-norm tied, learned unscaled
  normformer-*            NormFormer (--scale-*): all four with alibi pre-norm and sinusoidal post-norm tied,
                          heads + resids with rope; the scales and LayerNorms perturbed off their init
  alibi-v-*   the ALiBi variants of issue 15 (VARIANTS below: slope list, groups, layer scale,
              learnable slopes with each shape, log/clipped shapes, slope warm-up at update 4 of 10,
              no-bias heads, hybrid stacks with rope/t5/none upper layers, interpolated slopes,
              and combinations)

Exit status: 0 every case passes; 1 some case fails (its failure table is printed); 2 bad usage
or the dump tool failed; 77 torch is not importable (CTest: skipped; 1 under CI=true, tests/oracle_skip.py).
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

sys.path.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import oracle_skip  # noqa: E402  (tests/oracle_skip.py: missing torch fails under CI=true, else exits 77)

oracle_skip.require("torch")
import torch  # noqa: E402

import check_transformer_lm
from stretch_oracle.compare import print_table
from stretch_oracle.errors import InputError

POS = ("alibi", "sinusoidal", "learned", "rope", "t5", "none")
BASE = {"vocab_size": 50, "decoder_layers": 2, "decoder_embed_dim": 48, "decoder_ffn_embed_dim": 96,
        "decoder_attention_heads": 6, "dropout": 0.0, "attention_dropout": 0.0, "activation_dropout": 0.0}
RTOL = 1e-4
# The activations each case of fairseq's other activations must fail against (the tanh GELU is
# within 1e-3 of the exact one: the case's dump must tell them apart).
CONTROLS = {"gelu_accurate": ("gelu", "relu"), "tanh": ("gelu_accurate",), "linear": ("relu",)}
# ALiBi variants (issue 15), pre-norm untied; "_step": the update number of the training forward.
VARIANTS = {
    "alibi-v-slope-list": {"alibi_slopes": "0.5,0.25,0.125,0.0625,0.03125,0.015625"},  # the blog's 1/2^i
    "alibi-v-groups": {"alibi_slope_groups": "4:1,2:0.5"},  # seed 002 §5.3: text heads, image heads x 0.5
    "alibi-v-layer-scale-linear": {"alibi_layer_scale": "linear:0.25"},
    "alibi-v-layer-scale-list": {"alibi_layer_scale": "2,0.5"},
    "alibi-v-learnable": {"alibi_learnable_slopes": True, "alibi_positive_slopes": True},
    "alibi-v-learnable-log": {"alibi_learnable_slopes": True, "alibi_shape": "log"},
    "alibi-v-learnable-clipped": {"alibi_learnable_slopes": True, "alibi_shape": "clipped", "alibi_clip_distance": 5},
    "alibi-v-log": {"alibi_shape": "log"},
    "alibi-v-clipped": {"alibi_shape": "clipped", "alibi_clip_distance": 5},
    "alibi-v-warmup": {"alibi_slope_warmup_updates": 10, "alibi_slope_warmup_init": 0.2, "_step": 4},
    "alibi-v-warmup-learnable": {"alibi_slope_warmup_updates": 10, "alibi_slope_warmup_init": 0.2,
                                 "alibi_learnable_slopes": True, "_step": 7},
    "alibi-v-no-bias-heads": {"alibi_no_bias_heads": "0:0,1:3,1:5"},
    "alibi-v-hybrid-rope": {"pos_upper": "rope", "pos_upper_from_layer": 1},
    "alibi-v-hybrid-t5": {"pos_upper": "t5", "pos_upper_from_layer": 1},
    "alibi-v-hybrid-none": {"pos_upper": "none", "pos_upper_from_layer": 1},
    # Position interpolation (what eval-lm/sweep --alibi-interpolate set at 4 L_train) on learnable
    # log-shaped slopes: the slopes' gradient carries the scale.
    "alibi-v-interp-learnable-log": {"alibi_slope_scale": 0.25, "alibi_learnable_slopes": True, "alibi_shape": "log"},
    "alibi-v-combo": {"alibi_slope_groups": "3:1,3:0.5", "alibi_layer_scale": "linear:0.5",
                      "alibi_learnable_slopes": True, "alibi_shape": "clipped", "alibi_clip_distance": 7,
                      "decoder_layers": 3, "pos_upper": "t5", "pos_upper_from_layer": 2},
}


def cases():
    out = {}
    for pos in POS:
        out[f"{pos}-prenorm-untied"] = dict(BASE, pos=pos, decoder_normalize_before=True,
                                            share_decoder_input_output_embed=False)
        out[f"{pos}-postnorm-tied"] = dict(BASE, pos=pos, decoder_normalize_before=False,
                                           share_decoder_input_output_embed=True)
    for pos in ("sinusoidal", "alibi"):
        out[f"{pos}-gelu-nofinalnorm-noscale"] = dict(BASE, pos=pos, decoder_normalize_before=True,
                                                      no_decoder_final_norm=True, no_scale_embedding=True,
                                                      activation_fn="gelu")
    # fairseq's other --activation-fn choices: its tanh GELU (gelu_accurate), tanh, linear (the identity).
    # "_bias_noise": biases uniform(-S, S) after init, so fc1's outputs reach |x| ~ 2, where the tanh GELU
    # and the exact one differ by ~1e-3 (at init's |x| < 0.5 they agree to 2e-5, under the tolerance);
    # "_not": the oracle with this activation must fail the same dump (RUN_CONTROLS).
    out["alibi-gelu-accurate"] = dict(BASE, pos="alibi", decoder_normalize_before=True, activation_fn="gelu_accurate",
                                      _bias_noise=2.0)
    out["sinusoidal-tanh-postnorm-tied"] = dict(BASE, pos="sinusoidal", decoder_normalize_before=False,
                                                share_decoder_input_output_embed=True, activation_fn="tanh",
                                                _bias_noise=2.0)
    out["learned-linear"] = dict(BASE, pos="learned", decoder_normalize_before=True, activation_fn="linear",
                                 max_target_positions=16, _bias_noise=2.0)
    # --decoder-input-dim / --decoder-output-dim (project_in_dim, project_out_dim; issue 12): both
    # untied, both equal and tied (the table [V, 32] serves input and output), input only.
    out["alibi-project-dims-untied"] = dict(BASE, pos="alibi", decoder_normalize_before=True,
                                            share_decoder_input_output_embed=False,
                                            decoder_input_dim=32, decoder_output_dim=40)
    out["sinusoidal-project-dims-tied"] = dict(BASE, pos="sinusoidal", decoder_normalize_before=False,
                                               share_decoder_input_output_embed=True,
                                               decoder_input_dim=32, decoder_output_dim=32)
    out["learned-project-in"] = dict(BASE, pos="learned", decoder_normalize_before=True,
                                     share_decoder_input_output_embed=False, decoder_input_dim=24)
    # --layernorm-embedding (decoder.layernorm_embedding after the scaled embedding + positions):
    # with ALiBi (no positions), sinusoidal post-norm tied, learned positions without the √C scale.
    out["layernorm-embedding-alibi"] = dict(BASE, pos="alibi", layernorm_embedding=True)
    out["layernorm-embedding-sinusoidal-postnorm-tied"] = dict(BASE, pos="sinusoidal", layernorm_embedding=True,
                                                              decoder_normalize_before=False,
                                                              share_decoder_input_output_embed=True)
    out["layernorm-embedding-learned-noscale"] = dict(BASE, pos="learned", layernorm_embedding=True,
                                                      no_scale_embedding=True, max_target_positions=16)
    # NormFormer (--scale-heads/-attn/-fc/-resids), its scales and LayerNorms moved off their init by
    # "_normformer_noise" (at 1 and 1/0 a scale on the wrong channels would pass): all four pre-norm
    # with ALiBi, post-norm tied with sinusoidal positions, and two of them alone with rope.
    nf = {"scale_heads": True, "scale_attn": True, "scale_fc": True, "scale_resids": True, "_normformer_noise": 0.5}
    out["normformer-alibi-prenorm"] = dict(BASE, pos="alibi", **nf)
    out["normformer-sinusoidal-postnorm-tied"] = dict(BASE, pos="sinusoidal", decoder_normalize_before=False,
                                                      share_decoder_input_output_embed=True, **nf)
    out["normformer-rope-heads-resids"] = dict(BASE, pos="rope", scale_heads=True, scale_resids=True,
                                               _normformer_noise=0.5)
    # Adaptive input + adaptive softmax (V 50, bands [0,12) [12,30) [30,50), factor 2: d 48, 24, 12),
    # pre-norm: tied tables and projections (the wiki103 layout), tied tables only, untied, and the
    # exact-NLL cross_entropy criterion; an adaptive softmax behind a plain embedding.
    ada = dict(BASE, pos="alibi", decoder_normalize_before=True, adaptive_input=True,
               adaptive_input_cutoff="12,30", adaptive_softmax_cutoff="12,30", adaptive_input_factor=2.0,
               adaptive_softmax_factor=2.0, adaptive_softmax_dropout=0.0, criterion="adaptive_loss")
    out["adaptive-tied-proj"] = dict(ada, tie_adaptive_weights=True, tie_adaptive_proj=True, _seed=1)
    out["adaptive-tied"] = dict(ada, tie_adaptive_weights=True, _seed=2)
    out["adaptive-untied"] = dict(ada, _seed=3)
    out["adaptive-tied-proj-cross-entropy"] = dict(ada, tie_adaptive_weights=True, tie_adaptive_proj=True,
                                                   criterion="cross_entropy", _seed=4)
    out["adaptive-softmax-only-sinusoidal"] = dict(ada, pos="sinusoidal", adaptive_input=False,
                                                   adaptive_softmax_factor=4.0, _seed=9)
    for name, extra in VARIANTS.items():
        out[name] = dict(BASE, pos="alibi", decoder_normalize_before=True, share_decoder_input_output_embed=False,
                         **extra)
    return out


def run_case(tool, name, model, workdir, seed):
    ckpt = os.path.join(workdir, name + ".ckpt.pt")
    dump = os.path.join(workdir, name + ".dump.safetensors")
    model = dict(model)
    seed = model.pop("_seed", seed)  # a case may fix its batch (the adaptive_loss quirk needs certain targets)
    step = model.pop("_step", 0)
    bias_noise = model.pop("_bias_noise", 0.0)
    normformer_noise = model.pop("_normformer_noise", 0.0)
    cmd = [tool, "--model-json", json.dumps(model), "--batch", "3", "--len", "16", "--pad", "3",
           "--seed", str(seed), "--step", str(step), "--checkpoint", ckpt, "--dump", dump,
           "--bias-noise", str(bias_noise), "--normformer-noise", str(normformer_noise)]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        raise InputError(tool, f"exit {p.returncode} for case {name}: {p.stderr.strip()}")
    rows = check_transformer_lm.check(ckpt, dump, RTOL)
    for wrong in CONTROLS.get(model.get("activation_fn"), ()):
        bad = check_transformer_lm.check(ckpt, dump, RTOL, {"activation": wrong})
        if all(r.ok for r in bad):
            raise InputError(dump, f"case {name}: the dump also passes the oracle with activation {wrong}: "
                                   "this case cannot tell the two apart")
        print(f"{name}: control: the oracle with {wrong} fails it "
              f"(worst {max(r.rel_err for r in bad):.1e} > {RTOL:g})")
    if model.get("criterion") == "adaptive_loss":
        # The batch must hold targets whose tail-local index is pad (fairseq's ignore_index quirk),
        # or the quirk would go unchecked.
        from stretch_oracle import adaptive
        from stretch_oracle.model import LMConfig
        from stretch_oracle.safetensors_io import load_file
        tensors, meta = load_file(dump)
        cfg = LMConfig.from_fairseq(json.loads(meta["config"]))
        n = adaptive.quirk_count(cfg, tensors["target"].to(torch.int64), cfg.padding_idx)
        if n == 0:
            raise InputError(dump, f"case {name}: no target has the tail-local index pad; pick another seed")
        print(f"{name}: {n} target(s) with tail-local index pad (cluster term only)")
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dump-tool", required=True, help="path of stretch_parity_dump")
    ap.add_argument("--case", action="append", default=[], help="case name (repeatable)")
    ap.add_argument("--list", action="store_true", help="list the case names and exit")
    args = ap.parse_args(argv)
    table = cases()
    if args.list:
        print("\n".join(table))
        return 0
    unknown = [c for c in args.case if c not in table]
    if unknown or not args.case:
        print(f"run_model_parity: error: unknown or no --case {unknown}; known: {', '.join(table)}", file=sys.stderr)
        return 2
    failed = 0
    with tempfile.TemporaryDirectory(prefix="stretch-parity-") as work:
        for i, name in enumerate(args.case):
            try:
                rows = run_case(args.dump_tool, name, table[name], work, seed=1 + i)
            except InputError as e:
                print(f"run_model_parity: error: {e}", file=sys.stderr)
                return 2
            fails = [r for r in rows if not r.ok]
            worst = max(rows, key=lambda r: r.rel_err)
            if fails:
                failed += 1
                print(f"{name}: {len(fails)} of {len(rows)} tensors FAIL (rtol {RTOL:g}):")
                print_table(fails)
            else:
                print(f"{name}: all {len(rows)} tensors within rtol {RTOL:g} (worst {worst.name}: {worst.rel_err:.2e})")
    return 1 if failed else 0


if __name__ == "__main__":
    torch.set_num_threads(1)
    sys.exit(main())
