#!/usr/bin/env python3
"""Self-tests of the PyTorch oracle (tests/parity/stretch_oracle), runnable without stretch.

usage: test_oracle_selftest.py [-k SUBSTRING]      (STRETCH_LONG=1 adds the benchmark-size cases)

Expected values come from REFERENCE.md's tables or are worked by hand in the comments, never
from the code under test. Each test is a function test_*; plain asserts. Prints one line per
test and a closing "N passed, N failed"; exit 1 if any failed, 77 (1 under CI=true) if torch cannot be imported
(CTest reports that as skipped).
"""

import contextlib
import io as io_
import json
import math
import os
import subprocess
import sys
import tempfile
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "bench"))

sys.path.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import oracle_skip  # noqa: E402  (tests/oracle_skip.py: missing torch fails under CI=true, else exits 77)

oracle_skip.require("torch")
import torch  # noqa: E402

import check_eval_lm
import check_trajectory
import check_transformer_lm
from stretch_oracle import eval_lm as E
from stretch_oracle import fixtures as fx
from stretch_oracle import model as M
from stretch_oracle import optim as O
from stretch_oracle import positions as P
from stretch_oracle import safetensors_io as io
from stretch_oracle.errors import InputError
from stretch_oracle.train import train_steps

LONG = os.environ.get("STRETCH_LONG") == "1"
POS = ("alibi", "sinusoidal", "learned", "rope", "t5", "none")


def note(msg):
    """A measurement worth seeing in the log (the runner swallows ordinary stdout of passing tests)."""
    print(msg, file=sys.__stdout__, flush=True)


def close(a, b, tol):
    return abs(a - b) <= tol * max(1.0, abs(b))


# ---- positions ------------------------------------------------------------------------------

def test_alibi_slopes_table():
    # REFERENCE §1.1 test vectors, typed in from the table.
    r = math.sqrt(0.5)
    table = {
        1: [0.00390625],
        2: [2 ** -4, 2 ** -8],
        4: [0.25, 0.0625, 0.015625, 0.00390625],
        6: [0.25, 0.0625, 0.015625, 0.00390625, 0.5, 0.125],
        8: [0.5, 0.25, 0.125, 0.0625, 0.03125, 0.015625, 0.0078125, 0.00390625],
        12: [0.5, 0.25, 0.125, 0.0625, 0.03125, 0.015625, 0.0078125, 0.00390625,
             0.70710678, 0.35355339, 0.17677670, 0.08838835],
        16: [r ** k for k in range(1, 17)],  # 2^(-0.5k)
    }
    for n, want in table.items():
        got = P.alibi_slopes(n)
        assert len(got) == n, (n, got)
        for g, w in zip(got, want):
            assert abs(g - w) <= 5e-9, (n, got, want)  # the table prints 8 decimals
    assert abs(P.alibi_slopes(16)[1] - 0.5) < 1e-15 and abs(P.alibi_slopes(16)[-1] - 2 ** -8) < 1e-17


def test_alibi_fork_form_equals_paper_form():
    # softmax_j(s_ij + m j) == softmax_j(s_ij - m (i - j)) on the causal triangle (§1.3), per head,
    # for H = 6 (non-power-of-2). The biases themselves differ (so this is not trivially equal).
    g = torch.Generator().manual_seed(0)
    H, T, D = 6, 9, 4
    q = torch.randn(H, T, D, generator=g, dtype=torch.float64)
    k = torch.randn(H, T, D, generator=g, dtype=torch.float64)
    s = q @ k.transpose(-1, -2) / math.sqrt(D)
    causal = torch.triu(torch.full((T, T), float("-inf"), dtype=torch.float64), 1)
    slopes = P.alibi_slopes(H)
    fork = torch.softmax(s + causal + P.alibi_fork_bias(slopes, T), -1)
    paper = torch.softmax(s + causal + P.alibi_bias(slopes, T), -1)
    assert float((fork - paper).abs().max()) < 1e-12
    assert float((P.alibi_fork_bias(slopes, T) - P.alibi_bias(slopes, T)).abs().max()) > 1.0
    # hand value: head 4 (slope 0.5), i = 3, j = 1 -> -0.5 * 2
    assert P.alibi_bias(slopes, T)[4, 3, 1] == -1.0


