#!/usr/bin/env python3
"""The independent Adaptive Span model (tests/parity/adaptive_span_reference.py) against REAL
fairseq 0.12.2's examples/adaptive_span (loaded as `--user-dir examples/adaptive_span` loads it:
AdaptiveSpanTransformer, its decoder's persistent memory, and the adaptive_span_loss criterion), on
the same weights, over 3 consecutive blocks with the hidden-state cache: log-probs, loss, aux loss,
total loss, avg_span / max_span and the gradient of every parameter (key_pe and z included), block
by block.

Cases (small sizes so the span arithmetic of §5.2 is exercised: L = 200, R = 16, M = 24):
  per_head      z per head inside (0, 1): trimming by 64 (S = 136), cache longer than the block
  unclamped     one layer's z outside [0, 1] at the first block: fairseq trims with the raw z
                (S = 8) and then clamps it in the forward; a z step between blocks 2 and 3 grows
                the span, so the cache is shorter than S and gets zero rows in front
  layer_span    adapt_span_layer (one z per layer), z = 0 (S = 72, cache 136)
  training      6 updates, one block each with the cache carried: fairseq's model stepped by its
                AdagradWithGradClip, the oracle by its own §5.5 step (AdaptiveSpanLM.adagrad_step);
                a large aux scaler drives layer 0's z below 0, so fairseq trims with the raw z
                (S = 8) and clamps to 0 in the forward, update after update; loss, aux loss, spans
                and every parameter after each step within 1e-4 relative (worst seen 4e-7)
fairseq's model is run in float64 (.double()); it still computes the mask, the attention
softmax, the output log_softmax and the loss in float32 (adaptive_span_attention.py and
adaptive_span_model.py call .float(); the criterion's log_softmax too). So the tolerance is 2e-5
relative to each tensor's largest entry (float32 rounding 6e-8 through a few dozen operations and
a softmax over ≤ 200 keys, with a 50× margin; a semantic error — wrong distance, mask edge, trim,
cache row or clamp order — moves values by ≥ 1e-3 relative). avg_span / max_span and the trim
sizes are integers and must be equal.
z·L is kept off the integers (except z = 0, exact in both precisions): a mask value exactly on a
clamp edge (m = 0 or 1) gets torch's clamp gradient, which passes at both edges, and fairseq's
float32 mask (z rounded to float32 first) can land just outside the edge where float64 sits on it
(z = 0.3, L = 200: 0.3f·200 = 60.0000038, so d = 61 has m = 1.00000024, clamped, no gradient),
which changes dz by ~1e-2 relative: a rounding artefact, not a semantic difference.

Without the venv (tests/fairseq/setup_fairseq.sh): tests/oracle_skip.py (fails under CI=true,
skips loudly elsewhere). Usage: check_adaptive_span_fairseq.py FAIRSEQ_VENV
"""
import argparse
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.append(os.path.join(HERE, ".."))
import oracle_skip  # noqa: E402

REL_TOL = 2e-5
BLOCKS = 3

CASES = {
    "per_head": dict(cfg=dict(d_model=16, n_head=4, d_inner=24, n_layer=2, attn_span=200, adapt_span_ramp=16,
                              adapt_span_layer=False, aux_loss_scaler=2e-3),
                     z=[[0.0513, 0.3071, 0.5937, 0.1129], [0.0217, 0.0, 0.0911, 0.0533]], z_step=None),
    "unclamped": dict(cfg=dict(d_model=16, n_head=4, d_inner=24, n_layer=2, attn_span=200, adapt_span_ramp=16,
                               adapt_span_layer=False, aux_loss_scaler=2e-3),
                      z=[[-0.3, -0.2, -0.4, -0.1], [1.3, 0.5137, 0.2071, 0.0529]],
                      z_step=(2, [[0.5037, 0.1013, 0.0, 0.0211], [0.3071, 0.5137, 0.2071, 0.0529]])),
    "layer_span": dict(cfg=dict(d_model=12, n_head=3, d_inner=20, n_layer=2, attn_span=200, adapt_span_ramp=16,
                                adapt_span_layer=True, aux_loss_scaler=2e-3),
                       z=[[0.0], [0.0]], z_step=None),
}
V_EXTRA = 13  # dictionary: 4 specials + 13 symbols
B, M = 2, 24


