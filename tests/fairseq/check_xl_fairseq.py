#!/usr/bin/env python3
"""stretch eval-lm on transformer_xl checkpoints REAL fairseq 0.12.2 trained (fairseq-train
--user-dir <fairseq>/examples/truncated_bptt --task truncated_bptt_lm --arch transformer_xl, which
builds HuggingFace transformers 4.30.2's TransfoXLLMHeadModel) equals real fairseq-eval-lm on the
same .pt (read by stretch directly: the transformer_xl import of decoder.model.* names).

Cases (synthetic 60-word corpus, V 64 with fairseq's specials; 2 layers, C 32, 2 heads of 16,
d_inner 64, mem_len 8, 6 updates of --tokens-per-sample 16 blocks):
  full        the default cutoffs, all >= V: the full softmax with crit.out_layers.0's bias
  adaptive    --cutoffs 20,40: HF's ProjectedAdaptiveLogSoftmax at div_val 1 (clusters, biases)
  div2        --cutoffs 20,40 --div-val 2: projected bands, tied tables and projections
Each is evaluated as trained and with --model-overrides mem_len 24, clamp_len 6, same_length
(the seed's evaluation form). Checked: Loss (base 2) within 1e-4 relative and the same token
count. A checkpoint whose tied copy (crit.out_layers.0.weight) was altered must be refused.
Without the oracle (build/fairseq-venv with fairseq and transformers' TransfoXL, made by
tests/fairseq/setup_fairseq.sh): tests/oracle_skip.py (fails under CI=true).
Usage: check_xl_fairseq.py STRETCH_BINARY FAIRSEQ_VENV
"""
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
import oracle_skip  # noqa: E402
import testlib  # noqa: E402

RTOL = 1e-4
MODEL = ["--arch", "transformer_xl", "--n-layer", "2", "--d-model", "32", "--n-head", "2", "--d-head", "16",
         "--d-inner", "64", "--dropout", "0.1", "--dropatt", "0.0", "--mem-len", "8"]
TRAIN = ["--task", "truncated_bptt_lm", "--tokens-per-sample", "16", "--batch-size", "2", "--max-update", "6",
         "--optimizer", "adam", "--lr", "0.005", "--clip-norm", "0.25", "--lr-scheduler", "cosine",
         "--warmup-updates", "0", "--seed", "2", "--cpu", "--no-epoch-checkpoints", "--disable-validation",
         "--num-workers", "0", "--log-format", "simple"]
CASES = {"full": [], "adaptive": ["--cutoffs", "20,40"], "div2": ["--cutoffs", "20,40", "--div-val", "2"]}
EVAL = ["--task", "truncated_bptt_lm", "--batch-size", "2", "--tokens-per-sample", "16", "--gen-subset", "valid"]
OVERRIDES = ["--model-overrides", "{'mem_len': 24, 'clamp_len': 6, 'same_length': True}"]


def venv_has_xl(py):
    p = subprocess.run([py, "-c", "import fairseq; from transformers.models.transfo_xl import TransfoXLLMHeadModel"],
                       capture_output=True, text=True)
    return p.returncode == 0


def user_dir(py):
    p = testlib.run([py, "-c", "import fairseq, os; print(os.path.join(os.path.dirname(fairseq.__file__), "
                               "'examples', 'truncated_bptt'))"])
    d = p.stdout.strip()
    if p.returncode != 0 or not os.path.isfile(os.path.join(d, "transformer_xl_model.py")):
        raise SystemExit(f"FAIL: fairseq is installed but examples/truncated_bptt is not at {d!r}: {p.stderr}")
    return d


def fairseq_eval(py, data, ckpt, udir, extra):
    p = testlib.run([py, os.path.join(HERE, "fairseq_eval.py"), data, "--path", ckpt, "--user-dir", udir, "--cpu"] +
                    EVAL + extra)
    if p.returncode != 0:
        raise SystemExit(f"FAIL: fairseq-eval-lm {ckpt} {extra} exited {p.returncode}:\n{p.stderr[-3000:]}")
    return json.loads(p.stdout.strip().splitlines()[-1])


