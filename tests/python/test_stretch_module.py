"""`import stretch` against the `stretch` binary on the same trained model (conftest.py): scores equal
eval-lm's (the printed lines, --results-json and the per-token dump), text and ids score as the
binarized split does, generate prints what `stretch generate` prints with the same seed, sweep's table
is `stretch sweep`'s, the state dict holds the checkpoint's tensors under fairseq's names (read here
from the safetensors bytes with numpy, not through stretch), weights load back, and errors are
Python exceptions carrying the binary's message. A fairseq .pt goes through the import path and
matches fairseq-eval-lm's committed per-token NLL (tests/fixtures/fairseq/expected.json)."""
import json
import os
import struct

import numpy as np
import pytest

import stretch
from conftest import L_TRAIN, run

FIX = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures", "fairseq")
PROTOCOLS = [  # (L, context window, kv cache)
    (L_TRAIN, 0, False), (2 * L_TRAIN, 0, False), (2 * L_TRAIN, 2 * L_TRAIN - 1, False), (L_TRAIN, 0, True)]


def binary_eval(binary, trained, tmp_path, L, c, kv, path=None):
    rj, dump = str(tmp_path / "r.json"), str(tmp_path / "nll.tsv")
    cmd = [binary, "eval-lm", trained["data"], "--path", path or trained["ckpt"], "--gen-subset", "valid",
           "--tokens-per-sample", str(L), "--context-window", str(c), "--threads", "1", "--results-json", rj,
           "--dump-nll", dump] + (["--kv-cache"] if kv else [])
    out = run(cmd).stdout
    with open(rj) as f:
        result = json.load(f)
    with open(dump) as f:
        rows = [line.split("\t") for line in f.read().splitlines()[1:]]
    return out, result, rows


@pytest.mark.parametrize("L,c,kv", PROTOCOLS)
def test_eval_lm_equals_binary(binary, trained, tmp_path, L, c, kv):
    out, result, rows = binary_eval(binary, trained, tmp_path, L, c, kv)
    r = stretch.eval_lm(trained["data"], path=trained["ckpt"], gen_subset="valid", tokens_per_sample=L,
                        context_window=c, kv_cache=kv)
    # what eval-lm prints, to its printed precision
    assert f"Loss (base 2): {r['loss']:.4f}, Perplexity: {r['ppl']:.2f}" in out
    assert f"Standard error of the mean loss (base 2): {r['stderr_base2']:.4f}" in out
    # and exactly (the same code on the same thread count)
    assert r["loss"] == result["loss_base2"] and r["ppl"] == result["ppl"]
    assert r["count"] == result["count"] and r["nll_sum_nats"] == result["nll_sum_nats"]
    assert r["protocol"] == result["protocol"]
    assert r["nll"].dtype == np.float64 and r["targets"].dtype == np.int32
    assert len(r["nll"]) == len(rows) == r["count"]
    assert [int(x[0]) for x in rows] == list(range(len(rows)))
    assert [int(x[1]) for x in rows] == r["targets"].tolist()
    assert [x[2] for x in rows] == [f"{v:.9g}" for v in r["nll"]]  # the dump's 9 significant digits
    assert np.isclose(r["nll"].mean() / np.log(2), r["loss"], rtol=1e-12, atol=0)


@pytest.mark.parametrize("L,c,kv", PROTOCOLS)
def test_score_text_and_ids_equal_the_split(binary, trained, L, c, kv):
    m = stretch.load(trained["ckpt"])
    split = stretch.eval_lm(trained["data"], path=trained["ckpt"], gen_subset="valid", tokens_per_sample=L,
                            context_window=c, kv_cache=kv)
    with open(trained["valid"]) as f:
        text = f.read()
    by_text = m.score(text, tokens_per_sample=L, context_window=c, kv_cache=kv)
    ids = m.encode(text)
    assert ids.tolist() == split["targets"].tolist()  # the text binarized as preprocess binarized it
    by_ids = m.score(ids, tokens_per_sample=L, context_window=c, kv_cache=kv)
    for r in (by_text, by_ids):
        assert np.array_equal(r["nll"], split["nll"]) and r["loss"] == split["loss"]
    # batching does not change a score beyond float rounding (other GEMM shapes sum in another
    # order: a few ulps of float32), and a stride is a context window
    batched = m.score(ids, tokens_per_sample=L, context_window=c, kv_cache=kv, max_sentences=3)
    assert np.allclose(batched["nll"], split["nll"], rtol=1e-6, atol=1e-6)
    if c > 0:
        strided = m.score(ids, tokens_per_sample=L, stride=L - c)
        assert np.array_equal(strided["nll"], split["nll"])


