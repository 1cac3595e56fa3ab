"""tests/parity/check_relkey_attention.py — the attention op's relative-key term (ops/attention.h
RelKeyOptions) against an independent PyTorch float64 implementation of Transformer-XL's
RelPartialLearnableMultiHeadAttn score computation (REFERENCE.md §6.1-6.2, written from the spec:
AC = (q + u)·k, BD_raw = (q + v)·r over R's rows for positions klen−1 … 0 with pos_seq clamped to
clamp_len, `_rel_shift` as HF writes it (pad, view, slice), the triu mask with diagonal 1 + mlen,
same_length's tril(−mask_shift_len) mask, softmax over keys, Σ p·v): out and the gradients of
L = Σ out·dout for q, k, v, R (the clamp_len + 1 distinct rows), u and v.

    check_relkey_attention.py --dump-tool build/tests/parity/stretch_relkey_dump
Exits 0 when every case agrees within rtol 1e-4 of each tensor's largest entry (stretch runs fp32).
"""
import argparse
import os
import subprocess
import sys
import tempfile

sys.path.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import oracle_skip  # noqa: E402

oracle_skip.require("torch", "numpy")
import numpy as np  # noqa: E402
import torch  # noqa: E402

torch.set_default_dtype(torch.float64)


def rel_shift(x):
    """HF TransfoXL _rel_shift on x [qlen, klen, B, H]."""
    zero_pad = torch.zeros((x.size(0), 1) + x.size()[2:], dtype=x.dtype)
    x_padded = torch.cat([zero_pad, x], dim=1)
    x_padded = x_padded.view((x.size(1) + 1, x.size(0)) + x.size()[2:])
    return x_padded[1:].view_as(x)


def oracle(q, k, v, r_base, u, w, mem_len, clamp_len, same_length):
    """q [qlen, B, H, D], k/v [klen, B, H, D], r_base [clamp_len+1 or klen, H, D] (row = distance)."""
    qlen, klen = q.size(0), k.size(0)
    mlen = klen - qlen
    pos_seq = torch.arange(klen - 1, -1, -1.0)
    if clamp_len > 0:
        pos_seq = pos_seq.clamp(max=clamp_len)
    r_head_k = r_base[pos_seq.long()]  # [klen, H, D]: row j' = distance klen − 1 − j' (clamped)
    ac = torch.einsum("ibnd,jbnd->ijbn", q + u, k)
    bd = rel_shift(torch.einsum("ibnd,jnd->ijbn", q + w, r_head_k))
    score = (ac + bd) * (1.0 / q.size(-1) ** 0.5)
    ones = torch.ones(qlen, klen)
    mask = torch.triu(ones, diagonal=1 + mlen)
    if same_length:
        mask_len = klen - mem_len
        mask_shift_len = qlen - mask_len if mask_len > 0 else qlen
        mask = mask + torch.tril(ones, -mask_shift_len)
    score = score.masked_fill(mask.bool()[:, :, None, None], float("-inf"))
    prob = torch.softmax(score, dim=1)
    return torch.einsum("ijbn,jbnd->ibnd", prob, v)


def run_case(tool, name, B, H, T, S, D, clamp_len, same_length, mem_len, seed):
    rng = np.random.default_rng(seed)
    f32 = lambda *shape: rng.uniform(-1, 1, size=shape).astype(np.float32)  # noqa: E731
    rows = clamp_len + 1 if clamp_len > 0 else S
    q, k, v, dout = f32(B, H, T, D), f32(B, H, S, D), f32(B, H, S, D), f32(B, H, T, D)
    r_base = f32(rows, H, D)  # row = distance
    u, w = 0.5 * f32(H, D), 0.5 * f32(H, D)
    window = mem_len if same_length else 0  # same_length ≡ window mem_len (ops/attention.h)
    with tempfile.TemporaryDirectory() as tmp:
        fin, fout = os.path.join(tmp, "in.bin"), os.path.join(tmp, "out.bin")
        with open(fin, "wb") as f:
            np.array([B, H, T, S, D, window, clamp_len, rows, mem_len], dtype=np.int64).tofile(f)
            for x in (q, k, v, dout, r_base[::-1].copy(), u, w):  # R in Transformer-XL's row order
                x.tofile(f)
        subprocess.run([tool, fin, fout], check=True)
        got = np.fromfile(fout, dtype=np.float32)
    sizes = [B * H * T * D, B * H * T, B * H * T * D, B * H * S * D, B * H * S * D, rows * H * D, H * D, H * D]
    parts = np.split(got, np.cumsum(sizes)[:-1])
    names = ["out", "lse", "dq", "dk", "dv", "dR", "du", "dw"]
    got = dict(zip(names, parts))
    got["dR"] = got["dR"].reshape(rows, H, D)[::-1].reshape(-1)  # back to row = distance

    t = {n: torch.tensor(x.astype(np.float64), requires_grad=True)
         for n, x in dict(q=q, k=k, v=v, r=r_base, u=u, w=w).items()}
    hf = lambda x: x.permute(2, 0, 1, 3)  # [B, H, L, D] -> [L, B, H, D]  # noqa: E731
    out = oracle(hf(t["q"]), hf(t["k"]), hf(t["v"]), t["r"], t["u"], t["w"], mem_len, clamp_len, same_length)
    out_bhtd = out.permute(1, 2, 0, 3)
    (out_bhtd * torch.tensor(dout.astype(np.float64))).sum().backward()
    want = {"out": out_bhtd, "dq": t["q"].grad, "dk": t["k"].grad, "dv": t["v"].grad, "dR": t["r"].grad,
            "du": t["u"].grad, "dw": t["w"].grad}
    ok = True
    for n, ref in want.items():
        ref = ref.detach().numpy().reshape(-1)
        err = np.max(np.abs(got[n].astype(np.float64) - ref)) / max(np.max(np.abs(ref)), 1e-3)
        flag = "ok" if err <= 1e-4 else "FAIL"
        ok &= err <= 1e-4
        print(f"{name:24s} {n:4s} max err / max |ref| = {err:.2e} {flag}")
    return ok


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dump-tool", required=True)
    a = ap.parse_args()
    cases = [  # name, B, H, T, S, D, clamp_len, same_length, mem_len
        ("no_memory", 1, 2, 12, 12, 8, 0, False, 0),
        ("memory", 2, 3, 10, 25, 8, 0, False, 15),
        ("memory_clamp", 1, 2, 20, 45, 8, 9, False, 25),
        ("same_length_clamp", 2, 2, 16, 40, 8, 11, True, 24),
        ("same_length_warmup", 1, 2, 16, 20, 8, 0, True, 24),  # klen < mem_len: blocks nothing
        ("tiles", 1, 2, 70, 150, 16, 0, True, 80),
    ]
    ok = True
    for i, c in enumerate(cases):
        ok &= run_case(a.dump_tool, *c, seed=i + 1)
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
