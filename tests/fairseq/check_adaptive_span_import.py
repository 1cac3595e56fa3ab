#!/usr/bin/env python3
"""stretch eval-lm on adaptive_span checkpoints REAL fairseq 0.12.2 trained with its
examples/adaptive_span (tests/fixtures/fairseq_span, make_fixtures.sh) equals real fairseq-eval-lm
(`--user-dir examples/adaptive_span --task truncated_bptt_lm --batch-size B --tokens-per-sample T`)
as recorded in expected.json: the Loss (base 2) line as printed (4 decimals) identical and within
1e-4 relative at full precision, the "Evaluated N tokens" figure (fairseq's B·T per step) and the
scored-token count equal, and every token's NLL within 2e-5 nats (fairseq logs ln p to 6
decimals), in fairseq's order (step by step, row by row). Each .pt is read directly (converted in
memory) and through `stretch import-fairseq` (the b2 cases; all under STRETCH_LONG=1). Cases: spans
per head, per layer (adapt_span_layer), fp16 weights and an argparse-era file (span_args: an `args`
Namespace instead of `cfg`); batch 8 / 2 / 4 and blocks 32 / 16 (the span cache carried over up to
15 steps).
Bad input: `--pos alibi` on an adaptive_span file is a usage error naming --pos, nothing written.
Needs no oracle (the expectations are committed). With --live VENV it also reruns real fairseq
on one case (expected.json must still be what fairseq computes) and checks the way back:
`stretch export-fairseq` of an imported model, evaluated by real fairseq-eval-lm, equals stretch's
own eval-lm of it (tests/oracle_skip.py when the venv is missing: a failure under CI=true).
Usage: check_adaptive_span_import.py STRETCH_BINARY [--live FAIRSEQ_VENV]
"""
import json
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.append(os.path.join(HERE, ".."))
FIX = os.path.join(HERE, "..", "fixtures", "fairseq_span")
DATA = os.path.join(HERE, "..", "fixtures", "fairseq", "data-bin")
NAMES = ["span_head", "span_layer", "span_fp16", "span_args"]
LONG = os.environ.get("STRETCH_LONG") == "1"


def run_stretch(stretch, ckpt, flags, tmp):
    rj, wp = os.path.join(tmp, "r.json"), os.path.join(tmp, "w.tsv")
    p = subprocess.run([stretch, "eval-lm", DATA, "--path", ckpt, "--gen-subset", "valid", "--results-json", rj,
                        "--dump-nll", wp] + flags, capture_output=True, text=True)
    if p.returncode != 0:
        raise SystemExit(f"FAIL: stretch eval-lm {ckpt} {flags} exited {p.returncode}:\n{p.stdout}{p.stderr}")
    with open(rj) as f:
        r = json.load(f)
    with open(wp) as f:
        nll = [float(line.split("\t")[2]) for line in f.read().splitlines()[1:]]
    return r, nll, p.stdout + p.stderr


def compare(where, r, nll, log, exp, failures):
    rel = abs(r["loss_base2"] - exp["loss_base2"]) / exp["loss_base2"]
    printed = re.search(r"Loss \(base 2\): ([0-9.]+)", log)
    evaluated = re.search(r"Evaluated (\d+) tokens", log)
    if rel > 1e-4:
        failures.append(f"{where}: loss {r['loss_base2']!r} vs fairseq {exp['loss_base2']!r} (rel {rel:.2e})")
    if not printed or printed.group(1) != exp["printed_loss"]:
        failures.append(f"{where}: printed Loss (base 2) {printed and printed.group(1)} vs fairseq's {exp['printed_loss']}")
    if not evaluated or int(evaluated.group(1)) != exp["tokens"] or r.get("fairseq_ntokens") != exp["tokens"]:
        failures.append(f"{where}: 'Evaluated {evaluated and evaluated.group(1)} tokens' vs fairseq's {exp['tokens']}")
    if r["count"] != len(exp["nll"]) or len(nll) != len(exp["nll"]):
        failures.append(f"{where}: {r['count']} scored ({len(nll)} dumped) vs fairseq's {len(exp['nll'])}")
    else:
        worst = max(abs(a - b) for a, b in zip(nll, exp["nll"]))
        if worst > 2e-5:
            failures.append(f"{where}: per-token NLL differs by up to {worst:.2e} nats")
    print(f"{where}: loss {r['loss_base2']:.8f} fairseq {exp['loss_base2']:.8f} rel {rel:.1e}, "
          f"printed {printed and printed.group(1)}, {r['count']} scored")
    return rel