def test_generate_matches_binary(binary, trained):
    flags = dict(max_len=12, temperature=0.8, top_k=7, top_p=0.9, seed=11, nbest=3)
    out = run([binary, "generate", "--path", trained["ckpt"], "--prompt", "w1 w2 w3", "--max-len", "12",
               "--temperature", "0.8", "--top-k", "7", "--top-p", "0.9", "--seed", "11", "--nbest", "3",
               "--threads", "1"]).stdout
    m = stretch.load(trained["ckpt"])
    samples = m.generate("w1 w2 w3", **flags)
    assert samples == out.splitlines()
    assert len(set(samples)) > 1  # three different draws from one seeded stream
    assert m.generate("w1 w2 w3", **flags) == samples  # the seed fixes them
    greedy = run([binary, "generate", "--path", trained["ckpt"], "--temperature", "0", "--max-len", "5",
                  "--threads", "1"]).stdout
    assert m.generate(temperature=0, max_len=5) == greedy.splitlines()


def test_sweep_matches_binary(binary, trained, tmp_path):
    lengths = [8, 16, 32]
    out = run([binary, "sweep", trained["data"], "--path", trained["ckpt"], "--lengths", "8,16,32",
               "--gen-subset", "valid", "--results-dir", str(tmp_path), "--threads", "1"]).stdout
    t = stretch.sweep(trained["data"], paths=[trained["ckpt"]], lengths=lengths, gen_subset="valid")
    assert t["markdown"] in out
    assert t["lengths"].tolist() == lengths and t["protocol"] == "non-overlapping"
    with open(tmp_path / "sweep.json") as f:
        written = json.load(f)
    flat = json.dumps(written)
    row = t["rows"][0]
    assert row["train_length"] == L_TRAIN and row["ppl"].shape == (3,)
    for ppl in row["ppl"]:
        assert repr(float(ppl)) in flat or json.dumps(float(ppl)) in flat
    # each cell is eval-lm at that length
    for L, ppl in zip(lengths, row["ppl"]):
        e = stretch.eval_lm(trained["data"], path=trained["ckpt"], gen_subset="valid", tokens_per_sample=L)
        assert e["ppl"] == ppl


def safetensors_tensors(path):
    """name -> float32 array, read from the file's bytes as safetensors documents them (u64 header
    length, JSON header with dtype/shape/data_offsets, then the data)."""
    with open(path, "rb") as f:
        raw = f.read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        a, b = info["data_offsets"]
        assert info["dtype"] == "F32"
        out[name] = np.frombuffer(raw[8 + n + a:8 + n + b], dtype="<f4").reshape(info["shape"])
    return out


def test_state_dict_has_the_checkpoint_tensors(binary, trained):
    m = stretch.load(trained["ckpt"])
    sd = m.state_dict()
    stored = {k: v for k, v in safetensors_tensors(trained["ckpt"]).items()
              if not k.startswith(("optimizer.", "segment."))}
    assert set(sd) == set(stored)
    assert "decoder.embed_tokens.weight" in sd and "decoder.layers.1.self_attn.q_proj.weight" in sd
    for k, v in sd.items():
        assert v.dtype == np.float32 and np.array_equal(v, stored[k]), k


def test_load_state_dict_and_save(binary, trained, tmp_path):
    m = stretch.load(trained["ckpt"])
    before = m.score(m.encode(open(trained["valid"]).read()), tokens_per_sample=L_TRAIN)
    sd = m.state_dict()
    sd["decoder.layers.0.fc2.weight"] = sd["decoder.layers.0.fc2.weight"] * 0.5
    m.load_state_dict(sd)
    assert np.array_equal(m.state_dict()["decoder.layers.0.fc2.weight"], sd["decoder.layers.0.fc2.weight"])
    after = m.score(open(trained["valid"]).read(), tokens_per_sample=L_TRAIN)
    assert after["loss"] != before["loss"]
    saved = str(tmp_path / "halved.pt")
    m.save(saved)
    out, result, rows = binary_eval(binary, trained, tmp_path, L_TRAIN, 0, False, path=saved)
    assert result["loss_base2"] == after["loss"]
    # all or nothing: a bad dict changes no weight and names the key
    bad = dict(sd)
    del bad["decoder.layers.1.fc1.bias"]
    bad["decoder.layers.0.fc2.weight"] = sd["decoder.layers.0.fc2.weight"] * 0
    with pytest.raises(stretch.UsageError, match="'decoder.layers.1.fc1.bias' is missing"):
        m.load_state_dict(bad)
    assert np.array_equal(m.state_dict()["decoder.layers.0.fc2.weight"], sd["decoder.layers.0.fc2.weight"])
    wrong = dict(sd)
    wrong["decoder.layers.1.fc1.bias"] = np.zeros(3, dtype=np.float32)
    with pytest.raises(stretch.UsageError, match=r"has shape \[3\], the model's is \[64\]"):
        m.load_state_dict(wrong)
    extra = dict(sd)
    extra["decoder.nonsense"] = np.zeros(1, dtype=np.float32)
    with pytest.raises(stretch.UsageError, match="'decoder.nonsense' is not a parameter"):
        m.load_state_dict(extra)


