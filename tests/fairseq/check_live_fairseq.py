#!/usr/bin/env python3
"""Reruns REAL fairseq-eval-lm (the oracle venv of tests/fairseq/setup_fairseq.sh) on committed
fixtures and checks that it still gives expected.json (so the committed expectations are what
fairseq computes, not something stretch wrote), then that stretch eval-lm on the same .pt agrees
(1e-4 relative in Loss base 2, equal token count), and a fork-style checkpoint imported with
--pos alibi against fairseq with the ALiBi fork's decoder (fairseq_alibi_patch.py). With --export, also the round trip
stretch → fairseq: `stretch export-fairseq` of an imported model is loaded and evaluated by
real fairseq-eval-lm and must equal stretch's own eval-lm of it.
Without the venv: tests/oracle_skip.py (a failure under CI=true, a loud skip elsewhere).
Usage: check_live_fairseq.py STRETCH_BINARY FAIRSEQ_VENV [--export]
"""
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.append(os.path.join(HERE, ".."))
import oracle_skip  # noqa: E402

FIX = os.path.join(HERE, "..", "fixtures", "fairseq")
# Three cases in CI (each fairseq start costs ~10 s); every case under STRETCH_LONG=1 (the ALiBi
# cases of expected.json, wiki103_fork, are checked below with the patch).
CASES = ["fp16/blocks", "argparse/window", "adaptive_tied/blocks"]
if os.environ.get("STRETCH_LONG") == "1":
    with open(os.path.join(FIX, "expected.json")) as f:
        CASES = sorted(k for k, v in json.load(f).items() if not v.get("alibi"))


def fairseq_eval(py, ckpt, flags, alibi=False):
    env = dict(os.environ, STRETCH_FAIRSEQ_ALIBI="1" if alibi else "0")
    p = subprocess.run([py, os.path.join(HERE, "fairseq_eval.py"), os.path.join(FIX, "data-bin"), "--path", ckpt,
                        "--cpu", "--gen-subset", "valid", "--max-tokens", "4096"] + flags,
                       capture_output=True, text=True, env=env)
    if p.returncode != 0:
        raise SystemExit(f"FAIL: fairseq-eval-lm on {ckpt} exited {p.returncode}:\n{p.stderr[-3000:]}")
    return json.loads(p.stdout)


def stretch_eval(stretch, ckpt, flags, tmp):
    rj = os.path.join(tmp, "r.json")
    p = subprocess.run([stretch, "eval-lm", os.path.join(FIX, "data-bin"), "--path", ckpt, "--gen-subset", "valid",
                        "--results-json", rj] + flags, capture_output=True, text=True)
    if p.returncode != 0:
        raise SystemExit(f"FAIL: stretch eval-lm {ckpt}: {p.stdout}{p.stderr}")
    with open(rj) as f:
        return json.load(f)