def test_t5_buckets():
    # Unidirectional T5 buckets, num_buckets 32, max_distance 128: n = max(i - j, 0);
    # n < 16 -> n; else 16 + floor(ln(n/16) / ln(8) * 16), capped at 31. By hand:
    #   n=16: ln1=0 -> 16;  n=17: ln(1.0625)=0.0606 /2.0794*16 = 0.47 -> 16
    #   n=20: ln1.25=0.2231 -> 1.72 -> 17;  n=23: ln1.4375=0.3629 -> 2.79 -> 18
    #   n=24: ln1.5=0.4055 -> 3.12 -> 19;   n=32: ln2/ln8*16 = 5.33 -> 21
    #   n=45: ln2.8125=1.0341 -> 7.96 -> 23;  n=46: ln2.875=1.0561 -> 8.13 -> 24
    #   n=64: 2/3*16 = 10.67 -> 26;  n=100: ln6.25=1.8326 -> 14.10 -> 30
    #   n=127: ln7.9375=2.0716 -> 15.94 -> 31;  n=128: 16 -> 32 -> cap 31;  n=1000 -> 31
    hand = {0: 0, 1: 1, 7: 7, 15: 15, 16: 16, 17: 16, 20: 17, 23: 18, 24: 19, 32: 21, 45: 23,
            46: 24, 64: 26, 100: 30, 127: 31, 128: 31, 1000: 31}
    n = torch.tensor(list(hand))
    got = P.t5_bucket(-n, 32, 128).tolist()  # rel = j - i = -n
    assert got == list(hand.values()), got
    assert P.t5_bucket(torch.tensor([1, 5, 300]), 32, 128).tolist() == [0, 0, 0]  # future keys
    # bias layout: table[bucket(j - i), h]
    table = torch.arange(32 * 2, dtype=torch.float64).view(32, 2)
    b = P.t5_bias(table, 40, 32, 128)
    assert b.shape == (2, 40, 40)
    # i - j = 37: ln(37/16) = ln 2.3125 = 0.8383; / 2.0794 * 16 = 6.45 -> bucket 22
    assert b[1, 37, 0] == table[22, 1]
    assert b[0, 5, 2] == table[3, 0] and b[0, 2, 5] == table[0, 0]


def test_rope():
    # D = 2: inv_freq = [1]; position p rotates (x1, x2) by angle p.
    cos, sin = P.rope_cos_sin(4, 2, 10000.0)
    x = torch.tensor([1.0, 2.0], dtype=torch.float64).expand(1, 1, 4, 2)
    y = P.rope_apply(x, cos, sin)[0, 0]
    p = 3
    assert torch.allclose(y[p], torch.tensor([math.cos(p) - 2 * math.sin(p), 2 * math.cos(p) + math.sin(p)],
                                             dtype=torch.float64))
    assert torch.allclose(y[0], x[0, 0, 0])  # position 0 is the identity
    # D = 8: inv_freq_k = 10000^(-2k/8) = [1, 0.1, 0.01, 0.001]; channel k pairs with k + 4.
    cos, sin = P.rope_cos_sin(6, 8, 10000.0)
    assert torch.allclose(cos[5], torch.cos(5 * torch.tensor([1, .1, .01, .001, 1, .1, .01, .001],
                                                             dtype=torch.float64)))
    # q.k after rotation depends only on the offset (shift invariance)
    g = torch.Generator().manual_seed(1)
    q, k = torch.randn(1, 1, 6, 8, generator=g, dtype=torch.float64), torch.randn(1, 1, 6, 8, generator=g,
                                                                                   dtype=torch.float64)
    q = q[:, :, :1].expand(1, 1, 6, 8)
    k = k[:, :, :1].expand(1, 1, 6, 8)
    qr, kr = P.rope_apply(q, cos, sin)[0, 0], P.rope_apply(k, cos, sin)[0, 0]
    assert abs(float(qr[4] @ kr[2]) - float(qr[3] @ kr[1])) < 1e-12


def test_sinusoidal_and_make_positions():
    pos = P.make_positions(torch.tensor([[5, 6, 1, 1], [1, 7, 8, 9]]), 1)
    assert pos.tolist() == [[2, 3, 1, 1], [1, 2, 3, 4]]
    # C = 4: half 2, freq = [1, exp(-ln(10000)/1)] = [1, 1e-4]
    e = P.sinusoidal_embedding(torch.tensor([[2, 1]]), 4, 1)
    assert torch.allclose(e[0, 0], torch.tensor([math.sin(2), math.sin(2e-4), math.cos(2), math.cos(2e-4)],
                                                dtype=torch.float64))
    assert e[0, 1].abs().max() == 0  # pad position -> zero vector
    e5 = P.sinusoidal_embedding(torch.tensor([[3]]), 5, 1)  # odd C: zero last column
    assert e5.shape == (1, 1, 5) and e5[0, 0, 4] == 0 and e5[0, 0, 0] == math.sin(3)


