#!/usr/bin/env python3
"""CTest driver of the memory parity check (transformer_lm --mem-len): stretch_parity_dump
--segments 3 runs three consecutive batches through the training memory and writes each segment's
logits and loss and the gradients summed over the segments; the float64 oracle
(stretch_oracle/memory.py, written from REFERENCE §6.3 independently of the C++ code) runs the same
three segments with its own detached memory and is compared tensor by tensor.

usage: run_memory_parity.py --dump-tool PATH [--case NAME ...] [--list]

Cases (2 layers, C 48, H 6, F 96, V 50, B 3, T 8, the last row of every segment ending in 2 pad
tokens, so padded keys enter the memory; mem_len 12 < 2T, so segment 3 sees only the last 12 of
the 16 earlier tokens and the truncation is checked too):
  alibi-prenorm  alibi-postnorm-tied  t5-prenorm  none-prenorm  alibi-layer-scale (per-layer slopes)

Self-check: the alibi-prenorm dump compared with the oracle counting query positions from the
segment start (lucidrains/x-transformers#242) and the none-prenorm dump with a memory that keeps
its gradient must both FAIL, or the driver fails.

Tolerance: rtol 1e-4 on max|diff| / max|oracle| with the gradient floor, for the reasons in
check_transformer_lm.py (fp32 against fp64 truth; longer key axes S + T = 20 change nothing in
the bound). Exit: 0 pass; 1 some tensor fails; 2 bad usage or the tool failed; 77 no torch (1 under CI=true).
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
import torch.nn.functional as F  # noqa: E402

from stretch_oracle.compare import Row, print_table, rel_max_err  # noqa: E402
from stretch_oracle.errors import InputError  # noqa: E402
from stretch_oracle.memory import empty_memory, features_with_memory  # noqa: E402
from stretch_oracle.model import TransformerLM, param_shapes  # noqa: E402
from stretch_oracle.safetensors_io import load_file  # noqa: E402

RTOL = 1e-4
GRAD_FLOOR = 1e-2
BASE = {"vocab_size": 50, "decoder_layers": 2, "decoder_embed_dim": 48, "decoder_ffn_embed_dim": 96,
        "decoder_attention_heads": 6, "dropout": 0.0, "attention_dropout": 0.0, "activation_dropout": 0.0,
        "mem_len": 12}
CASES = {
    "alibi-prenorm": dict(BASE, pos="alibi", decoder_normalize_before=True),
    "alibi-postnorm-tied": dict(BASE, pos="alibi", decoder_normalize_before=False,
                                share_decoder_input_output_embed=True),
    "t5-prenorm": dict(BASE, pos="t5", decoder_normalize_before=True),
    "none-prenorm": dict(BASE, pos="none", decoder_normalize_before=True),
    "alibi-layer-scale": dict(BASE, pos="alibi", decoder_normalize_before=True, alibi_layer_scale="2,0.5"),
}
SEGMENTS, B, T, PAD = 3, 3, 8, 2


def check(ckpt, dump_path, bug=None):
    model = TransformerLM.from_checkpoint(ckpt)
    cfg, p = model.cfg, model.params
    dump, meta = load_file(dump_path)
    mem_len = int(json.loads(meta["config"])["mem_len"])
    src, tgt = dump["src_tokens"].to(torch.int64), dump["target"].to(torch.int64)
    if tuple(src.shape) != (SEGMENTS, B, T):
        raise InputError(dump_path, f"src_tokens {list(src.shape)}, expected {[SEGMENTS, B, T]}")
    mem = empty_memory(mem_len)
    W = p["decoder.embed_tokens.weight"] if cfg.share_io else p["decoder.output_projection.weight"]
    logits, losses = [], []
    for k in range(SEGMENTS):
        x, mem = features_with_memory(cfg, p, src[k], mem, bug)
        lg = x @ W.t()
        logits.append(lg)
        losses.append(F.cross_entropy(lg.reshape(-1, lg.shape[-1]), tgt[k].reshape(-1),
                                      ignore_index=cfg.padding_idx, reduction="sum"))
    if mem[0][0].shape[1] != mem_len:
        raise InputError(dump_path, "the oracle's memory did not reach mem_len; the case checks no truncation")
    torch.stack(losses).sum().backward()
    rows = []
    scale = max(float(t.grad.abs().max()) for t in p.values())

    def add(name, got, ref, floor=0.0):
        a, s, r = rel_max_err(got, ref, floor)
        rows.append(Row(name, tuple(ref.shape), s, a, r, r <= RTOL))

    add("logits", dump["logits"], torch.stack(logits))
    add("loss", dump["loss"], torch.stack(losses))
    for name in param_shapes(cfg):
        key = "grad." + name
        if key not in dump:
            rows.append(Row(key, tuple(p[name].shape), float("nan"), float("nan"), float("inf"), False, "missing"))
        else:
            add(key, dump[key], p[name].grad, GRAD_FLOOR * scale)
    return rows


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
        print(f"run_memory_parity: error: unknown --case {unknown}; known: {', '.join(CASES)}", file=sys.stderr)
        return 2
    failed = 0
    with tempfile.TemporaryDirectory(prefix="stretch-memparity-") as work:
        for i, name in enumerate(names):
            ckpt, dump = os.path.join(work, name + ".pt"), os.path.join(work, name + ".dump")
            cmd = [args.dump_tool, "--model-json", json.dumps(CASES[name]), "--batch", str(B), "--len", str(T),
                   "--pad", str(PAD), "--seed", str(1 + i), "--segments", str(SEGMENTS), "--checkpoint", ckpt,
                   "--dump", dump]
            r = subprocess.run(cmd, capture_output=True, text=True)
            if r.returncode != 0:
                print(f"run_memory_parity: error: {name}: exit {r.returncode}: {r.stderr.strip()}", file=sys.stderr)
                return 2
            try:
                rows = check(ckpt, dump)
            except InputError as e:
                print(f"run_memory_parity: error: {e}", file=sys.stderr)
                return 2
            fails = [x for x in rows if not x.ok]
            worst = max(rows, key=lambda x: x.rel_err)
            if fails:
                failed += 1
                print(f"{name}: {len(fails)} of {len(rows)} tensors FAIL (rtol {RTOL:g}):")
                print_table(fails)
            else:
                print(f"{name}: all {len(rows)} tensors within rtol {RTOL:g} over {SEGMENTS} segments "
                      f"(worst {worst.name}: {worst.rel_err:.2e})")
        # The comparison can fail: the oracle with a seeded bug must disagree with the same dump.
        for bug, case in (("x242", "alibi-prenorm"), ("attached", "none-prenorm")):
            if case not in names:
                continue
            rows = check(os.path.join(work, case + ".pt"), os.path.join(work, case + ".dump"), bug)
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
