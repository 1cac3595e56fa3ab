#!/usr/bin/env python3
"""Self-tests of the Adaptive Span oracle (adaptive_span_reference.py); needs torch only.

  skew          attention() (keys indexed by distance) = §5.3's literal formulation: scores
                Q·[cache ‖ block]ᵀ, _unskew, + Q·key_pe, softmax, mask, _skew, ·V (written here from
                the spec's description of _skew/_unskew), for S < M, S = M and S > M
  sizes         the §8 conformance values through the oracle's own helpers: mask at z = 0, R = 32
                (d = 1 → 1, 17 → 0.5, ≥ 33 → 0), trim_len 8128 and cache 128 at L = 8192
  clamp modes   fairseq's in-forward clamp vs the original's clamp after each step
  gradcheck     float64 central differences (torch.autograd.gradcheck) of the total loss of one
                block with respect to key_pe, z, a projection and the embedding, at z away from the
                mask's kinks, per-head and per-layer spans, with and without renormalisation
Exit 0 when all pass, 1 on a failure, 77 without torch (1 under CI=true).
"""
import math
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.append(os.path.join(HERE, ".."))
import oracle_skip  # noqa: E402

oracle_skip.require("torch")
import torch  # noqa: E402

sys.path.insert(0, HERE)
import adaptive_span_reference as R  # noqa: E402


def unskew(X, S):
    """§5.3: X [.., M, S+M] -> [.., M, S], result[i, l] = X[i, i + l]: flatten, pad M, view [M, S+M+1], first S."""
    *lead, M, W = X.shape
    flat = X.reshape(*lead, M * W)
    flat = torch.nn.functional.pad(flat, (0, M))
    return flat.reshape(*lead, M, W + 1)[..., :S]


def skew(A):
    """§5.3: A [.., M, S] -> [.., M, S+M], result[i, c] = A[i, c − i] (0 elsewhere): pad M+1, flatten, drop M."""
    *lead, M, S = A.shape
    padded = torch.nn.functional.pad(A, (0, M + 1))
    flat = padded.reshape(*lead, M * (S + M + 1))[..., :-M]
    return flat.reshape(*lead, M, S + M)


def literal_attention(cfg, q, k, v, key_pe, z, S):
    L = cfg.attn_span
    pe = key_pe[:, L - S:]                                   # the last S columns: distances S..1
    a = unskew(q @ k.transpose(-1, -2), S) + q @ pe          # [B, H, M, S]; column l is distance S − l
    p = torch.softmax(a / math.sqrt(q.shape[-1]), -1)
    template = torch.arange(1 - L, 1, dtype=torch.float64)   # linspace(1 − L, 0, L)
    mask = ((template.reshape(1, L) + z.reshape(-1, 1) * L) / cfg.ramp + 1).clamp(0, 1)[:, L - S:]
    p = p * mask.reshape(1, -1, 1, S)
    if cfg.renormalise:
        p = p / (p.sum(-1, keepdim=True) + 1e-8)
    return skew(p) @ v


def check_skew(failures):
    g = torch.Generator().manual_seed(1)
    for S, M in ((5, 9), (7, 7), (12, 4)):
        for renorm in (False, True):
            cfg = R.Config(vocab_size=10, d_model=8, n_head=2, attn_span=40, adapt_span_ramp=4, renormalise=renorm)
            q = torch.randn(2, 2, M, 4, generator=g, dtype=torch.float64)
            k = torch.randn(2, 2, S + M, 4, generator=g, dtype=torch.float64)
            v = torch.randn(2, 2, S + M, 4, generator=g, dtype=torch.float64)
            pe = torch.randn(4, 40, generator=g, dtype=torch.float64)
            z = torch.tensor([0.01, 0.1], dtype=torch.float64)
            a = R.attention(cfg, q, k, v, pe, z, S)
            b = literal_attention(cfg, q, k, v, pe, z, S)
            err = float((a - b).abs().max())
            print(f"skew S={S} M={M} renormalise={renorm}: max |distance-indexed − literal skew| = {err:.1e}")
            if not err < 1e-12:
                failures.append(f"attention vs literal skew/unskew at S={S}, M={M}: {err:.2e}")
    # skew puts A[i, l] at column i + l, unskew inverts it.
    A = torch.arange(12, dtype=torch.float64).reshape(3, 4) + 1
    Sk = skew(A)
    if not all(Sk[i, i + l] == A[i, l] for i in range(3) for l in range(4)) or float(Sk.abs().sum()) != float(A.sum()):
        failures.append("skew does not put A[i, l] at column i + l with zeros elsewhere")
    if not torch.equal(unskew(Sk, 4), A):
        failures.append("unskew(skew(A)) != A")


