#!/usr/bin/env python3
"""CTest driver of the transformer_xl parity check: stretch_parity_dump --segments 3 runs three
consecutive batches through the family's training memory and writes each segment's logits and
loss and the gradients summed over the segments; the float64 oracle (transformer_xl_reference.py,
HF TransfoXL semantics written from REFERENCE §6 with the literal _rel_shift) runs the same three
segments with its own detached memory and is compared tensor by tensor.

usage: run_xl_parity.py --dump-tool PATH [--case NAME ...] [--list]

Cases (2 layers, C 32, 3 heads of 8 (H·D = 24 ≠ C), d_inner 40, V 50, B 3, T 8, the last row of
every segment ending in 2 pad tokens, which the model does not mask and the loss ignores):
  hf            HF's zero memories (mem_len 12 > T: the segment sees 12 earlier rows), per-layer r biases
  hf-clamp-same clamp_len 5 and same_length (window 12) on the HF memory
  short-memory  mem_len 5 < T, same_length, clamp_len 3, shared r biases (untie_r false)
  original      xl_original: empty first memory (segment 1 sees none, segment 2 sees 8 rows, segment 3
                the last 12 of 16) and one shared (u, v) pair, same_length
  no-memory     mem_len 0: three independent segments
  adaptive      HF's adaptive softmax at div_val 1 (cutoffs 20,35: 2 clusters, the tied [V, C] table and
                bias [V] read by band), HF memory mem_len 12
  adaptive-div  div_val 2: AdaptiveEmbedding bands of 32/16/8 dims with their projections, the output
                tied to them (tie_projs: the tails reuse emb_projs.1/2, the head has out_projs.0),
                mem_len 5, clamp_len 3, same_length
Every case perturbs the zero-initialised biases (--bias-noise 0.1) so a wrong bias slice shows.

Self-check: the hf-clamp-same dump compared with the oracle without _rel_shift, with a window one
key too narrow, the hf dump with a memory that keeps its gradient, the adaptive dump with the
original code's reversed cluster columns and the adaptive-div dump with untied tail projections
must all FAIL, or the driver fails. Tolerance: rtol 1e-4 on max|diff| / max|oracle| (gradients: with a floor of 1e-2 of the
largest gradient), as in run_memory_parity.py (fp32 against fp64 truth).
Exit: 0 pass; 1 some tensor fails; 2 bad usage or the tool failed; 77 no torch (1 under CI=true).
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

import transformer_xl_reference as X  # noqa: E402
from stretch_oracle.compare import Row, print_table, rel_max_err  # noqa: E402
from stretch_oracle.errors import InputError  # noqa: E402
from stretch_oracle.safetensors_io import load_file  # noqa: E402

RTOL = 1e-4
GRAD_FLOOR = 1e-2
BASE = {"arch": "transformer_xl_tiny", "vocab_size": 50, "n_layer": 2, "d_model": 32, "n_head": 3, "d_head": 8,
        "d_inner": 40, "dropout": 0.0, "dropatt": 0.0}
CASES = {
    "hf": dict(BASE, mem_len=12),
    "hf-clamp-same": dict(BASE, mem_len=12, clamp_len=5, same_length=True),
    "short-memory": dict(BASE, mem_len=5, clamp_len=3, same_length=True, untie_r=False),
    "original": dict(BASE, mem_len=12, same_length=True, xl_original=True),
    "no-memory": dict(BASE, mem_len=0),
    "adaptive": dict(BASE, mem_len=12, cutoffs="20,35"),
    "adaptive-div": dict(BASE, mem_len=5, clamp_len=3, same_length=True, cutoffs="20,35", div_val=2),
}
BIAS_NOISE = "0.1"
SEGMENTS, B, T, PAD = 3, 3, 8, 2
PADDING_IDX = 1


def check(ckpt, dump_path, bug=None):
    tensors, meta = load_file(ckpt)
    cfg = X.config_of(meta["config"])
    shapes = X.param_shapes(cfg)
    missing = [n for n in shapes if n not in tensors]
    if missing:
        raise InputError(ckpt, f"parameters missing: {missing}")
    extra = [n for n in tensors if n.startswith("decoder.") and n not in shapes]
    if extra:
        raise InputError(ckpt, f"unexpected parameters: {extra}")
    p = {n: tensors[n].to(torch.float64).clone().requires_grad_(True) for n in shapes}
    for n, s in shapes.items():
        if tuple(p[n].shape) != s:
            raise InputError(ckpt, f"{n} has shape {list(p[n].shape)}, expected {list(s)}")
    dump, _ = load_file(dump_path)
    src, tgt = dump["src_tokens"].to(torch.int64), dump["target"].to(torch.int64)
    if tuple(src.shape) != (SEGMENTS, B, T):
        raise InputError(dump_path, f"src_tokens {list(src.shape)}, expected {[SEGMENTS, B, T]}")
    mems = X.init_mems(cfg, B)
    logits, losses = [], []
    for k in range(SEGMENTS):
        lg, mems = X.forward(cfg, p, src[k], mems, bug)
        logits.append(lg)
        losses.append(F.cross_entropy(lg.reshape(-1, lg.shape[-1]), tgt[k].reshape(-1), ignore_index=PADDING_IDX,
                                      reduction="sum"))
    torch.stack(losses).sum().backward()
    rows = []
    scale = max(float(t.grad.abs().max()) for t in p.values())

    def add(name, got, ref, floor=0.0):
        a, s, r = rel_max_err(got, ref, floor)
        rows.append(Row(name, tuple(ref.shape), s, a, r, r <= RTOL))

    add("logits", dump["logits"], torch.stack(logits))
    add("loss", dump["loss"], torch.stack(losses))
    for name in shapes:
        key = "grad." + name
        if key not in dump:
            rows.append(Row(key, shapes[name], float("nan"), float("nan"), float("inf"), False, "missing"))
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
        print(f"run_xl_parity: error: unknown --case {unknown}; known: {', '.join(CASES)}", file=sys.stderr)
        return 2
    failed = 0
    with tempfile.TemporaryDirectory(prefix="stretch-xlparity-") as work:
        for i, name in enumerate(names):
            ckpt, dump = os.path.join(work, name + ".pt"), os.path.join(work, name + ".dump")
            cmd = [args.dump_tool, "--model-json", json.dumps(CASES[name]), "--batch", str(B), "--len", str(T),
                   "--pad", str(PAD), "--seed", str(1 + i), "--bias-noise", BIAS_NOISE, "--segments", str(SEGMENTS),
                   "--checkpoint", ckpt, "--dump", dump]
            if CASES[name]["mem_len"] == 0:
                cmd[cmd.index("--segments") + 1] = "1"  # no memory: the model dump of one segment
            r = subprocess.run(cmd, capture_output=True, text=True)
            if r.returncode != 0:
                print(f"run_xl_parity: error: {name}: exit {r.returncode}: {r.stderr.strip()}", file=sys.stderr)
                return 2
            try:
                rows = check(ckpt, dump) if CASES[name]["mem_len"] > 0 else check_single(ckpt, dump)
            except InputError as e:
                print(f"run_xl_parity: error: {e}", file=sys.stderr)
                return 2
            fails = [x for x in rows if not x.ok]
            worst = max(rows, key=lambda x: x.rel_err)
            if fails:
                failed += 1
                print(f"{name}: {len(fails)} of {len(rows)} tensors FAIL (rtol {RTOL:g}):")
                print_table(fails)
            else:
                print(f"{name}: all {len(rows)} tensors within rtol {RTOL:g} "
                      f"(worst {worst.name}: {worst.rel_err:.2e})")
        for bug, case in (("no_shift", "hf-clamp-same"), ("window_off_by_one", "hf-clamp-same"), ("attached", "hf"),
                          ("reversed_clusters", "adaptive"), ("untied_proj", "adaptive-div")):
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


def check_single(ckpt, dump_path):
    """mem_len 0: the one-segment model dump (src [B, T], logits [B, T, V], loss [1])."""
    tensors, meta = load_file(ckpt)
    cfg = X.config_of(meta["config"])
    shapes = X.param_shapes(cfg)
    p = {n: tensors[n].to(torch.float64).clone().requires_grad_(True) for n in shapes}
    dump, _ = load_file(dump_path)
    src, tgt = dump["src_tokens"].to(torch.int64), dump["target"].to(torch.int64)
    lg, _ = X.forward(cfg, p, src, None)
    loss = F.cross_entropy(lg.reshape(-1, lg.shape[-1]), tgt.reshape(-1), ignore_index=PADDING_IDX, reduction="sum")
    loss.backward()
    scale = max(float(t.grad.abs().max()) for t in p.values())
    rows = []
    for name, got, ref, floor in [("logits", dump["logits"], lg, 0.0), ("loss", dump["loss"].reshape(()), loss, 0.0)] + \
            [("grad." + n, dump["grad." + n], p[n].grad, GRAD_FLOOR * scale) for n in shapes]:
        a, s, r = rel_max_err(got, ref, floor)
        rows.append(Row(name, tuple(ref.shape), s, a, r, r <= RTOL))
    return rows


if __name__ == "__main__":
    torch.set_num_threads(1)
    sys.exit(main())