def live(stretch, venv, expected, tmp, failures):
    import oracle_skip  # noqa: E402
    py = os.path.join(venv, "bin", "python")
    if not os.path.exists(os.path.join(venv, "bin", "fairseq-eval-lm")) or "fairseq" in oracle_skip.hidden():
        oracle_skip.missing("fairseq", install="tests/fairseq/setup_fairseq.sh (makes " + venv + ")",
                            detail="real fairseq-eval-lm with examples/adaptive_span")
    user_dir = subprocess.run([py, "-c", "import fairseq, os; print(os.path.join(os.path.dirname(fairseq.__file__), "
                               "'examples', 'adaptive_span'))"], capture_output=True, text=True).stdout.strip()
    if not os.path.exists(os.path.join(user_dir, "adaptive_span_model.py")):
        failures.append(f"no examples/adaptive_span in {venv}")
        return

    def fairseq_eval(ckpt, flags):
        p = subprocess.run([py, os.path.join(HERE, "fairseq_eval.py"), DATA, "--path", ckpt, "--cpu", "--gen-subset",
                            "valid", "--user-dir", user_dir] + flags, capture_output=True, text=True)
        if p.returncode != 0:
            raise SystemExit(f"FAIL: fairseq-eval-lm on {ckpt} exited {p.returncode}:\n{p.stderr[-3000:]}")
        return json.loads(p.stdout)

    case = "span_head/b2"
    exp = expected[case]
    got = fairseq_eval(os.path.join(FIX, exp["checkpoint"]), exp["flags"])
    if abs(got["loss_base2"] - exp["loss_base2"]) > 1e-6 * exp["loss_base2"] or got["tokens"] != exp["tokens"]:
        failures.append(f"{case}: fairseq now gives {got['loss_base2']!r}/{got['tokens']}, expected.json has "
                        f"{exp['loss_base2']!r}/{exp['tokens']}")
    print(f"{case}: real fairseq now {got['loss_base2']:.8f}, expected.json {exp['loss_base2']:.8f}")
    # The way back: import → export-fairseq → real fairseq-eval-lm = stretch eval-lm of the model.
    for name, mode in (("span_head", "b8"), ("span_layer", "b2")):
        model, back = os.path.join(tmp, name + ".live"), os.path.join(tmp, name + "_back.pt")
        for cmd in ([stretch, "import-fairseq", os.path.join(FIX, name + ".pt"), "--out", model],
                    [stretch, "export-fairseq", model, "--out", back]):
            p = subprocess.run(cmd, capture_output=True, text=True)
            if p.returncode != 0:
                raise SystemExit(f"FAIL: {' '.join(cmd)}: {p.stdout}{p.stderr}")
        exp = expected[name + "/" + mode]
        got = fairseq_eval(back, exp["flags"])
        r, nll, log = run_stretch(stretch, model, exp["flags"], tmp)
        compare(f"{name}/{mode} exported, in real fairseq", r, nll, log, got, failures)
        if abs(got["loss_base2"] - exp["loss_base2"]) > 1e-6 * exp["loss_base2"]:
            failures.append(f"{name}/{mode}: the round trip changed fairseq's result "
                            f"({exp['loss_base2']!r} → {got['loss_base2']!r})")


def main():
    stretch = sys.argv[1]
    venv = sys.argv[sys.argv.index("--live") + 1] if "--live" in sys.argv else None
    with open(os.path.join(FIX, "expected.json")) as f:
        expected = json.load(f)
    failures, checked, worst = [], 0, 0.0
    with tempfile.TemporaryDirectory() as tmp:
        if venv:
            live(stretch, venv, expected, tmp, failures)
        else:
            converted = {}
            for name in NAMES:
                out = os.path.join(tmp, name + ".stretch")
                p = subprocess.run([stretch, "import-fairseq", os.path.join(FIX, name + ".pt"), "--out", out,
                                    "--dict", os.path.join(DATA, "dict.txt")], capture_output=True, text=True)
                if p.returncode != 0 or "fairseq adaptive_span" not in p.stdout or "spans per" not in p.stdout:
                    raise SystemExit(f"FAIL: import-fairseq {name}: rc {p.returncode}\n{p.stdout}{p.stderr}")
                want = "spans per layer" if name == "span_layer" else "spans per head"
                if want not in p.stdout:
                    failures.append(f"{name}: import-fairseq did not say '{want}': {p.stdout}")
                converted[name] = out
            for case, exp in sorted(expected.items()):
                name = case.split("/")[0]
                runs = [("direct .pt", os.path.join(FIX, exp["checkpoint"]))]
                if case.endswith("/b2") or LONG:  # the model file gives the same numbers (all cases when long)
                    runs.append(("imported", converted[name]))
                for label, path in runs:
                    r, nll, log = run_stretch(stretch, path, exp["flags"], tmp)
                    checked += 1
                    if label == "direct .pt" and "converted in memory" not in log:
                        failures.append(f"{case}: no line saying the .pt was converted in memory")
                    worst = max(worst, compare(f"{case} ({label})", r, nll, log, exp, failures))
            if checked != (2 * len(expected) if LONG else len(expected) + len(NAMES)) or len(expected) != 12:
                failures.append(f"only {checked} comparisons over {len(expected)} cases ran")
            # --pos alibi is for the ALiBi fork's transformer_lm files: a usage error here, nothing written.
            bad = os.path.join(tmp, "bad.stretch")
            p = subprocess.run([stretch, "import-fairseq", os.path.join(FIX, "span_head.pt"), "--pos", "alibi", "--out",
                                bad], capture_output=True, text=True)
            if p.returncode != 2 or "--pos" not in p.stderr or "adaptive_span" not in p.stderr or os.path.exists(bad):
                failures.append(f"--pos alibi on an adaptive_span file: rc {p.returncode} {p.stderr}")
    if failures:
        print("FAIL:\n  " + "\n  ".join(failures))
        return 1
    print(f"OK: {checked} stretch eval-lm runs equal real fairseq-eval-lm (worst rel {worst:.1e})" if not venv else "OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
