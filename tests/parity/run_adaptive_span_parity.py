#!/usr/bin/env python3
"""CTest driver of the adaptive_span family's parity check: stretch_parity_dump --segments 3 runs
three consecutive blocks of `--arch adaptive_span` through its span cache (training mode, dropout 0)
and writes each block's logits, loss, aux loss, avg/max span and the gradients summed over the
blocks; the float64 oracle tests/parity/adaptive_span_reference.py (written from REFERENCE §5 and
checked against real fairseq's examples/adaptive_span, see check_adaptive_span_fairseq.py) runs the
same blocks on the same initial weights with its own cache and is compared tensor by tensor.

usage: run_adaptive_span_parity.py --dump-tool PATH [--case NAME ...] [--list]

Cases (2 layers, C 32, H 4, F 64, V 40, B 2, M 24, L 200, R 16, so the 64-row trimming and the
cache sizes of §5.2 are exercised):
  port-negative-z   per-head spans, z = −0.2 at init: block 1 trims with the raw z (S = 8, cache
                    72 rows), then z is clamped to 0 and blocks 2-3 see S = 72 with a cache that grows
                    from 72 rows (fairseq's order; the zero rows it pads are the cache's own zeros)
  port-per-layer    one z per layer, z = 0.3: S = 136 keys out of a 200-row zero cache (rows dropped
                    in front), ramp inside the span
  original          renormalised mask (the original; stretch's log m before the softmax against the
                    oracle's p / (Σp + 1e-8)), clamp after each step, z = 0.1
aux_loss_scaler is 1e-3 so that the span loss is visible in ∂/∂z.

stretch divides by the sample size after backward (train_update), and its aux_loss() is the span
loss times B·M so that the division gives fairseq's ∇(loss / ntokens + aux); the driver therefore
compares stretch's gradients / sample_size with the oracle's gradients of loss / ntokens + aux, its
loss / sample_size with the oracle's loss and its aux_loss / sample_size with the oracle's aux.

Self-check: the oracle with key_pe read one column off, and with the cache sized after the clamp,
must both FAIL on the dumps, or the driver fails.

Tolerance: rtol 1e-4 on max|diff| / max|oracle| (gradients: with the floor 1e-2 · the largest
gradient), fp32 against fp64 truth as in check_transformer_lm.py. Exit: 0 pass; 1 some tensor fails;
2 bad usage or the tool failed; 77 no torch (1 under CI=true).
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import oracle_skip  # noqa: E402

oracle_skip.require("torch")
import torch  # noqa: E402

import adaptive_span_reference as R  # noqa: E402
from stretch_oracle.compare import Row, print_table, rel_max_err  # noqa: E402
from stretch_oracle.safetensors_io import load_file  # noqa: E402

RTOL = 1e-4
GRAD_FLOOR = 1e-2
BASE = {"arch": "adaptive_span", "vocab_size": 40, "n_layer": 2, "d_model": 32, "n_head": 4, "d_inner": 64,
        "attn_span": 200, "adapt_span_ramp": 16, "aux_loss_scaler": 1e-3, "dropout": 0.0, "emb_dropout": 0.0}
CASES = {
    "port-negative-z": dict(BASE, adapt_span_init=-0.2),
    "port-per-layer": dict(BASE, adapt_span_init=0.3, adapt_span_layer=True),
    "original": dict(BASE, adapt_span_init=0.1, adapt_span_renormalise=True, adapt_span_clamp="after_step"),
}
SEGMENTS, B, M = 3, 2, 24


def oracle_config(j):
    return R.Config(vocab_size=j["vocab_size"], d_model=j["d_model"], n_head=j["n_head"], d_inner=j["d_inner"],
                    n_layer=j["n_layer"], attn_span=j["attn_span"], adapt_span_ramp=j["adapt_span_ramp"],
                    adapt_span_init=j["adapt_span_init"], aux_loss_scaler=j["aux_loss_scaler"],
                    adapt_span_layer=j["adapt_span_layer"], renormalise=j["adapt_span_renormalise"],
                    clamp=j["adapt_span_clamp"])


def check(ckpt, dump_path, bug=None):
    tensors, meta = load_file(ckpt)
    j = json.loads(meta["config"])
    cfg = oracle_config(j)
    params = {k: tensors[k].detach().double().clone().requires_grad_(True) for k in R.param_shapes(cfg)}
    dump, _ = load_file(dump_path)
    src, tgt = dump["src_tokens"].long(), dump["target"].long()
    if tuple(src.shape) != (SEGMENTS, B, M):
        raise ValueError(f"{dump_path}: src_tokens {list(src.shape)}, expected {[SEGMENTS, B, M]}")
    if bug == "key_pe_column":  # read distance d at column L − d + 1 (one off)
        with torch.no_grad():
            params[R.PREFIX + "key_pe"].copy_(torch.roll(params[R.PREFIX + "key_pe"], 1, dims=2))
    model = R.AdaptiveSpanLM(cfg, params)
    if bug == "size_after_clamp":  # the cache sized from the clamped z (fairseq sizes it before)
        with torch.no_grad():
            for l in range(cfg.n_layer):
                model.z(l).clamp_(0, 1)
    lps, losses, auxes, avgs, maxs = [], [], [], [], []
    for k in range(SEGMENTS):
        lp = model.forward_block(src[k])
        loss, aux, total = model.loss(lp, tgt[k], pad=1)
        total.backward()
        lps.append(lp.detach())
        losses.append(loss.detach())
        auxes.append(aux.detach())
        a, mx = model.spans()
        avgs.append(a)
        maxs.append(mx)
        if cfg.clamp == "after_step":
            model.clamp_spans()
    ss = dump["sample_size"].double()
    if not bool((ss == B * M).all()):
        raise ValueError(f"{dump_path}: sample_size {ss.tolist()}, expected B·M = {B * M}")
    rows = []

    def add(name, got, ref, floor=0.0):
        a, s, r = rel_max_err(got, ref, floor)
        rows.append(Row(name, tuple(ref.shape), s, a, r, r <= RTOL))

    add("log_probs", torch.log_softmax(dump["logits"].double(), -1), torch.stack(lps))
    add("loss", dump["loss"].double() / ss, torch.stack(losses))
    add("aux_loss", dump["aux_loss"].double() / ss, torch.stack(auxes))
    add("avg_span", dump["metric.avg_span"].double(), torch.tensor(avgs, dtype=torch.float64))
    add("max_span", dump["metric.max_span"].double(), torch.tensor(maxs, dtype=torch.float64))
    scale = max(float(t.grad.abs().max()) for t in params.values() if t.grad is not None)
    for name in R.param_shapes(cfg):
        key = "grad." + name
        ref = params[name].grad if params[name].grad is not None else torch.zeros_like(params[name])
        if key not in dump:
            rows.append(Row(key, tuple(ref.shape), float("nan"), float("nan"), float("inf"), False, "missing"))
        else:
            add(key, dump[key].double() / (B * M), ref, GRAD_FLOOR * scale)
    return rows, model.last_sizes


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dump-tool", required=True)
    ap.add_argument("--case", action="append", default=[])
    ap.add_argument("--list", action="store_true")
    args = ap.parse_args(argv)
    if args.list:
        print("\n".join(CASES))
        return 0
    names = args.case or list(CASES)
    unknown = [n for n in names if n not in CASES]
    if unknown:
        print(f"run_adaptive_span_parity: error: unknown --case {unknown}; known: {', '.join(CASES)}", file=sys.stderr)
        return 2
    failed = 0
    with tempfile.TemporaryDirectory(prefix="stretch-spanparity-") as work:
        for i, name in enumerate(names):
            ckpt, dump = os.path.join(work, name + ".pt"), os.path.join(work, name + ".dump")
            cmd = [args.dump_tool, "--model-json", json.dumps(CASES[name]), "--batch", str(B), "--len", str(M),
                   "--pad", "0", "--seed", str(1 + i), "--segments", str(SEGMENTS), "--checkpoint", ckpt,
                   "--dump", dump]
            r = subprocess.run(cmd, capture_output=True, text=True)
            if r.returncode != 0:
                print(f"run_adaptive_span_parity: error: {name}: exit {r.returncode}: {r.stderr.strip()}",
                      file=sys.stderr)
                return 2
            try:
                rows, sizes = check(ckpt, dump)
            except (ValueError, KeyError) as e:
                print(f"run_adaptive_span_parity: error: {e}", file=sys.stderr)
                return 2
            fails = [x for x in rows if not x.ok]
            worst = max(rows, key=lambda x: x.rel_err)
            spans = ", ".join(f"S={s['span']} cache {s['cache_rows_in']}->{s['cache_size']}" for s in sizes)
            if fails:
                failed += 1
                print(f"{name}: {len(fails)} of {len(rows)} tensors FAIL (rtol {RTOL:g}):")
                print_table(fails)
            else:
                print(f"{name}: all {len(rows)} tensors within rtol {RTOL:g} over {SEGMENTS} blocks "
                      f"(worst {worst.name}: {worst.rel_err:.2e}; last block {spans})")
        for bug, case in (("key_pe_column", "port-per-layer"), ("size_after_clamp", "port-negative-z")):
            if case not in names:
                continue
            rows, _ = check(os.path.join(work, case + ".pt"), os.path.join(work, case + ".dump"), bug)
            worst = max(rows, key=lambda x: x.rel_err)
            if all(x.ok for x in rows):
                failed += 1
                print(f"self-check: the oracle with the seeded bug '{bug}' still agrees on {case}: the check is blind")
            else:
                print(f"self-check: seeded bug '{bug}' on {case} is caught (worst {worst.name}: {worst.rel_err:.2e})")
    return 1 if failed else 0


if __name__ == "__main__":
    torch.set_num_threads(1)
    sys.exit(main())