# ---- optimisation ---------------------------------------------------------------------------

def test_cosine_schedule():
    # REFERENCE §3.4 command and its test values.
    s = O.CosineSchedule(max_lr=1.0, min_lr=1e-4, warmup_updates=16000, warmup_init_lr=1e-7,
                         period=270000, t_mult=2, lr_shrink=0.75, max_update=286000)
    for n, want in [(0, 1e-7), (1, 6.259999375e-5), (8000, 0.50000005), (16000, 1.0),
                    (151000, 0.50005), (285999, 1e-4), (286000, 0.75)]:
        assert close(s.lr(n), want, 1e-9 if n != 285999 else 1e-8), (n, s.lr(n), want)
    # t_mult = 1, period 10, shrink 0.5: n = W + 15 is half-way through period 1 at scale 0.5:
    # 0.5 * (0 + 0.5 * 1 * (1 + cos(pi/2))) = 0.25
    s1 = O.CosineSchedule(max_lr=1.0, min_lr=0.0, warmup_updates=2, warmup_init_lr=0.0, period=10,
                          t_mult=1, lr_shrink=0.5)
    assert close(s1.lr(17), 0.25, 1e-12) and close(s1.lr(1), 0.5, 1e-12)


def test_fixed_schedule():
    s = O.FixedSchedule(max_lr=0.07, warmup_updates=4)  # update u uses 0.07 * min(1, u / 4)
    assert [round(s.lr(u - 1), 12) for u in (1, 2, 4, 5, 100)] == [0.0175, 0.035, 0.07, 0.07, 0.07]


def test_nag_two_steps_by_hand():
    # p = [1, -2], mu = 0.99. Step 1, lr 0.1, g = [0.5, 0.25] (buf = 0):
    #   p = p - 1.99*0.1*g = [0.9005, -2.04975];  buf = -0.1 g = [-0.05, -0.025]
    # Step 2, lr 0.2 (c = 2), g = [0.1, -0.1]:
    #   p += 0.9801*2*buf = [-0.09801, -0.049005] -> [0.80249, -2.098755]
    #   p -= 1.99*0.2*g = [0.0398, -0.0398]       -> [0.76269, -2.058955]
    #   buf = 0.99*2*buf - 0.2 g = [-0.119, -0.0295]
    p = {"w": torch.tensor([1.0, -2.0], dtype=torch.float64)}
    opt = O.Nag(lr0=1.0)
    opt.step(p, {"w": torch.tensor([0.5, 0.25], dtype=torch.float64)}, 0.1)
    assert torch.allclose(p["w"], torch.tensor([0.9005, -2.04975], dtype=torch.float64), atol=1e-14)
    opt.step(p, {"w": torch.tensor([0.1, -0.1], dtype=torch.float64)}, 0.2)
    assert torch.allclose(p["w"], torch.tensor([0.76269, -2.058955], dtype=torch.float64), atol=1e-14)
    assert torch.allclose(opt.buf["w"], torch.tensor([-0.119, -0.0295], dtype=torch.float64), atol=1e-14)


def test_adam_first_step_and_clip():
    # Adam's first step is lr * g / (|g| + eps / sqrt(1 - b2)) ~ lr * sign(g) (bias-corrected m/sqrt(v) = sign(g)).
    p = {"w": torch.tensor([1.0, 1.0], dtype=torch.float64)}
    O.Adam().step(p, {"w": torch.tensor([0.5, -2e-3], dtype=torch.float64)}, 0.1)
    # eps enters before bias correction: denom = sqrt(0.001) |g| + 1e-8, numerator 0.1 * sqrt(0.001) * 0.1 g
    # -> step = 0.1 |g| / (|g| + 1e-8 / sqrt(0.001)) = 0.1 |g| / (|g| + 3.1623e-7)
    assert close(float(p["w"][0]), 1 - 0.1 * 0.5 / (0.5 + 3.16227766e-7), 1e-12)
    assert close(float(p["w"][1]), 1 + 0.1 * 2e-3 / (2e-3 + 3.16227766e-7), 1e-10)
    # clip: grads (3, 4) / 1 token -> norm 5; coef = 0.1 / (5 + 1e-6)
    g = {"a": torch.tensor([3.0], dtype=torch.float64), "b": torch.tensor([4.0], dtype=torch.float64)}
    norm, coef = O.normalize_and_clip(g, 1, 0.1)
    assert norm == 5.0 and close(coef, 0.1 / 5.000001, 1e-15)
    assert close(float(g["b"]), 0.4 / 5.000001, 1e-15)
    g = {"a": torch.tensor([6.0, 8.0], dtype=torch.float64)}
    norm, coef = O.normalize_and_clip(g, 2, 0.0)  # divided by 2 tokens, no clipping
    assert norm == 5.0 and coef == 1.0 and g["a"].tolist() == [3.0, 4.0]


