#!/usr/bin/env python3
"""stretch generate on transformer_xl checkpoints REAL fairseq 0.12.2 trained = HuggingFace
transformers 4.30.2's TransfoXLLMHeadModel.generate with its `mems` (hf_xl_generate.py) on the
same weights, `stretch import-fairseq` of them to a model file and `export-fairseq` back.

Cases (the corpus and model of check_xl_fairseq.py: V 64, 2 layers, C 32, 2 heads of 16,
d_inner 64, mem_len 8, 6 updates; then every parameter (not the inv_freq buffer) + N(0, 0.6^2) noise, in place, so tied
tensors stay tied and greedy decoding is not one repeated token): full (the full softmax) and adaptive (--cutoffs 20,40: HF's
ProjectedAdaptiveLogSoftmax). The context is </s> and 20 words of the valid set, longer than
mem_len, so the memory decides every step: greedy, 16 new tokens, as trained and with
--model-overrides mem_len 12, clamp_len 5, same_length. Checked: the same ids (at least 3
distinct ones), and the log-probability of each within 5e-5 (--print-scores). A control at mem_len 2 must differ from HF
at mem_len 12 (the memory matters). Sampling (--temperature 0.8 --top-k 10 --top-p 0.9 --seed 3,
--nbest 2) prints the same text twice and another text with --seed 4.
Import: `stretch import-fairseq CKPT --out M` writes a model file; `stretch info M` names the
transformer_xl family; stretch eval-lm on M equals eval-lm on the .pt exactly and fairseq-eval-lm
within 1e-4 (the seed's override form included); generate on M (no data directory: the stored
dictionary) equals generate on the .pt. Export: `stretch export-fairseq M --out B.pt`; real
fairseq-eval-lm (--user-dir examples/truncated_bptt) on B.pt equals stretch eval-lm on M within
1e-4, and stretch eval-lm on B.pt equals it exactly (both forms).
Without the oracle (build/fairseq-venv with fairseq and transformers' TransfoXL):
tests/oracle_skip.py (fails under CI=true).
Usage: check_xl_generate.py STRETCH_BINARY FAIRSEQ_VENV
"""
import json
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
import oracle_skip  # noqa: E402
import testlib  # noqa: E402
from check_xl_fairseq import (EVAL, MODEL, OVERRIDES, TRAIN, fairseq_eval, make_data, stretch_eval,  # noqa: E402
                              user_dir, venv_has_xl)

# Both sides float32 with other summation orders; HF's ATen kernels follow the CPU: the worst
# seen was 3.4e-6 on Zen 3 / Zen 4 and 1.27e-5 on Zen 5 (AVX-512 full width; -0.562796 vs
# -0.562809 after 16 steps of generation), whichever stretch binary. The control at mem_len 2
# differs by 0.65, and the ids must be equal.
LP_TOL = 5e-5
RTOL = 1e-4
CASES = {"full": [], "adaptive": ["--cutoffs", "20,40"]}
GEN_OVERRIDES = "{'mem_len': 12, 'clamp_len': 5, 'same_length': True}"
NEW = 16
# Noise added once per storage (tied tensors share one), saved with torch.save as fairseq saves.
PERTURB = ("import sys, torch; s = torch.load(sys.argv[1]); g = torch.Generator().manual_seed(7); seen = set()\n"
           "for k in sorted(s['model']):\n"
           "    t = s['model'][k]\n"
           "    if t.is_floating_point() and not k.endswith('inv_freq') and t.storage().data_ptr() not in seen:\n"
           "        seen.add(t.storage().data_ptr()); t.add_(0.6 * torch.randn(t.shape, generator=g))\n"
           "torch.save(s, sys.argv[2])")


def stretch_generate(stretch, args):
    p = testlib.run([stretch, "generate"] + args)
    if p.returncode != 0:
        raise SystemExit(f"FAIL: stretch generate {args} exited {p.returncode}:\n{p.stdout}{p.stderr}")
    return p.stdout