def check_sizes(failures):
    cfg = R.Config(vocab_size=10, attn_span=8192, adapt_span_ramp=32)
    m = R.soft_mask(cfg, torch.zeros(1, dtype=torch.float64), 40)[0]
    got = (float(m[0]), float(m[16]), float(m[32]), float(m[39]))  # d = 1, 17, 33, 40
    if got != (1.0, 0.5, 0.0, 0.0):
        failures.append(f"mask at z=0, R=32 for d = 1, 17, 33, 40: {got}, expected (1, 0.5, 0, 0)")
    size = R.span_size(cfg, 0.0)
    trim = R.trim_len(cfg, size)
    if (size, trim, R.cache_size(cfg, trim)) != (32, 8128, 128):
        failures.append(f"L = 8192, z = 0: max_size/trim/cache {size}/{trim}/{R.cache_size(cfg, trim)}, expected 32/8128/128")


def check_gradients(failures):
    for layer_span, renorm in ((False, False), (True, False), (False, True)):
        cfg = R.Config(vocab_size=9, d_model=6, n_head=2, d_inner=5, n_layer=2, attn_span=70, adapt_span_ramp=8,
                       aux_loss_scaler=1e-2, adapt_span_layer=layer_span, renormalise=renorm)
        g = torch.Generator().manual_seed(3)
        params = {}
        for k, s in R.param_shapes(cfg).items():
            if k.endswith("current_val"):
                # z·L off the integers and (d − 1) so no mask value sits on a clamp edge.
                params[k] = torch.full(s, 0.0, dtype=torch.float64) + torch.tensor(
                    [0.0513, 0.1217][:s[0]], dtype=torch.float64).reshape(s)
            else:
                params[k] = 0.5 * torch.randn(s, generator=g, dtype=torch.float64)
        x = torch.randint(0, 9, (2, 5), generator=g)
        target = torch.randint(0, 9, (2, 5), generator=g)
        target[0, -1] = 1
        names = [R.PREFIX + "key_pe", R.PREFIX + "layers.0.attn.attn.adaptive_span._mask.current_val",
                 R.PREFIX + "layers.1.attn.proj_key.weight", R.PREFIX + "in_emb.weight"]

        def f(*ts):
            p = dict(params)
            p.update(dict(zip(names, ts)))
            model = R.AdaptiveSpanLM(cfg, p)
            model.init_caches(2)
            with torch.no_grad():  # a non-zero cache so the cache path carries signal
                for c in model.caches:
                    c.copy_(0.3 * torch.randn(c.shape, generator=torch.Generator().manual_seed(8), dtype=torch.float64))
            return model.loss(model.forward_block(x), target, pad=1)[2]

        inputs = [params[n].clone().requires_grad_(True) for n in names]
        ok = torch.autograd.gradcheck(f, inputs, eps=1e-6, atol=1e-7, rtol=1e-5, raise_exception=False)
        print(f"gradcheck layer_span={layer_span} renormalise={renorm}: {'ok' if ok else 'FAILED'}")
        if not ok:
            failures.append(f"gradcheck failed (layer_span={layer_span}, renormalise={renorm})")


def check_clamp_modes(failures):
    """clamp="forward" (fairseq) vs "after_step" (the original): equal while z is in [0, 1]; with a
    z below 0 the port clamps it inside the forward, the original leaves it to clamp_spans()."""
    out = {}
    for zs in ((0.0513, 0.2137), (-0.2, 0.2137)):
        for mode in ("forward", "after_step"):
            cfg = R.Config(vocab_size=9, d_model=6, n_head=2, d_inner=5, n_layer=1, attn_span=70, adapt_span_ramp=8,
                           clamp=mode)
            gg = torch.Generator().manual_seed(2)
            p = {k: 0.5 * torch.randn(s, generator=gg, dtype=torch.float64) for k, s in R.param_shapes(cfg).items()}
            zk = R.PREFIX + "layers.0.attn.attn.adaptive_span._mask.current_val"
            p[zk] = torch.tensor(zs, dtype=torch.float64).reshape(2, 1, 1)
            model = R.AdaptiveSpanLM(cfg, p)
            out[(zs, mode)] = (model.forward_block(torch.tensor([[1, 2, 3, 4]])), p[zk].reshape(-1).tolist())
            if mode == "after_step":
                model.clamp_spans()
                if p[zk].reshape(-1).tolist() != [max(0.0, v) for v in zs]:
                    failures.append(f"clamp_spans() gave {p[zk].reshape(-1).tolist()} for z = {zs}")
    inside, below = (0.0513, 0.2137), (-0.2, 0.2137)
    if not torch.equal(out[(inside, "forward")][0], out[(inside, "after_step")][0]):
        failures.append("clamp modes differ for z inside [0, 1]")
    if out[(below, "forward")][1] != [0.0, 0.2137] or out[(below, "after_step")][1] != [-0.2, 0.2137]:
        failures.append(f"z after the forward: port {out[(below, 'forward')][1]}, original {out[(below, 'after_step')][1]}")
    if torch.equal(out[(below, "forward")][0], out[(below, "after_step")][0]):
        failures.append("a z below 0 should mask differently in the two clamp modes")
    print("clamp modes: equal inside [0, 1]; the port clamps in the forward, the original after the step")


def main():
    torch.set_num_threads(1)
    failures = []
    check_skew(failures)
    check_sizes(failures)
    check_clamp_modes(failures)
    check_gradients(failures)
    for f in failures:
        print("FAIL:", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