def main():
    stretch, venv = sys.argv[1], sys.argv[2]
    export = "--export" in sys.argv[3:]
    py = os.path.join(venv, "bin", "python")
    if not os.path.exists(os.path.join(venv, "bin", "fairseq-eval-lm")) or "fairseq" in oracle_skip.hidden():
        oracle_skip.missing("fairseq", install="tests/fairseq/setup_fairseq.sh (makes " + venv + ")",
                            detail="real fairseq-eval-lm")
    with open(os.path.join(FIX, "expected.json")) as f:
        expected = json.load(f)
    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        if not export:
            for case in CASES:
                exp = expected[case]
                ckpt = os.path.join(FIX, exp["checkpoint"])
                got = fairseq_eval(py, ckpt, exp["flags"])
                if abs(got["loss_base2"] - exp["loss_base2"]) > 1e-6 * exp["loss_base2"] or got["tokens"] != exp["tokens"]:
                    failures.append(f"{case}: fairseq now gives {got['loss_base2']!r}/{got['tokens']}, "
                                    f"expected.json has {exp['loss_base2']!r}/{exp['tokens']}")
                s = stretch_eval(stretch, ckpt, exp["flags"], tmp)
                rel = abs(s["loss_base2"] - got["loss_base2"]) / got["loss_base2"]
                print(f"{case}: fairseq {got['loss_base2']:.8f} stretch {s['loss_base2']:.8f} rel {rel:.1e}")
                if rel > 1e-4 or s["count"] != got["tokens"]:
                    failures.append(f"{case}: stretch {s['loss_base2']!r}/{s['count']} vs fairseq "
                                    f"{got['loss_base2']!r}/{got['tokens']}")
            # A fork-style checkpoint imported with --pos alibi against fairseq with the ALiBi fork's
            # decoder (fairseq_alibi_patch.py, REFERENCE §1), sliding window (and blocks when long).
            model = os.path.join(tmp, "fork.stretch")
            p = subprocess.run([stretch, "import-fairseq", os.path.join(FIX, "fork_style.pt"), "--pos", "alibi",
                                "--out", model], capture_output=True, text=True)
            if p.returncode != 0:
                raise SystemExit(f"FAIL: import-fairseq --pos alibi: {p.stdout}{p.stderr}")
            modes = [["--tokens-per-sample", "16", "--context-window", "8"]]
            if os.environ.get("STRETCH_LONG") == "1":
                modes.append(["--tokens-per-sample", "16"])
            for flags in modes:
                got = fairseq_eval(py, os.path.join(FIX, "fork_style.pt"), flags, alibi=True)
                s = stretch_eval(stretch, model, flags, tmp)
                rel = abs(s["loss_base2"] - got["loss_base2"]) / got["loss_base2"]
                print(f"fork_style ALiBi {flags}: fairseq+patch {got['loss_base2']:.8f} stretch {s['loss_base2']:.8f} "
                      f"rel {rel:.1e}")
                if rel > 1e-4 or s["count"] != got["tokens"] or s.get("pos") != "alibi":
                    failures.append(f"fork_style ALiBi {flags}: stretch {s['loss_base2']!r}/{s['count']} vs fairseq "
                                    f"with the ALiBi patch {got['loss_base2']!r}/{got['tokens']}")
                if abs(got["loss_base2"] - expected["sin_post_tied/window"]["loss_base2"]) < 1e-3:
                    failures.append("the ALiBi patch did not change fairseq's result (not applied?)")
            # The ALiBi cases of expected.json (wiki103_fork.pt) are still what patched fairseq computes.
            if os.environ.get("STRETCH_LONG") == "1":
                for case, exp in sorted(expected.items()):
                    if not exp.get("alibi"):
                        continue
                    got = fairseq_eval(py, os.path.join(FIX, exp["checkpoint"]), exp["flags"], alibi=True)
                    print(f"{case}: fairseq+patch {got['loss_base2']:.8f} expected.json {exp['loss_base2']:.8f}")
                    if abs(got["loss_base2"] - exp["loss_base2"]) > 1e-6 * exp["loss_base2"] or got["tokens"] != exp["tokens"]:
                        failures.append(f"{case}: fairseq with the ALiBi patch now gives {got['loss_base2']!r}")
        else:
            # (model, modes): four fairseq runs in CI, all nine models x both modes under STRETCH_LONG=1.
            blocks, window = ["--tokens-per-sample", "16"], ["--tokens-per-sample", "16", "--context-window", "8"]
            plan = [("learned_pre_untied", [blocks]), ("sin_post_tied", [window]), ("adaptive_tied", [window]),
                    ("adaptive_proj", [blocks])]
            if os.environ.get("STRETCH_LONG") == "1":
                plan = [(n, [blocks, window]) for n in ("learned_pre_untied", "sin_post_tied", "nopos_pre_tied",
                                                        "proj_post_untied", "adaptive_tied", "adaptive_untied",
                                                        "adaptive_noproj", "adaptive_softmax", "adaptive_proj")]
            for name, modes in plan:
                model = os.path.join(tmp, name + ".stretch")
                back = os.path.join(tmp, name + "_back.pt")
                for cmd in ([stretch, "import-fairseq", os.path.join(FIX, name + ".pt"), "--out", model],
                            [stretch, "export-fairseq", model, "--out", back]):
                    p = subprocess.run(cmd, capture_output=True, text=True)
                    if p.returncode != 0:
                        raise SystemExit(f"FAIL: {' '.join(cmd)}: {p.stdout}{p.stderr}")
                for flags in modes:
                    got = fairseq_eval(py, back, flags)
                    s = stretch_eval(stretch, model, flags, tmp)
                    orig = expected[name + ("/window" if "--context-window" in flags else "/blocks")]
                    rel = abs(s["loss_base2"] - got["loss_base2"]) / got["loss_base2"]
                    print(f"{name} {flags}: fairseq(exported) {got['loss_base2']:.8f} stretch {s['loss_base2']:.8f} "
                          f"fairseq(original) {orig['loss_base2']:.8f}")
                    if rel > 1e-4 or s["count"] != got["tokens"]:
                        failures.append(f"{name} {flags}: exported file in fairseq {got['loss_base2']!r} vs stretch "
                                        f"{s['loss_base2']!r}")
                    if abs(got["loss_base2"] - orig["loss_base2"]) > 1e-6 * orig["loss_base2"]:
                        failures.append(f"{name} {flags}: the round trip changed fairseq's result "
                                        f"({orig['loss_base2']!r} → {got['loss_base2']!r})")
    if failures:
        print("FAIL:\n  " + "\n  ".join(failures))
        return 1
    print("OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