def scores(text):
    ids = lps = None
    for line in text.splitlines():
        if line.startswith("ids\t"):
            ids = [int(t) for t in line.split("\t", 1)[1].split()]
        elif line.startswith("logprobs\t"):
            lps = [float(t) for t in line.split("\t", 1)[1].split()]
    if ids is None or lps is None:
        raise SystemExit(f"FAIL: no ids/logprobs lines in stretch generate --print-scores output:\n{text}")
    return ids, lps


def hf_generate(py, data, ckpt, udir, context, overrides):
    p = testlib.run([py, os.path.join(HERE, "hf_xl_generate.py"), data, ckpt, udir, "--context",
                     ",".join(map(str, context)), "--max-len", str(NEW), "--model-overrides", overrides])
    if p.returncode != 0:
        raise SystemExit(f"FAIL: hf_xl_generate.py {ckpt} exited {p.returncode}:\n{p.stderr[-3000:]}")
    return json.loads(p.stdout.strip().splitlines()[-1])


def main():
    stretch, venv = sys.argv[1], sys.argv[2]
    py = os.path.join(venv, "bin", "python")
    if not os.path.exists(py) or "fairseq" in oracle_skip.hidden() or not venv_has_xl(py):
        oracle_skip.missing("fairseq+transformers", install="tests/fairseq/setup_fairseq.sh (makes " + venv + ")",
                            detail="real fairseq's transformer_xl (HF TransfoXL in transformers 4.30.2)")
    udir = user_dir(py)
    with tempfile.TemporaryDirectory(prefix="stretch-xl-generate-") as tmp:
        data = make_data(venv, tmp)
        dict_ids = {}
        with open(os.path.join(data, "dict.txt")) as f:
            for i, line in enumerate(f):
                dict_ids[line.split()[0]] = i + 4  # fairseq's 4 specials come first
        with open(os.path.join(tmp, "valid.txt")) as f:
            words = f.read().split()[:20]
        prompt = " ".join(words)
        context = [2] + [dict_ids[w] for w in words]
        for name, flags in CASES.items():
            save = os.path.join(tmp, name)
            p = testlib.run([os.path.join(venv, "bin", "fairseq-train"), data, "--user-dir", udir, "--save-dir", save] +
                            TRAIN + MODEL + flags, timeout=600)
            if p.returncode != 0:
                raise SystemExit(f"FAIL: fairseq-train {name} exited {p.returncode}:\n{p.stderr[-3000:]}")
            ckpt = os.path.join(save, "perturbed.pt")
            p = testlib.run([py, "-c", PERTURB, os.path.join(save, "checkpoint_last.pt"), ckpt])
            if p.returncode != 0:
                raise SystemExit(f"FAIL: perturbing {name}'s checkpoint exited {p.returncode}:\n{p.stderr[-3000:]}")
            greedy = ["--prompt", prompt, "--temperature", "0", "--max-len", str(NEW), "--print-scores"]
            for label, ov in (("as trained", "{}"), ("overrides", GEN_OVERRIDES)):
                hf = hf_generate(py, data, ckpt, udir, context, ov)
                st_ids, st_lps = scores(stretch_generate(stretch, [data, "--path", ckpt, "--model-overrides", ov] +
                                                         greedy))
                worst, at = max(((abs(a - b), (a, b)) for a, b in zip(st_lps, hf["logprobs"])),
                                default=(None, None)) if st_ids == hf["ids"] else (None, None)
                testlib.check(st_ids == hf["ids"] and len(set(hf["ids"])) >= 3 and worst is not None and
                              worst <= LP_TOL,
                              f"{name} {label} (HF mem_len {hf['mem_len']}): greedy ids stretch {st_ids} vs HF "
                              f"{hf['ids']}, log-probs max |diff| {worst} (stretch, HF: {at})")
                if label == "overrides":  # the memory matters: a shorter one gives other numbers
                    short_ids, short_lps = scores(stretch_generate(
                        stretch, [data, "--path", ckpt, "--model-overrides",
                                  "{'mem_len': 2, 'clamp_len': 5, 'same_length': True}"] + greedy))
                    diff = max(abs(a - b) for a, b in zip(short_lps, hf["logprobs"]))
                    testlib.check(short_ids != hf["ids"] or diff > 1e-3,
                                  f"{name}: mem_len 2 differs from HF at mem_len 12 (log-probs max |diff| {diff:.2e})")
            sample = [data, "--path", ckpt, "--prompt", prompt, "--temperature", "0.8", "--top-k", "10", "--top-p",
                      "0.9", "--max-len", "24", "--nbest", "2"]
            a = stretch_generate(stretch, sample + ["--seed", "3"])
            b = stretch_generate(stretch, sample + ["--seed", "3"])
            c = stretch_generate(stretch, sample + ["--seed", "4"])
            testlib.check(a == b and a != c and len(a.splitlines()) == 2,
                          f"{name}: sampling with --seed 3 twice gives the same 2 samples, --seed 4 others")

            # import-fairseq to a model file.
            model = os.path.join(tmp, name + ".st")
            p = testlib.run([stretch, "import-fairseq", ckpt, "--out", model, "--dict", os.path.join(data, "dict.txt")])
            testlib.check(p.returncode == 0 and os.path.isfile(model),
                          f"{name}: import-fairseq wrote {os.path.basename(model)} (exit {p.returncode}: "
                          f"{p.stderr.strip()[-300:]})")
            if p.returncode != 0:
                continue
            p = testlib.run([stretch, "info", model])
            testlib.check(p.returncode == 0 and "transformer_xl" in p.stdout,
                          f"{name}: stretch info names the transformer_xl family ({p.stdout.strip()[:200]!r})")
            for label, extra in (("as trained", []), ("overrides", OVERRIDES)):
                fs = fairseq_eval(py, data, ckpt, udir, extra)
                on_pt, _ = stretch_eval(stretch, data, ckpt, extra, tmp)
                on_file, _ = stretch_eval(stretch, data, model, extra, tmp)
                rel = abs(on_file["loss_base2"] - fs["loss_base2"]) / abs(fs["loss_base2"])
                testlib.check(on_file["loss_base2"] == on_pt["loss_base2"] and rel <= RTOL and
                              on_file["fairseq_ntokens"] == fs["tokens"],
                              f"{name} {label}: eval-lm on the model file {on_file['loss_base2']:.6f} = on the .pt "
                              f"{on_pt['loss_base2']:.6f}, fairseq {fs['loss_base2']:.6f} (rel {rel:.1e})")
            g_pt = stretch_generate(stretch, [data, "--path", ckpt] + greedy)
            g_file = stretch_generate(stretch, ["--path", model] + greedy)
            testlib.check(g_pt == g_file, f"{name}: generate on the model file (its stored dictionary) = on the .pt")
            back = os.path.join(tmp, name + "_back.pt")
            p = testlib.run([stretch, "export-fairseq", model, "--out", back])
            testlib.check(p.returncode == 0 and os.path.isfile(back),
                          f"{name}: export-fairseq wrote {os.path.basename(back)} (exit {p.returncode}: "
                          f"{p.stderr.strip()[-300:]})")
            if p.returncode != 0:
                continue
            for label, extra in (("as trained", []), ("overrides", OVERRIDES)):
                fs = fairseq_eval(py, data, back, udir, extra)
                on_file, _ = stretch_eval(stretch, data, model, extra, tmp)
                on_back, _ = stretch_eval(stretch, data, back, extra, tmp)
                rel = abs(on_file["loss_base2"] - fs["loss_base2"]) / abs(fs["loss_base2"])
                testlib.check(rel <= RTOL and on_back["loss_base2"] == on_file["loss_base2"] and
                              fs["tokens"] == on_file["fairseq_ntokens"],
                              f"{name} {label}: real fairseq-eval-lm on the exported .pt {fs['loss_base2']:.6f} = "
                              f"stretch on the model file {on_file['loss_base2']:.6f} (rel {rel:.1e}); stretch on the "
                              f"exported .pt {on_back['loss_base2']:.6f}")
    return testlib.finish()


if __name__ == "__main__":
    sys.exit(main())
