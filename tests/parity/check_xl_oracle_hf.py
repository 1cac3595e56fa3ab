#!/usr/bin/env python3
"""The float64 Transformer-XL oracle (transformer_xl_reference.py, written from REFERENCE.md §6)
against REAL HuggingFace TransfoXLLMHeadModel (transformers 4.30.2, the model fairseq's
transformer_xl builds) on HF's own weights: the oracle must name exactly HF's parameters (HF's
state dict minus its tied copies crit.out_layers.{i}.weight, crit.out_projs.{i>=1} and the
pos_emb.inv_freq buffer) and give HF's log-probabilities over 3 segments with memory, for the
full softmax and the adaptive softmax at div_val 1 and 2 (with and without clamp_len/same_length).
HF runs in float32 (its attention casts scores to float32), so the bound is 2e-6 relative to
the largest log-probability (seen: ~1e-7); a wrong cluster column, projection or bias slice is
O(1). Biases are perturbed first (HF initialises them to 0).
The oracle venv (build/fairseq-venv with transformers, tests/fairseq/setup_fairseq.sh) runs the
comparison; without it: tests/oracle_skip.py (fails under CI=true).
Usage: check_xl_oracle_hf.py FAIRSEQ_VENV
"""
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, ".."))
RTOL = 2e-6
V, B, T, SEGMENTS = 50, 3, 8, 3
CASES = [  # div_val, cutoffs, same_length, clamp_len, mem_len
    (1, [20, 35], False, -1, 12), (2, [20, 35], True, 3, 5), (1, [], False, -1, 6), (2, [], True, 4, 6)]


def inner():
    import torch
    import transformer_xl_reference as X
    from transformers.models.transfo_xl import TransfoXLConfig, TransfoXLLMHeadModel

    torch.manual_seed(0)
    failed = 0
    for div_val, cutoffs, same, clamp, mem in CASES:
        cfg = TransfoXLConfig(vocab_size=V, cutoffs=cutoffs, d_model=32, d_embed=32, n_head=3, d_head=8, d_inner=40,
                              div_val=div_val, n_layer=2, mem_len=mem, clamp_len=clamp, same_length=same,
                              dropout=0.0, dropatt=0.0)
        m = TransfoXLLMHeadModel(cfg).eval()
        with torch.no_grad():
            for n, p in m.named_parameters():
                if n.endswith("bias"):
                    p.add_(torch.rand_like(p) * 0.2 - 0.1)
        sd = {"decoder.model." + k: v for k, v in m.state_dict().items()}
        xc = X.XLConfig.from_json({"vocab_size": V, "n_layer": 2, "d_model": 32, "n_head": 3, "d_head": 8,
                                   "d_inner": 40, "mem_len": mem, "clamp_len": clamp, "same_length": same,
                                   "untie_r": True, "xl_original": False,
                                   "cutoffs": ",".join(map(str, cutoffs)), "div_val": div_val})
        shapes = X.param_shapes(xc)
        tied = {n for n in sd if n.endswith("pos_emb.inv_freq") or ".crit.out_layers." in n and n.endswith(".weight")
                or ".crit.out_projs." in n and not n.endswith(".0")}
        names_ok = set(shapes) == set(sd) - tied and all(tuple(sd[n].shape) == s for n, s in shapes.items())
        p = {n: sd[n].double() for n in shapes if n in sd}
        worst = float("inf")
        if len(p) == len(shapes):
            mems_hf, mems_or, worst = None, X.init_mems(xc, B), 0.0
            for _ in range(SEGMENTS):
                src = torch.randint(4, V, (B, T))
                with torch.no_grad():
                    lp_hf, mems_hf = m(input_ids=src, mems=mems_hf, return_dict=False)[:2]
                    sc, mems_or = X.forward(xc, p, src, mems_or)
                    if div_val == 1 and not cutoffs:
                        sc = torch.log_softmax(sc, -1)  # the oracle's full softmax gives raw logits
                worst = max(worst, float((lp_hf.double() - sc).abs().max() / sc.abs().max()))
        ok = names_ok and worst <= RTOL
        failed += not ok
        print(f"{'ok  ' if ok else 'FAIL'} div_val {div_val} cutoffs {cutoffs} same_length {same} clamp {clamp} "
              f"mem {mem}: names {'=' if names_ok else '!='} HF's, max|HF - oracle| / max {worst:.2e}")
    return 1 if failed else 0


def main():
    if sys.argv[1:] == ["--inner"]:
        return inner()
    import oracle_skip
    venv = sys.argv[1]
    py = os.path.join(venv, "bin", "python")
    probe = "from transformers.models.transfo_xl import TransfoXLLMHeadModel"
    if not os.path.exists(py) or "transformers" in oracle_skip.hidden() or \
            subprocess.run([py, "-c", probe], capture_output=True).returncode != 0:
        oracle_skip.missing("transformers", install="tests/fairseq/setup_fairseq.sh (makes " + venv + ")",
                            detail="HF TransfoXL (transformers 4.30.2)")
    return subprocess.run([py, os.path.abspath(__file__), "--inner"]).returncode


if __name__ == "__main__":
    sys.exit(main())