def find_user_dir(venv):
    import fairseq
    for d in (os.path.join(os.path.dirname(fairseq.__file__), "examples", "adaptive_span"),
              os.path.join(venv, "src", "fairseq-0.12.2", "examples", "adaptive_span"),
              os.path.join(venv, "src", "fairseq-0.12.2", "fairseq", "examples", "adaptive_span")):
        if os.path.exists(os.path.join(d, "adaptive_span_model.py")):
            return os.path.realpath(d)
    raise SystemExit("FAIL: fairseq is installed but examples/adaptive_span is nowhere in " + venv)


def max_rel(a, b):
    a, b = a.double(), b.double()
    scale = max(float(b.abs().max()), 1e-30)
    return float((a - b).abs().max()) / scale


def setup(case, mods, ref_mod):
    """fairseq's model and criterion and the oracle on the same weights."""
    import torch
    from fairseq.data import Dictionary
    torch.manual_seed(14)
    d = Dictionary()
    for i in range(V_EXTRA):
        d.add_symbol(f"w{i}")
    task = argparse.Namespace(target_dictionary=d, source_dictionary=d)
    wrapper = mods["adaptive_span_model_wrapper"]
    cfg = wrapper.AdaptiveSpanSmallConfig(vocab_size=len(d), dropout=0.0, emb_dropout=0.0, adapt_span_init=0.0,
                                          **case["cfg"])
    model = wrapper.AdaptiveSpanTransformer.build_model(cfg, task).double()
    model.eval()  # dropout 0 anyway; eval for clarity
    crit = mods["adaptive_span_loss"].AdaptiveSpanCriterion(task, sentence_avg=False)

    # Same weights on both sides: fairseq's init, then every parameter perturbed so that each
    # one matters (LayerNorms off 1/0, biases non-zero), z set per case.
    sd = model.state_dict()
    g = torch.Generator().manual_seed(99)
    params = {}
    for k, v in sd.items():
        if k.endswith("mask_template"):
            continue  # a buffer (linspace(1 − L, 0, L)), not a parameter
        if k.endswith("current_val"):
            layer = int(k.split(".layers.")[1].split(".")[0])
            v = torch.tensor(case["z"][layer], dtype=torch.float64).reshape(v.shape)
        elif "norm" in k:
            v = (1.0 if k.endswith("weight") else 0.0) + 0.2 * torch.randn(v.shape, generator=g, dtype=torch.float64)
        elif k.endswith("bias"):
            v = 0.1 * torch.randn(v.shape, generator=g, dtype=torch.float64)
        else:
            v = v.clone()
        params[k] = v
    model.load_state_dict({**sd, **params})
    rcfg = ref_mod.Config(vocab_size=len(d), **case["cfg"])
    leaves = {k: v.clone().requires_grad_(True) for k, v in params.items()}
    ref = ref_mod.AdaptiveSpanLM(rcfg, leaves)
    named = dict(model.named_parameters())

    return model, crit, d, leaves, ref, named


