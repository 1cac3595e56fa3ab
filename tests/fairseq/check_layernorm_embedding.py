#!/usr/bin/env python3
"""--layernorm-embedding (issue 16) against REAL fairseq 0.12.2 (the venv of tests/fairseq/setup_fairseq.sh):
 1. `stretch train --layernorm-embedding` (transformer_lm_tiny, sinusoidal positions as fairseq's
    transformer_lm has them, 12 adam updates so decoder.layernorm_embedding.weight/bias move off 1/0);
 2. `stretch export-fairseq` of the checkpoint: the .pt holds args.layernorm_embedding = True and the two
    tensors, unchanged; real fairseq-eval-lm on it (its TransformerDecoder applies the LayerNorm) equals
    stretch eval-lm of the checkpoint (1e-4 relative in Loss base 2: float32 in both, equal token count);
 3. `stretch import-fairseq` of that .pt gives the same eval-lm result to the last digit;
 4. the control: fairseq on a copy of the export without the LayerNorm (args False, tensors removed)
    differs from it by over 100x stretch's distance to fairseq, so the agreement is not blind to the
    LayerNorm (this tiny model is near-unigram: the LayerNorm moves the loss by ~1e-3 only).
Without the venv: tests/oracle_skip.py (a failure under CI=true, a loud skip elsewhere).
Usage: check_layernorm_embedding.py STRETCH_BINARY FAIRSEQ_VENV
"""
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.append(os.path.join(HERE, ".."))
import oracle_skip  # noqa: E402

DATA = os.path.join(HERE, "..", "fixtures", "fairseq", "data-bin")
INSPECT = r'''
import json, sys, torch
ck = torch.load(sys.argv[1], map_location="cpu")
m = ck["model"]
w, b = m["decoder.layernorm_embedding.weight"], m["decoder.layernorm_embedding.bias"]
out = {"arg": bool(getattr(ck["args"], "layernorm_embedding", False)), "w": w.tolist(), "b": b.tolist()}
if len(sys.argv) > 2:  # write a copy without the LayerNorm
    del m["decoder.layernorm_embedding.weight"], m["decoder.layernorm_embedding.bias"]
    ck["args"].layernorm_embedding = False
    torch.save(ck, sys.argv[2])
print(json.dumps(out))
'''


def run(cmd, **kw):
    p = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if p.returncode != 0:
        raise SystemExit(f"FAIL: {' '.join(cmd)} exited {p.returncode}:\n{p.stdout[-2000:]}{p.stderr[-3000:]}")
    return p


def fairseq_eval(py, ckpt, flags):
    p = run([py, os.path.join(HERE, "fairseq_eval.py"), DATA, "--path", ckpt, "--cpu", "--gen-subset", "valid",
             "--max-tokens", "4096"] + flags, env=dict(os.environ, STRETCH_FAIRSEQ_ALIBI="0"))
    return json.loads(p.stdout)


def stretch_eval(stretch, model, flags, tmp):
    rj = os.path.join(tmp, "r.json")
    run([stretch, "eval-lm", DATA, "--path", model, "--gen-subset", "valid", "--results-json", rj] + flags)
    with open(rj) as f:
        return json.load(f)


def main():
    if len(sys.argv) != 3:
        print(__doc__)
        return 2
    stretch, venv = sys.argv[1], sys.argv[2]
    py = os.path.join(venv, "bin", "python")
    if not os.path.exists(os.path.join(venv, "bin", "fairseq-eval-lm")) or "fairseq" in oracle_skip.hidden():
        oracle_skip.missing("fairseq", install="tests/fairseq/setup_fairseq.sh (makes " + venv + ")",
                            detail="real fairseq-eval-lm")
    failures = []

    def check(cond, what):
        print(("ok   " if cond else "FAIL ") + what)
        if not cond:
            failures.append(what)

    with tempfile.TemporaryDirectory() as tmp:
        save = os.path.join(tmp, "run")
        run([stretch, "train", DATA, "--arch", "transformer_lm_tiny", "--pos", "sinusoidal", "--layernorm-embedding",
             "--optimizer", "adam", "--lr", "0.005", "--max-update", "12", "--tokens-per-sample", "16",
             "--batch-size", "8", "--save-dir", save, "--threads", "1", "--disable-validation",
             "--no-epoch-checkpoints", "--log-format", "none"])
        ckpt = os.path.join(save, "checkpoint_last.pt")
        exported = os.path.join(tmp, "exported.pt")
        run([stretch, "export-fairseq", ckpt, "--out", exported])
        without = os.path.join(tmp, "without.pt")
        info = json.loads(run([py, "-c", INSPECT, exported, without]).stdout.strip().splitlines()[-1])
        moved = max(abs(x - 1) for x in info["w"]) + max(abs(x) for x in info["b"])
        check(info["arg"] and len(info["w"]) == len(info["b"]) and moved > 1e-4,
              f"the export has args.layernorm_embedding {info['arg']} and decoder.layernorm_embedding.weight/bias "
              f"[{len(info['w'])}] moved {moved:.3g} off 1/0 by training")
        reimported = os.path.join(tmp, "reimported.stretch")
        run([stretch, "import-fairseq", exported, "--out", reimported])
        for flags in (["--tokens-per-sample", "16"],):
            got = fairseq_eval(py, exported, flags)
            s = stretch_eval(stretch, ckpt, flags, tmp)
            rel = abs(s["loss_base2"] - got["loss_base2"]) / got["loss_base2"]
            check(rel <= 1e-4 and s["count"] == got["tokens"],
                  f"{flags}: fairseq-eval-lm(exported) {got['loss_base2']:.8f}/{got['tokens']} vs stretch "
                  f"{s['loss_base2']:.8f}/{s['count']} (rel {rel:.1e})")
            r = stretch_eval(stretch, reimported, flags, tmp)
            check(r["loss_base2"] == s["loss_base2"] and r["count"] == s["count"],
                  f"{flags}: import-fairseq of the export {r['loss_base2']!r} == the checkpoint {s['loss_base2']!r}")
            ctl = fairseq_eval(py, without, flags)
            agree = abs(s["loss_base2"] - got["loss_base2"])
            effect = abs(ctl["loss_base2"] - got["loss_base2"])
            check(effect > max(100 * agree, 1e-5 * got["loss_base2"]),
                  f"{flags}: control: fairseq without the LayerNorm moves the loss by {effect:.2e}, over 100x "
                  f"stretch's distance to fairseq ({agree:.2e}) ({ctl['loss_base2']:.8f} vs {got['loss_base2']:.8f})")
    if failures:
        print(f"{len(failures)} failure(s)")
        return 1
    print("OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