def binary_error(binary, args):
    r = run([binary] + args, ok=False)
    assert r.returncode != 0
    assert r.stderr.startswith("stretch: error: ")
    return r.returncode, r.stderr[len("stretch: error: "):].rstrip("\n")


def test_errors_carry_the_binary_message(binary, trained, tmp_path):
    missing = str(tmp_path / "no-such-model.pt")
    code, msg = binary_error(binary, ["eval-lm", trained["data"], "--path", missing])
    with pytest.raises(stretch.Error) as e:
        stretch.load(missing)
    assert str(e.value) == msg and code == 1 and not isinstance(e.value, stretch.UsageError)
    assert isinstance(e.value, RuntimeError)

    code, msg = binary_error(binary, ["eval-lm", trained["data"], "--path", trained["ckpt"], "--gen-subset", "valid",
                                      "--tokens-per-sample", "16", "--context-window", "16"])
    with pytest.raises(stretch.UsageError) as e:
        stretch.eval_lm(trained["data"], path=trained["ckpt"], gen_subset="valid", tokens_per_sample=16,
                        context_window=16)
    assert str(e.value) == msg and code == 2 and isinstance(e.value, ValueError)

    code, msg = binary_error(binary, ["eval-lm", trained["data"], "--path", trained["ckpt"], "--gen-subset", "nope"])
    with pytest.raises(stretch.Error) as e:
        stretch.eval_lm(trained["data"], path=trained["ckpt"], gen_subset="nope")
    assert str(e.value) == msg

    # (the binary's flag parser refuses --top-p 1.5 before the library's check; the module meets the check)
    with pytest.raises(stretch.UsageError, match=r"--top-p 1.50* must be in \(0, 1\]"):
        stretch.load(trained["ckpt"]).generate(top_p=1.5)

    m = stretch.load(trained["ckpt"])
    with pytest.raises(stretch.UsageError, match="token id 9999 at index 1 is outside the vocabulary"):
        m.score(np.array([4, 9999]))
    with pytest.raises(stretch.UsageError, match="one-dimensional"):
        m.score(np.zeros((2, 2), dtype=np.int32))


def test_model_overrides_as_eval_lm_takes_them(binary, trained):
    text = "{'tokens_per_sample': 32, 'max_target_positions': 32}"
    a = stretch.load(trained["ckpt"], model_overrides=text)
    b = stretch.load(trained["ckpt"], model_overrides={"tokens_per_sample": 32, "max_target_positions": 32})
    assert a.info["tokens_per_sample"] == b.info["tokens_per_sample"] == 32
    assert a.config["pos"] == "alibi" and a.info["family"] == "transformer_lm"
    with pytest.raises(stretch.UsageError, match="--model-overrides"):
        stretch.load(trained["ckpt"], model_overrides="{'tokens_per_sample': ")


def test_fairseq_checkpoint_through_the_import_path():
    with open(os.path.join(FIX, "expected.json")) as f:
        expected = json.load(f)
    data = os.path.join(FIX, "data-bin")
    for case in ("sin_post_tied/blocks", "sin_post_tied/window"):
        exp = expected[case]
        flags = exp["flags"]
        L = int(flags[flags.index("--tokens-per-sample") + 1])
        c = int(flags[flags.index("--context-window") + 1]) if "--context-window" in flags else 0
        path = os.path.join(FIX, exp["checkpoint"])
        r = stretch.eval_lm(data, path=path, gen_subset="valid", tokens_per_sample=L, context_window=c)
        assert r["count"] == exp["tokens"]
        assert abs(r["loss"] - exp["loss_base2"]) <= 1e-4 * exp["loss_base2"]
        assert np.max(np.abs(r["nll"] - np.array(exp["nll"]))) <= 2e-5  # fairseq logs 6 decimals
    m = stretch.load(os.path.join(FIX, "sin_post_tied.pt"), data=data)
    assert m.info["format"] == "fairseq"
    sd = m.state_dict()
    assert "decoder.embed_tokens.weight" in sd and "decoder.layers.0.self_attn.k_proj.weight" in sd
    ids = m.encode(open(os.path.join(FIX, "valid.txt")).read())
    assert np.array_equal(m.score(ids, tokens_per_sample=16)["nll"],
                          stretch.eval_lm(data, path=os.path.join(FIX, "sin_post_tied.pt"), gen_subset="valid",
                                          tokens_per_sample=16)["nll"])
    with pytest.raises(stretch.UsageError, match="has no dictionary inside"):
        stretch.load(os.path.join(FIX, "sin_post_tied.pt")).encode("w1")