def run_case(name, case, mods, ref_mod):
    import torch
    model, crit, d, leaves, ref, named = setup(case, mods, ref_mod)
    gen = torch.Generator().manual_seed(5)
    stream = torch.randint(4, len(d), (B, BLOCKS * M + 1), generator=gen)
    stream[0, 7] = d.eos()
    failures = []
    for blk in range(BLOCKS):
        if case["z_step"] and case["z_step"][0] == blk:
            with torch.no_grad():  # an "optimizer step" on z between blocks, the same on both sides
                for l, zs in enumerate(case["z_step"][1]):
                    key = f"decoder.model.layers.{l}.attn.attn.adaptive_span._mask.current_val"
                    t = torch.tensor(zs, dtype=torch.float64).reshape(named[key].shape)
                    named[key].copy_(t)
                    leaves[key].copy_(t)
        src = stream[:, blk * M:(blk + 1) * M]
        target = torch.nn.functional.pad(src[:, 1:], (0, 1), value=d.pad())  # truncated_bptt_lm's target
        sample = {"net_input": {"src_tokens": src}, "target": target, "nsentences": B, "ntokens": src.numel()}
        model.zero_grad()
        total, sample_size, log = crit(model, sample)
        total.backward()
        lp_fs = model.decoder._lprobs_for_check
        aux_fs = float(model.get_aux_loss())
        for t in leaves.values():
            t.grad = None
        lp = ref.forward_block(src)
        loss, aux, tot = ref.loss(lp, target, d.pad())
        tot.backward()
        avg, mx = ref.spans()
        checks = [("log-probs", max_rel(lp.detach(), lp_fs.detach())),
                  ("loss", abs(float(loss) - float(log["loss"])) / abs(float(log["loss"]))),
                  ("aux loss", abs(float(aux) - aux_fs) / max(abs(aux_fs), 1e-30)),
                  ("total loss", abs(float(tot) - float(total)) / abs(float(total)))]
        worst_grad = (0.0, "")
        for k, p in named.items():
            if p.grad is None:
                failures.append(f"{name} block {blk + 1}: fairseq has no gradient for {k}")
                continue
            e = max_rel(leaves[k].grad, p.grad) if float(p.grad.abs().max()) > 0 else float(leaves[k].grad.abs().max())
            if e > worst_grad[0]:
                worst_grad = (e, k)
            if not e <= REL_TOL:
                failures.append(f"{name} block {blk + 1}: gradient of {k}: max rel error {e:.2e}")
        for what, e in checks:
            if not e <= REL_TOL:
                failures.append(f"{name} block {blk + 1}: {what}: rel error {e:.2e}")
        if avg != log["avg_span"] or mx != log["max_span"]:
            failures.append(f"{name} block {blk + 1}: spans avg/max {avg}/{mx}, fairseq {log['avg_span']}/{log['max_span']}")
        for l, s in enumerate(ref.last_sizes):
            fs_cache = model.decoder._mems[l].shape[1]
            ref_cache = ref.caches[l].shape[1]
            if fs_cache != ref_cache:
                failures.append(f"{name} block {blk + 1} layer {l}: next cache {ref_cache} rows, fairseq {fs_cache}")
        sizes = ", ".join(f"L{l}: S={s['span']} cache {s['cache_rows_in']}->{ref.caches[l].shape[1]}"
                          for l, s in enumerate(ref.last_sizes))
        print(f"{name} block {blk + 1}: loss {float(loss):.6f} aux {float(aux):.3e} avg/max span {avg}/{mx} [{sizes}]; "
              f"max rel err: " + ", ".join(f"{w} {e:.1e}" for w, e in checks) +
              f", grads {worst_grad[0]:.1e} ({worst_grad[1].replace('decoder.model.', '')})")
        stats = [s["span"] for s in ref.last_sizes]
        if blk == 0 and name == "per_head" and stats != [136, 72]:
            failures.append(f"per_head: spans {stats}, the case was built for [136, 72]")
        if name == "unclamped" and blk == 0 and stats[0] != 8:
            failures.append(f"unclamped: layer 0 span {stats[0]} at block 1, the case was built for 8 (raw z)")
        if name == "unclamped" and blk == 2 and ref.last_sizes[0]["cache_rows_in"] >= ref.last_sizes[0]["span"]:
            failures.append("unclamped: block 3 should see a cache shorter than the span (the padding path)")
    return failures


TRAIN_CASE = dict(cfg=dict(d_model=16, n_head=4, d_inner=24, n_layer=2, attn_span=200, adapt_span_ramp=16,
                           adapt_span_layer=False, aux_loss_scaler=5e-2),
                  z=[[0.0113, 0.0071, 0.0137, 0.0029], [0.3071, 0.2137, 0.1071, 0.2529]], z_step=None)
TRAIN_UPDATES, TRAIN_LR, TRAIN_CLIP = 6, 0.07, 0.0