def stretch_eval(stretch, data, ckpt, extra, tmp):
    rj = os.path.join(tmp, "r.json")
    p = testlib.run([stretch, "eval-lm", data, "--path", ckpt, "--results-json", rj] + EVAL + extra)
    if p.returncode != 0:
        raise SystemExit(f"FAIL: stretch eval-lm {ckpt} {extra} exited {p.returncode}:\n{p.stdout}{p.stderr}")
    with open(rj) as f:
        return json.load(f), p.stderr


def make_data(venv, tmp):
    """The synthetic corpus (V 60 words; train 300 lines, valid and test 40) under tmp, binarised by
    real fairseq-preprocess into tmp/data-bin, which is returned (check_xl_generate.py uses it too)."""
    for split, lines, seed in (("train", 300, 1), ("valid", 40, 2), ("test", 40, 3)):
        with open(os.path.join(tmp, split + ".txt"), "w") as f:
            f.write(testlib.synthetic_text(lines, seed, vocab=60))
    data = os.path.join(tmp, "data-bin")
    p = testlib.run([os.path.join(venv, "bin", "fairseq-preprocess"), "--only-source", "--trainpref",
                     os.path.join(tmp, "train.txt"), "--validpref", os.path.join(tmp, "valid.txt"), "--testpref",
                     os.path.join(tmp, "test.txt"), "--destdir", data, "--workers", "1"])
    if p.returncode != 0:
        raise SystemExit(f"FAIL: fairseq-preprocess exited {p.returncode}:\n{p.stderr[-3000:]}")
    return data


def main():
    stretch, venv = sys.argv[1], sys.argv[2]
    py = os.path.join(venv, "bin", "python")
    if not os.path.exists(py) or "fairseq" in oracle_skip.hidden() or not venv_has_xl(py):
        oracle_skip.missing("fairseq+transformers", install="tests/fairseq/setup_fairseq.sh (makes " + venv + ")",
                            detail="real fairseq's transformer_xl (HF TransfoXL in transformers 4.30.2)")
    udir = user_dir(py)
    with tempfile.TemporaryDirectory(prefix="stretch-xl-fairseq-") as tmp:
        data = make_data(venv, tmp)
        for name, flags in CASES.items():
            save = os.path.join(tmp, name)
            p = testlib.run([os.path.join(venv, "bin", "fairseq-train"), data, "--user-dir", udir, "--save-dir", save] +
                            TRAIN + MODEL + flags, timeout=600)
            if p.returncode != 0:
                raise SystemExit(f"FAIL: fairseq-train {name} exited {p.returncode}:\n{p.stderr[-3000:]}")
            ckpt = os.path.join(save, "checkpoint_last.pt")
            for label, extra in (("as trained", []), ("overrides", OVERRIDES)):
                fs = fairseq_eval(py, data, ckpt, udir, extra)
                st, _ = stretch_eval(stretch, data, ckpt, extra, tmp)
                rel = abs(st["loss_base2"] - fs["loss_base2"]) / abs(fs["loss_base2"])
                testlib.check(rel <= RTOL and st["fairseq_ntokens"] == fs["tokens"],
                              f"{name} {label}: stretch loss {st['loss_base2']:.6f} vs fairseq {fs['loss_base2']:.6f} "
                              f"(rel {rel:.1e}), evaluated tokens {st['fairseq_ntokens']} vs {fs['tokens']}")
        # A tied copy that differs from its original: refused, naming both tensors.
        bad = os.path.join(tmp, "bad.pt")
        p = testlib.run([py, "-c", "import sys, torch; s = torch.load(sys.argv[1]); "
                                   "w = s['model']['decoder.model.crit.out_layers.0.weight']; "
                                   "s['model']['decoder.model.crit.out_layers.0.weight'] = w.clone() + 1; "
                                   "torch.save(s, sys.argv[2])", os.path.join(tmp, "adaptive", "checkpoint_last.pt"),
                         bad])
        testlib.check(p.returncode == 0, "made a checkpoint with an untied copy " + p.stderr[-500:])
        p = testlib.run([stretch, "eval-lm", data, "--path", bad] + EVAL)
        testlib.check(p.returncode != 0 and "crit.out_layers.0.weight" in p.stderr and "tied" in p.stderr,
                      f"an altered tied copy is refused (exit {p.returncode}: {p.stderr.strip()[-300:]})")
    return testlib.finish()


if __name__ == "__main__":
    sys.exit(main())
