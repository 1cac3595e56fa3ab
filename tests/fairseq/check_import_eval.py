#!/usr/bin/env python3
"""stretch eval-lm on checkpoints REAL fairseq 0.12.2 trained (tests/fixtures/fairseq) equals
real fairseq-eval-lm's results recorded in expected.json by make_fixtures.sh (fairseq_eval.py):
Loss (base 2) within 1e-4 relative, the same scored-token count, and every token's NLL within
2e-5 nats (fairseq logs ln p to 6 decimals), non-overlapping (--tokens-per-sample 16) and
sliding window (--context-window 8). Each .pt is read directly (converted in memory) and also
through `stretch import-fairseq` (the model file must give the same numbers). The adaptive
fixtures (adaptive input / adaptive softmax, tied and untied) are among them; wiki103_fork.pt
(the ALiBi fork's released-model layout: fp16, argparse args with max_tokens) is imported with
--pos alibi and compared with fairseq + fairseq_alibi_patch.py (expected.json's "alibi" cases).
`stretch train --restore-file X.pt` (no resets) is refused naming --finetune-from-model. Includes
proj_post_untied (decoder_input_dim 16, decoder_output_dim 24: project_in_dim / project_out_dim) and
adaptive_proj (adaptive input over d_0 = 16, project_out_dim 32 -> 24 before the adaptive softmax).
Needs no oracle (the expectations are committed); test_live_fairseq.py reruns fairseq itself.
Usage: check_import_eval.py STRETCH_BINARY
"""
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
FIX = os.path.join(HERE, "..", "fixtures", "fairseq")
SUPPORTED = ["sin_post_tied", "learned_pre_untied", "nopos_pre_tied", "proj_post_untied", "fp16", "legacy", "argparse",
             "adaptive_tied", "adaptive_untied", "adaptive_noproj", "adaptive_softmax", "adaptive_proj", "wiki103_fork"]
ALIBI = {"wiki103_fork"}  # imported with --pos alibi; no direct .pt run (that keeps sinusoidal positions)


def run_stretch(stretch, ckpt, flags, tmp):
    rj, wp = os.path.join(tmp, "r.json"), os.path.join(tmp, "w.tsv")
    p = subprocess.run([stretch, "eval-lm", os.path.join(FIX, "data-bin"), "--path", ckpt, "--gen-subset", "valid",
                        "--results-json", rj, "--dump-nll", wp] + flags,
                       capture_output=True, text=True)
    if p.returncode != 0:
        raise SystemExit(f"FAIL: stretch eval-lm {ckpt} {flags} exited {p.returncode}:\n{p.stdout}{p.stderr}")
    with open(rj) as f:
        r = json.load(f)
    with open(wp) as f:
        nll = [float(line.split("\t")[2]) for line in f.read().splitlines()[1:]]
    return r, nll, p.stdout + p.stderr