def run_training(mods, ref_mod, adagrad_cls):
    """6 updates, one block each, cache carried: fairseq's model + its AdagradWithGradClip against the
    oracle + its own §5.5 step. The aux term (scaler 0.05) drives layer 0's z below 0 at the first
    step, so from update 2 on fairseq trims that layer with the raw z (S = 8) and clamps it to 0 in
    the forward, every update again."""
    import torch
    model, crit, d, leaves, ref, named = setup(TRAIN_CASE, mods, ref_mod)
    opt = adagrad_cls(list(named.values()), lr=TRAIN_LR, grad_clip=TRAIN_CLIP)
    state = {}
    gen = torch.Generator().manual_seed(6)
    stream = torch.randint(4, len(d), (B, TRAIN_UPDATES * M + 1), generator=gen)
    failures, tol = [], 1e-4
    raw_negative = 0
    for u in range(TRAIN_UPDATES):
        src = stream[:, u * M:(u + 1) * M]
        target = torch.nn.functional.pad(src[:, 1:], (0, 1), value=d.pad())
        sample = {"net_input": {"src_tokens": src}, "target": target, "nsentences": B, "ntokens": src.numel()}
        raw_negative += float(named["decoder.model.layers.0.attn.attn.adaptive_span._mask.current_val"].max()) < 0
        opt.zero_grad()
        total, _, log = crit(model, sample)
        total.backward()
        opt.step()
        for t in leaves.values():
            t.grad = None
        lp = ref.forward_block(src)
        loss, aux, tot = ref.loss(lp, target, d.pad())
        tot.backward()
        avg, mx = ref.spans()
        ref.adagrad_step(state, TRAIN_LR, TRAIN_CLIP)
        e_loss = abs(float(loss) - float(log["loss"])) / abs(float(log["loss"]))
        e_aux = abs(float(aux) - float(log["total_loss"] - log["loss"])) / abs(float(aux))
        e_par = max(max_rel(leaves[k].detach(), p.detach()) for k, p in named.items())
        z0 = [round(float(v), 4) for v in leaves["decoder.model.layers.0.attn.attn.adaptive_span._mask.current_val"].reshape(-1)]
        print(f"training update {u + 1}: loss {float(loss):.6f} (rel err {e_loss:.1e}) aux rel err {e_aux:.1e} "
              f"spans {avg}/{mx} S {[s['span'] for s in ref.last_sizes]} params after the step rel err {e_par:.1e}; "
              f"layer-0 z after the step {z0}")
        for what, e in (("loss", e_loss), ("aux loss", e_aux), ("parameters after the step", e_par)):
            if not e <= tol:
                failures.append(f"training update {u + 1}: {what}: rel error {e:.2e} (tolerance {tol})")
        if avg != log["avg_span"] or mx != log["max_span"]:
            failures.append(f"training update {u + 1}: spans {avg}/{mx}, fairseq {log['avg_span']}/{log['max_span']}")
    if raw_negative < 2:
        failures.append(f"training: layer 0's z was below 0 before only {raw_negative} forwards; the case was built "
                        "for the raw-z trimming path from update 2 on")
    return failures


def inner(venv):
    import torch
    from fairseq import utils
    torch.set_num_threads(1)
    user_dir = find_user_dir(venv)
    utils.import_user_module(argparse.Namespace(user_dir=user_dir))  # what --user-dir does
    base = os.path.basename(user_dir)
    mods = {m: sys.modules[f"{base}.{m}"] for m in ("adaptive_span_model_wrapper", "adaptive_span_loss")}
    # Keep the decoder's output (log-probs) for the comparison: a wrapper around forward, no change
    # to what fairseq computes.
    dec = mods["adaptive_span_model_wrapper"].AdaptiveSpanDecoder
    orig = dec.forward

    def forward(self, src_tokens, incremental_state=None, encoder_out=None):
        out = orig(self, src_tokens, incremental_state, encoder_out)
        self._lprobs_for_check = out[0]
        return out
    dec.forward = forward
    sys.path.insert(0, HERE)
    import adaptive_span_reference as ref_mod
    print(f"fairseq model from --user-dir {user_dir}")
    failures = []
    for name, case in CASES.items():
        failures += run_case(name, case, mods, ref_mod)
    adagrad = sys.modules[f"{base}.adagrad_with_grad_clip"].AdagradWithGradClip
    failures += run_training(mods, ref_mod, adagrad)
    for f in failures:
        print("FAIL:", f)
    if not failures:
        print(f"ok: {len(CASES)} cases x {BLOCKS} blocks and {TRAIN_UPDATES} training updates: the reference equals "
              "fairseq's examples/adaptive_span")
    return 1 if failures else 0


def main():
    if len(sys.argv) >= 3 and sys.argv[2] == "--inner":
        return inner(sys.argv[1])
    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    venv = sys.argv[1]
    py = os.path.join(venv, "bin", "python")
    ok = os.path.exists(py) and "fairseq" not in oracle_skip.hidden() and subprocess.run(
        [py, "-c", "import fairseq, torch"], capture_output=True).returncode == 0
    if not ok:
        oracle_skip.missing("fairseq", install="tests/fairseq/setup_fairseq.sh (makes " + venv + ")",
                            detail="fairseq's examples/adaptive_span model")
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
    return subprocess.run([py, os.path.abspath(__file__), venv, "--inner"], env=env).returncode


if __name__ == "__main__":
    sys.exit(main())