# ---- data and eval-lm -----------------------------------------------------------------------

STREAM = list(range(10, 20))  # t10..t19


def test_blocks_example_43():
    assert E.lm_blocks(STREAM, 4) == [([2, 10, 11, 12], [10, 11, 12, 13]),
                                      ([13, 14, 15, 16], [14, 15, 16, 17]),
                                      ([17, 18], [18, 19])]


def test_context_window_tables():
    # REFERENCE §4.4 table, l = 4; the "..." rows of c = 3 follow the same pattern.
    c3 = [([2, 1, 1, 1], [10, 1, 1, 1], 0), ([2, 10, 1, 1], [1, 11, 1, 1], 1),
          ([2, 10, 11, 1], [1, 1, 12, 1], 2), ([2, 10, 11, 12], [1, 1, 1, 13], 3),
          ([10, 11, 12, 13], [1, 1, 1, 14], 3), ([11, 12, 13, 14], [1, 1, 1, 15], 3),
          ([12, 13, 14, 15], [1, 1, 1, 16], 3), ([13, 14, 15, 16], [1, 1, 1, 17], 3),
          ([14, 15, 16, 17], [1, 1, 1, 18], 3), ([15, 16, 17, 18], [1, 1, 1, 19], 3)]
    assert E.context_window_samples(STREAM, 4, 3) == c3
    c2 = [([2, 10, 1, 1], [10, 11, 1, 1], 0), ([2, 10, 11, 12], [1, 1, 12, 13], 2),
          ([11, 12, 13, 14], [1, 1, 14, 15], 2), ([13, 14, 15, 16], [1, 1, 16, 17], 2),
          ([15, 16, 17, 18], [1, 1, 18, 19], 2)]
    assert E.context_window_samples(STREAM, 4, 2) == c2
    assert E.context_window_samples(STREAM, 4, 0) == [(s, t, 0) for s, t in E.lm_blocks(STREAM, 4)]


def _hash_model(V):
    """A context-sensitive fake LM: the distribution at position k depends on the whole prefix
    row[:k+1] (through a hash), so any change of context changes the score."""
    def lp(row):
        out = []
        for k in range(len(row)):
            g = torch.Generator().manual_seed(hash(tuple(row[:k + 1])) % (2 ** 31))
            out.append(torch.log_softmax(torch.randn(V, generator=g, dtype=torch.float64), -1))
        return torch.stack(out)
    return lp