def main():
    stretch = sys.argv[1]
    with open(os.path.join(FIX, "expected.json")) as f:
        expected = json.load(f)
    failures, checked = [], 0
    with tempfile.TemporaryDirectory() as tmp:
        converted = {}
        for name in SUPPORTED:
            out = os.path.join(tmp, name + ".stretch")
            extra = ["--pos", "alibi"] if name in ALIBI else []
            p = subprocess.run([stretch, "import-fairseq", os.path.join(FIX, name + ".pt"), "--out", out] + extra,
                               capture_output=True, text=True)
            if p.returncode != 0:
                raise SystemExit(f"FAIL: import-fairseq {name}: {p.stdout}{p.stderr}")
            if "dictionary" not in p.stdout:
                failures.append(f"{name}: import-fairseq did not say which dictionary it stored")
            if name in ALIBI and ("'max_tokens'" not in p.stdout or "ALiBi" not in p.stdout):
                failures.append(f"{name}: import-fairseq --pos alibi did not report the fork trace and ALiBi: {p.stdout}")
            converted[name] = out
        for case, exp in sorted(expected.items()):
            name = case.split("/")[0]
            if name not in SUPPORTED:
                continue
            if bool(exp.get("alibi")) != (name in ALIBI):
                failures.append(f"{case}: expected.json's alibi flag {exp.get('alibi')} does not match the test's")
            runs = [("imported", converted[name])]
            if name not in ALIBI:
                runs.insert(0, ("direct .pt", os.path.join(FIX, exp["checkpoint"])))
            for label, path in runs:
                r, nll, log = run_stretch(stretch, path, exp["flags"], tmp)
                checked += 1
                rel = abs(r["loss_base2"] - exp["loss_base2"]) / exp["loss_base2"]
                where = f"{case} ({label})"
                if label == "direct .pt" and "converted in memory" not in log:
                    failures.append(f"{where}: no line saying the .pt was converted in memory")
                if rel > 1e-4:
                    failures.append(f"{where}: loss {r['loss_base2']!r} vs fairseq {exp['loss_base2']!r} (rel {rel:.2e})")
                if r["count"] != exp["tokens"]:
                    failures.append(f"{where}: {r['count']} tokens scored vs fairseq {exp['tokens']}")
                if len(nll) != len(exp["nll"]):
                    failures.append(f"{where}: {len(nll)} per-token NLLs vs fairseq {len(exp['nll'])}")
                else:
                    worst = max(abs(a - b) for a, b in zip(nll, exp["nll"]))
                    if worst > 2e-5:
                        failures.append(f"{where}: per-token NLL differs by up to {worst:.2e} nats")
                print(f"{where}: loss {r['loss_base2']:.8f} fairseq {exp['loss_base2']:.8f} rel {rel:.1e}, "
                      f"{r['count']} tokens")
        # --pos alibi (the ALiBi fork's files): accepted for sinusoidal checkpoints (the stored
        # entry is unused, so the numbers change), a usage error for learned positions.
        p = subprocess.run([stretch, "import-fairseq", os.path.join(FIX, "sin_post_tied.pt"), "--pos", "alibi",
                            "--out", os.path.join(tmp, "alibi.stretch")], capture_output=True, text=True)
        if p.returncode != 0 or "ALiBi" not in p.stdout:
            failures.append(f"--pos alibi on sin_post_tied: rc {p.returncode}: {p.stdout}{p.stderr}")
        else:
            r, _, _ = run_stretch(stretch, os.path.join(tmp, "alibi.stretch"), ["--tokens-per-sample", "16"], tmp)
            if r.get("pos") != "alibi" or abs(r["loss_base2"] - expected["sin_post_tied/blocks"]["loss_base2"]) < 1e-3:
                failures.append(f"--pos alibi: evaluated as {r.get('pos')} with loss {r['loss_base2']}")
        p = subprocess.run([stretch, "import-fairseq", os.path.join(FIX, "learned_pre_untied.pt"), "--pos", "alibi",
                            "--out", os.path.join(tmp, "bad.stretch")], capture_output=True, text=True)
        if p.returncode != 2 or "learned" not in p.stderr or os.path.exists(os.path.join(tmp, "bad.stretch")):
            failures.append(f"--pos alibi on learned positions: rc {p.returncode} {p.stderr}")
        # The ALiBi fork's trace (fork_style.pt: cfg.model.max_tokens, sinusoidal positions): the
        # import says so and keeps sinusoidal; a file without it (sin_post_tied) gets no such line.
        for name, want in (("fork_style", True), ("sin_post_tied", False)):
            p = subprocess.run([stretch, "import-fairseq", os.path.join(FIX, name + ".pt"), "--out",
                                os.path.join(tmp, name + ".trace")], capture_output=True, text=True)
            said = "'max_tokens'" in p.stdout and "--pos alibi" in p.stdout
            if p.returncode != 0 or said != want:
                failures.append(f"{name}: fork trace line expected={want}, rc {p.returncode}: {p.stdout}")
        r, _, log = run_stretch(stretch, os.path.join(FIX, "fork_style.pt"), ["--tokens-per-sample", "16"], tmp)
        if "max_tokens" not in log or abs(r["loss_base2"] - expected["sin_post_tied/blocks"]["loss_base2"]) > 1e-4 * 6:
            failures.append(f"fork_style.pt direct: no max_tokens warning or loss {r['loss_base2']} (sinusoidal expected)")
        # --restore-file of a fairseq .pt (without the resets): refused, naming the file and the way
        # that works (--finetune-from-model; fairseq's optimizer state is not imported), nothing written.
        save = os.path.join(tmp, "ft")
        p = subprocess.run([stretch, "train", os.path.join(FIX, "data-bin"), "--arch", "transformer_lm_wiki103",
                            "--restore-file", os.path.join(FIX, "adaptive_tied.pt"), "--save-dir", save,
                            "--max-update", "1", "--max-tokens", "256", "--tokens-per-sample", "32", "--pos", "sinusoidal",
                            "--adaptive-input-cutoff", "100,300", "--adaptive-softmax-cutoff", "100,300"], capture_output=True,
                           text=True)
        if p.returncode == 0 or "adaptive_tied.pt" not in p.stderr or "--finetune-from-model" not in p.stderr \
                or (os.path.exists(save) and [f for f in os.listdir(save) if f.endswith(".pt")]):
            failures.append(f"--restore-file fairseq .pt: rc {p.returncode}, {p.stderr[-500:]}")
    if checked < 2 * 2 * len(SUPPORTED) - 2 * len(ALIBI):
        failures.append(f"only {checked} comparisons ran")
    if failures:
        print("FAIL:\n  " + "\n  ".join(failures))
        return 1
    print(f"OK: {checked} stretch eval-lm runs equal real fairseq-eval-lm")
    return 0


if __name__ == "__main__":
    sys.exit(main())