def test_eval_lm_against_direct_definition():
    # Token k of the stream (in block b = k // (l - c)) is predicted from the shifted stream
    # s' = [eos] + S restricted to s'[max(0, b (l - c) - c) : k + 1]; every token is scored once.
    V, l = 29, 6
    g = torch.Generator().manual_seed(3)
    stream = torch.randint(3, V, (23,), generator=g).tolist()
    lp = _hash_model(V)
    shifted = [2] + stream
    for c in range(0, l):
        want = 0.0
        for k, t in enumerate(stream):
            lo = max(0, (k // (l - c)) * (l - c) - c)
            want += float(lp(shifted[lo:k + 1])[-1, t])
        r = E.eval_lm(stream, lp, l, c)
        assert r.count == len(stream), (c, r.count)
        assert abs(r.score_sum - want) < 1e-9, (c, r.score_sum, want)
        assert close(r.ppl, math.exp(-want / len(stream)), 1e-12)
        assert close(r.loss_base2, -want / len(stream) / math.log(2), 1e-12)


def test_eval_lm_drops_inf():
    def lp(row):
        out = torch.full((len(row), 30), math.log(1 / 30), dtype=torch.float64)
        out[:, 13] = float("-inf")
        return out
    r = E.eval_lm(STREAM, lp, 4, 0)
    assert r.count == 9 and close(r.score_sum, 9 * math.log(1 / 30), 1e-12)


# ---- safetensors ----------------------------------------------------------------------------

def test_safetensors_fallback_roundtrip():
    ts = {"a": torch.randn(3, 4), "b": torch.arange(6, dtype=torch.int32).view(2, 3),
          "c": torch.tensor([1.5, -2.25]).to(torch.bfloat16), "d": torch.randn(2, dtype=torch.float64)}
    meta = {"config": json.dumps({"x": 1})}
    with tempfile.TemporaryDirectory() as d:
        f1 = os.path.join(d, "fb.safetensors")
        io.write_fallback(f1, ts, meta)
        got, m = io.read_fallback(f1)
        assert m == meta and set(got) == set(ts)
        for k in ts:
            assert got[k].dtype == ts[k].dtype and torch.equal(got[k], ts[k]), k
        if io.HAVE_SAFETENSORS:  # cross-check both directions against the library
            from safetensors.torch import load_file as st_load, save_file as st_save
            for k, v in st_load(f1).items():
                assert torch.equal(v, ts[k]), k
            f2 = os.path.join(d, "lib.safetensors")
            st_save(ts, f2, metadata=meta)
            got, m = io.read_fallback(f2)
            assert m == meta and all(torch.equal(got[k], ts[k]) for k in ts)
        with open(f1, "rb") as f:
            raw = f.read()
        bad = os.path.join(d, "trunc.safetensors")
        with open(bad, "wb") as f:
            f.write(raw[:-5])
        for reader in (io.read_fallback, io.load_file):
            try:
                reader(bad)
                assert False, "truncated file accepted"
            except InputError as e:
                assert "trunc.safetensors" in str(e), str(e)


# ---- the model ------------------------------------------------------------------------------

def test_model_by_hand():
    # With every attention and FFN weight and bias zero, each block is the identity, so (tied,
    # pre-norm + final LN with weight 2 and bias 1): logits = (2 LN(sqrt(C) E[src]) + 1) E^T.
    cfg = fx.small_config("alibi", share_io=True, layers=1)
    p = fx.random_params(cfg, 0, torch.float64)
    for k in p:
        if k.startswith("decoder.layers.0.") and ("proj" in k or "fc" in k):
            p[k] = torch.zeros_like(p[k])
    p["decoder.layer_norm.weight"] = torch.full_like(p["decoder.layer_norm.weight"], 2.0)
    p["decoder.layer_norm.bias"] = torch.ones_like(p["decoder.layer_norm.bias"])
    src = torch.tensor([[3, 4, 5]])
    E_ = p["decoder.embed_tokens.weight"]
    x = math.sqrt(12) * E_[src[0]]
    ln = (x - x.mean(-1, keepdim=True)) / torch.sqrt(x.var(-1, unbiased=False, keepdim=True) + 1e-5)
    want = (2 * ln + 1) @ E_.t()
    assert torch.allclose(M.forward(cfg, p, src)[0], want, atol=1e-12)


def _gradcheck_cfgs():
    # Every position method, plus the switches: post-norm, tied, every activation, no embedding scale,
    # no final norm, non-power-of-2 heads (H = 3) and H = 4.
    return [
        fx.small_config("alibi"),
        fx.small_config("alibi", heads=4, embed_dim=8, normalize_before=False, share_io=True),
        fx.small_config("sinusoidal", activation="gelu", no_scale_embedding=True),
        fx.small_config("learned", no_final_norm=True, share_io=True),
        fx.small_config("rope", heads=2, embed_dim=8, activation="gelu"),
        fx.small_config("t5", normalize_before=False),
        fx.small_config("none", share_io=True),
        fx.small_config("alibi", activation="gelu_accurate"),
        fx.small_config("sinusoidal", activation="tanh", normalize_before=False),
        fx.small_config("learned", activation="linear"),
    ]


def test_gradcheck_every_pos_method():
    # torch.autograd.gradcheck (float64 central differences against autograd) of the summed NLL
    # w.r.t. every parameter, with a padded row so the key-padding and ignore_index paths count.
    for cfg in _gradcheck_cfgs():
        cfg.layers = 1 if not LONG else 2
        p = fx.random_params(cfg, 7, torch.float64)
        src, tgt = fx.random_batch(cfg, 2, 5, 11, pad_tail=2)
        names = list(p)
        inputs = tuple(p[k].clone().requires_grad_(True) for k in names)

        def f(*ts):
            return M.nll_sum(M.forward(cfg, dict(zip(names, ts)), src), tgt, cfg.padding_idx)[0]

        assert torch.autograd.gradcheck(f, inputs, eps=1e-6, atol=1e-6, rtol=1e-4), cfg.pos


def test_matches_fairseq_style_torch_model():
    # bench/torch_lm.py builds the model the way fairseq does (nn.Linear, F.multi_head_attention_
    # forward with a [B*H, T, T] fork-form ALiBi mask, key_padding_mask, make_positions tables):
    # a structurally different implementation that must give the same logits in float64.
    import torch_lm
    for pos in ("alibi", "sinusoidal", "learned", "none"):
        for H, post in ((3, False), (4, True)):
            cfg = fx.small_config(pos, heads=H, embed_dim=12, normalize_before=not post)
            p = fx.random_params(cfg, 2, torch.float64)
            src, _ = fx.random_batch(cfg, 3, 8, 4, pad_tail=3)
            m = torch_lm.FairseqStyleLM(cfg.vocab_size, C=12, L=2, H=H, F_=16, pos=pos, dropout=0.0,
                                        max_positions=8, normalize_before=not post).double()
            m.load_fairseq_state(p)
            m.eval()
            ref = M.forward(cfg, p, src)
            with torch.no_grad():
                got = m(src.long())
            assert float((got - ref).abs().max() / ref.abs().max()) < 1e-12, (pos, H, post)


def _fp32_errors(cfg, B, T, seed=0):
    p = fx.random_params(cfg, seed, torch.float32)
    src, tgt = fx.random_batch(cfg, B, T, seed, pad_tail=T // 3)
    d32 = fx.make_dump(cfg, p, src, tgt, torch.float32)
    m = M.TransformerLM(cfg, p)
    loss, _, logits = m.loss(src, tgt)
    loss.backward()
    from stretch_oracle.compare import rel_max_err
    scale = max(float(t.grad.abs().max()) for t in m.params.values())
    errs = {"logits": rel_max_err(d32["logits"], logits)[2]}
    for k, t in m.params.items():
        errs["grad." + k] = rel_max_err(d32["grad." + k], t.grad, check_transformer_lm.GRAD_FLOOR * scale)[2]
    return errs


def test_fp32_error_budget():
    # The error float32 arithmetic makes against float64 truth at these sizes, i.e. what a correct
    # stretch shows: it must sit well below check_transformer_lm's 1e-4.
    worst = 0.0
    for pos in POS:
        errs = _fp32_errors(fx.small_config(pos, layers=2, embed_dim=32, ffn_dim=64, heads=4,
                                            vocab_size=50, tokens_per_sample=24, max_target_positions=24), 2, 24)
        worst = max(worst, max(errs.values()))
    note(f"    fp32 vs fp64 worst relative error (2 layers, C 32): {worst:.2e}")
    assert worst < 1e-5, worst
    if LONG:  # the benchmark model size: 4 layers, C 256, H 4, F 1024, V 1000, T 128
        errs = _fp32_errors(fx.small_config("alibi", layers=4, embed_dim=256, ffn_dim=1024, heads=4,
                                            vocab_size=1000, tokens_per_sample=128), 2, 128)
        note(f"    fp32 vs fp64 worst relative error (4 layers, C 256): {max(errs.values()):.2e}")
        assert max(errs.values()) < 2e-5


# ---- the checks, end to end -----------------------------------------------------------------

def _write_case(d, cfg, seed=0, B=2, T=7, dump_dtype=torch.float32, mutate=None):
    p = fx.random_params(cfg, seed, torch.float32)
    ck = os.path.join(d, "ck.safetensors")
    fx.write_checkpoint(ck, cfg, p)
    src, tgt = fx.random_batch(cfg, B, T, seed + 1, pad_tail=2)
    dump = fx.make_dump(cfg, p, src, tgt, dump_dtype) if mutate is None else mutate(cfg, p, src, tgt)
    dp = os.path.join(d, "dump.safetensors")
    io.save_file(dp, dump)
    return ck, dp, dump


def test_check_transformer_lm_passes_and_fails():
    with tempfile.TemporaryDirectory() as d:
        for pos in POS:  # a float32 oracle stands in for stretch: must pass
            ck, dp, _ = _write_case(d, fx.small_config(pos, share_io=(pos == "t5")))
            assert check_transformer_lm.main(["--checkpoint", ck, "--dump", dp, "--quiet"]) == 0, pos
        ck, dp, dump = _write_case(d, fx.small_config("alibi"))
        script = os.path.join(HERE, "check_transformer_lm.py")
        run = lambda *a: subprocess.run([sys.executable, script, *a], capture_output=True, text=True)
        r = run("--checkpoint", ck, "--dump", dp)
        assert r.returncode == 0, r.stdout + r.stderr
        dump["grad.decoder.layers.1.fc1.bias"] = dump["grad.decoder.layers.1.fc1.bias"] * 1.001
        del dump["grad.decoder.layers.0.fc2.weight"]
        io.save_file(dp, dump)
        r = run("--checkpoint", ck, "--dump", dp, "--quiet")
        assert r.returncode == 1 and "layers.1.fc1.bias" in r.stdout and "missing in the dump" in r.stdout, r.stdout
        dump["grad.decoder.layers.0.fc2.weight"] = torch.zeros(12, 16)
        dump["grad.decoder.no_such.weight"] = torch.zeros(2)
        io.save_file(dp, dump)
        r = run("--checkpoint", ck, "--dump", dp, "--quiet")
        assert r.returncode == 1 and "no such parameter" in r.stdout, r.stdout
        r = run("--checkpoint", dp, "--dump", dp)  # a dump is not a checkpoint: input error
        assert r.returncode == 2 and "dump.safetensors" in r.stderr and "Traceback" not in r.stderr, r.stderr


def _mutated_dump(patch):
    """A dump computed by the float32 oracle with one deliberate bug applied by `patch`."""
    def mutate(cfg, p, src, tgt):
        undo = patch(cfg, p)
        try:
            return fx.make_dump(cfg, p, src, tgt, torch.float32)
        finally:
            undo()
    return mutate


def _set(obj, name, value):
    old = getattr(obj, name)
    setattr(obj, name, value)
    return lambda: setattr(obj, name, old)


def test_seeded_bugs_are_caught():
    # Plausible implementation mistakes; each must fail the 1e-4 check. The printed error size
    # is the margin the tolerance leaves.
    def q_bias_unscaled(cfg, p):  # q = x Wq^T D^-1/2 + bq  ==  correct model with bq / D^-1/2
        keys = [k for k in p if k.endswith("q_proj.bias")]
        old = {k: p[k].clone() for k in keys}
        for k in keys:
            p[k] *= cfg.head_dim ** 0.5
        return lambda: p.update(old)

    def rope_interleaved(x, cos, sin):  # GPT-J pairs (2k, 2k+1) instead of (k, k + D/2)
        h = x.shape[-1] // 2
        xe, xo = x[..., 0::2], x[..., 1::2]
        c, s = cos[..., :h], sin[..., :h]
        return torch.stack([xe * c - xo * s, xo * c + xe * s], dim=-1).flatten(-2)

    orig_slopes, orig_pos, orig_bucket = P.alibi_slopes, P.make_positions, P.t5_bucket
    bugs = {
        "alibi slopes reversed": ("alibi", lambda c, p: _set(P, "alibi_slopes", lambda n: orig_slopes(n)[::-1])),
        "q scaled before its bias": ("alibi", q_bias_unscaled),
        "learned positions from 1": ("learned", lambda c, p: _set(P, "make_positions", lambda t, i: orig_pos(t, i - 1))),
        "sinusoidal positions from 1": ("sinusoidal", lambda c, p: _set(P, "make_positions",
                                                                        lambda t, i: orig_pos(t, i) - t.ne(i).long())),
        "rope interleaved": ("rope", lambda c, p: _set(P, "rope_apply", rope_interleaved)),
        "t5 bucket of i - j": ("t5", lambda c, p: _set(P, "t5_bucket", lambda r, nb, md: orig_bucket(-r, nb, md))),
        "no embedding scale": ("none", lambda c, p: _set(c, "no_scale_embedding", True)),
        "relu instead of gelu": ("none", lambda c, p: _set(c, "activation", "relu")),
    }
    with tempfile.TemporaryDirectory() as d:
        for name, (pos, patch) in bugs.items():
            cfg = fx.small_config(pos, activation="gelu", layers=2)
            ck, dp, _ = _write_case(d, cfg, mutate=_mutated_dump(patch))
            rows = check_transformer_lm.check(ck, dp, 1e-4)
            worst = max(r.rel_err for r in rows)
            note(f"    {name:<28} worst rel error {worst:.2e}")
            assert worst > 1e-2 and any(not r.ok for r in rows), name


def test_trajectory_passes_and_fails():
    cfg = fx.small_config("alibi", layers=2, embed_dim=32, ffn_dim=64, heads=4, vocab_size=40,
                          tokens_per_sample=16)
    p = fx.random_params(cfg, 5, torch.float32)
    src, tgt = fx.stream_batches(cfg, 20, 4, 16, 0)
    sched = dict(lr_scheduler="cosine", warmup_updates=5, warmup_init_lr=1e-7, min_lr=1e-4, max_update=20)
    for ocfg in (dict(optimizer="nag", lr=0.5, clip_norm=0.1, **sched),
                 dict(optimizer="adam", lr=3e-3, clip_norm=1.0, **sched)):
        with tempfile.TemporaryDirectory() as d:
            ck, bp, op, lp = (os.path.join(d, n) for n in ("ck.safetensors", "b.safetensors", "o.json", "l.json"))
            fx.write_checkpoint(ck, cfg, p)
            io.save_file(bp, {"src_tokens": src, "target": tgt})
            with open(op, "w") as f:
                json.dump(ocfg, f)

            def stand_in(oc):  # float32 oracle run = a correct fp32 implementation
                logs = train_steps(M.TransformerLM(cfg, p, torch.float32), src, tgt, oc)
                return [{"loss": s.loss / math.log(2), "lr": s.lr, "gnorm": s.gnorm} for s in logs]

            def check(losses, *extra):
                with open(lp, "w") as f:
                    json.dump(losses, f)
                return check_trajectory.main(["--checkpoint", ck, "--batches", bp, "--optim-config", op,
                                              "--losses", lp, *extra])

            good = stand_in(ocfg)
            assert check(good) == 0, ocfg
            assert good[-1]["loss"] < 0.5 * good[0]["loss"]  # the run actually trains
            assert check([b["loss"] for b in stand_in(dict(ocfg, clip_norm=0.0))]) == 1  # forgot to clip
            # lr(u) instead of lr(u - 1) during warmup: starting the ramp at lr/5 is the same shift
            late = stand_in(dict(ocfg, warmup_init_lr=ocfg["lr"] / 5))
            assert check([b["loss"] for b in late]) == 1
            nats = [g["loss"] * math.log(2) for g in good]  # right numbers, wrong unit
            assert check(nats) == 1 and check(nats, "--loss-unit", "nats") == 0


def test_check_eval_lm_passes_and_fails():
    cfg = fx.small_config("alibi")
    p = fx.random_params(cfg, 4, torch.float32)
    g = torch.Generator().manual_seed(9)
    stream = torch.randint(3, cfg.vocab_size, (17,), generator=g)
    stream[[5, 11]] = 2  # line ends
    m32 = M.TransformerLM(cfg, p, torch.float32)  # stand-in for stretch
    with tempfile.TemporaryDirectory() as d:
        ck, sp, rp = (os.path.join(d, n) for n in ("ck.safetensors", "s.safetensors", "r.json"))
        fx.write_checkpoint(ck, cfg, p)
        io.save_file(sp, {"tokens": stream.to(torch.int32)})
        for c in (0, 2, 5):
            r = E.eval_lm(stream.tolist(), E.model_log_probs(m32), 6, c)
            with open(rp, "w") as f:
                json.dump({"count": r.count, "loss_base2": r.loss_base2, "ppl": r.ppl}, f)
            args = ["--checkpoint", ck, "--stream", sp, "--tokens-per-sample", "6", "--context-window", str(c),
                    "--result", rp]
            assert check_eval_lm.main(args) == 0, c
        # a scorer that ignores start_index (reads the log-probs from position 0 of each window)
        wrong = E.context_window_samples(stream.tolist(), 6, 5)
        wrong = [(row, trow, 0) for row, trow, _ in wrong]
        tot, cnt = E.score(wrong, E.model_log_probs(m32))
        with open(rp, "w") as f:
            json.dump({"count": cnt, "loss_base2": -tot / cnt / math.log(2)}, f)
        assert check_eval_lm.main(args) == 1
        # the non-overlapping figure reported for a context-window run
        r0 = E.eval_lm(stream.tolist(), E.model_log_probs(m32), 6, 0)
        with open(rp, "w") as f:
            json.dump({"count": r0.count, "loss_base2": r0.loss_base2}, f)
        assert check_eval_lm.main(args) == 1


# ---- runner ---------------------------------------------------------------------------------

def main(argv):
    sel = argv[argv.index("-k") + 1] if "-k" in argv else ""
    torch.set_num_threads(1)
    tests = [(n, f) for n, f in sorted(globals().items()) if n.startswith("test_") and callable(f) and sel in n]
    passed, failed = 0, []
    for name, fn in tests:
        buf = io_.StringIO()
        t0 = time.perf_counter()
        torch.set_num_threads(1)
        try:
            with contextlib.redirect_stdout(buf):
                fn()
            passed += 1
            print(f"PASS {name} ({time.perf_counter() - t0:.1f} s)", flush=True)
        except Exception:
            failed.append(name)
            print(f"FAIL {name}\n{buf.getvalue()}{traceback.format_exc()}", flush=True)
    print(f"{passed} passed, {len(failed)} failed")
    return 1 if failed or not tests else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
