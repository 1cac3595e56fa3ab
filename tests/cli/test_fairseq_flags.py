#!/usr/bin/env python3
"""fairseq spellings and guards through the binary (issue 16):
  * train --decoder-learned-pos / --no-token-positional-embeddings = --pos learned / --pos none
    (the effective config of --dump-config), a contradiction with --pos is one usage error naming both;
  * --amp and --memory-efficient-bf16 behave exactly as --bf16 on this CPU (without bf16 matmul:
    the same refusal, naming the flag typed, exit 2, before the data is read);
  * eval-lm --model-overrides that would change a trained model's architecture ('pos' on a
    sinusoidal fairseq model, decoder_layers) is a usage error naming the key; the evaluation-time
    keys of REFERENCE §4.4's command (max_tokens, tokens_per_sample, max_target_positions) and
    dropout are accepted and give the same loss as no override;
  * eval-lm --results-path, --required-batch-size-multiple, --num-workers, --user-dir: accepted,
    each reported once as having no effect; --post-process with a value fairseq does not implement
    is refused naming it; --shard-id outside [0, --num-shards) is refused; --log-file accepted, writes nothing;
  * train's fairseq flags with no CPU meaning (--min-loss-scale, --empty-cache-freq, ...): accepted, each
    reported once, the config unchanged; --dataset-impl (train, eval-lm) and --model-parallel-size take
    only mmap and 1 and refuse another value naming it.
Usage: test_fairseq_flags.py STRETCH_BINARY
"""
import json
import os
import re
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from testlib import failures, check, finish, run  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
FIX = os.path.join(HERE, "..", "fixtures", "fairseq")
DATA = os.path.join(FIX, "data-bin")


def main():
    b = sys.argv[1]
    tiny = [b, "train", DATA, "--arch", "transformer_lm_tiny"]

    def pos_of(extra):
        p = run(tiny + extra + ["--dump-config"])
        return json.loads(p.stdout)["model"]["pos"] if p.returncode == 0 else p

    check(pos_of([]) == "alibi", "the default position method is alibi")
    check(pos_of(["--decoder-learned-pos"]) == "learned", "--decoder-learned-pos is --pos learned")
    check(pos_of(["--no-token-positional-embeddings"]) == "none", "--no-token-positional-embeddings is --pos none")
    check(pos_of(["--pos", "learned", "--decoder-learned-pos"]) == "learned", "--pos learned with its spelling agrees")
    p = pos_of(["--pos", "rope", "--decoder-learned-pos"])
    check(not isinstance(p, str) and p.returncode == 2 and "--decoder-learned-pos" in p.stderr
          and "--pos rope" in p.stderr, f"--pos rope --decoder-learned-pos: one usage error naming both "
          f"({getattr(p, 'stderr', p)!r})")
    p = pos_of(["--decoder-learned-pos", "--no-token-positional-embeddings"])
    check(not isinstance(p, str) and p.returncode == 2 and "--no-token-positional-embeddings" in p.stderr
          and "--decoder-learned-pos" in p.stderr, "the two fairseq spellings together: a usage error naming both")

    with tempfile.TemporaryDirectory() as tmp:
        nowhere = os.path.join(tmp, "no-such-data-bin")
        # (the rate ratio in --bf16's speed warning, cli/bf16_speed.h, is measured per run)
        def same(err):
            return re.sub(r"runs at [0-9.]+x", "runs at Rx", err)
        ref = run([b, "train", nowhere, "--arch", "transformer_lm_tiny", "--bf16"])
        for flag in ("--amp", "--memory-efficient-bf16"):
            p = run([b, "train", nowhere, "--arch", "transformer_lm_tiny", flag])
            check(p.returncode == ref.returncode and same(p.stderr.replace(flag, "--bf16")) == same(ref.stderr),
                  f"train {flag} behaves as --bf16 (exit {p.returncode} vs {ref.returncode}: {p.stderr.strip()!r})")
            if ref.returncode == 2 and "bf16 matmul is not supported" in ref.stderr:
                check(p.stderr.startswith(f"stretch: error: {flag}: bf16 matmul is not supported")
                      or f"{flag}: bf16 matmul is not supported" in p.stderr, f"the refusal names {flag}")

    ev = [b, "eval-lm", DATA, "--gen-subset", "valid", "--tokens-per-sample", "16", "--threads", "1"]
    sin = ev + ["--path", os.path.join(FIX, "sin_post_tied.pt")]
    for o, key in (("{'pos': 'alibi'}", "pos"), ("{'decoder_layers': 3}", "decoder_layers"),
                   ("{'decoder_normalize_before': True}", "decoder_normalize_before")):
        p = run(sin + ["--model-overrides", o])
        check(p.returncode == 2 and f"would change the architecture of the trained model: {key} " in p.stderr
              and "max_tokens" in p.stderr and "Evaluated" not in p.stdout,
              f"--model-overrides {o}: a usage error naming {key} ({p.stderr.strip()[-300:]!r})")
    plain = run(sin)
    check(plain.returncode == 0, f"plain eval-lm runs ({plain.stderr[-300:]!r})")
    loss = [x for x in plain.stdout.splitlines() if x.startswith("Loss")]
    for o in ("{'max_tokens': 16, 'tokens_per_sample': 16, 'max_target_positions': 16}", "{'dropout': 0.3}"):
        p = run(sin + ["--model-overrides", o])
        check(p.returncode == 0 and [x for x in p.stdout.splitlines() if x.startswith("Loss")] == loss,
              f"--model-overrides {o}: accepted, the same loss ({p.stderr.strip()[-200:]!r})")
    p = run(ev + ["--path", os.path.join(FIX, "learned_pre_untied.pt"), "--model-overrides",
                  "{'max_target_positions': 64}"])
    check(p.returncode == 0 and "max_target_positions is ignored for learned positions" in p.stderr,
          "max_target_positions on learned positions: ignored with the warning, not refused")

    p = run(sin + ["--results-path", "somewhere", "--required-batch-size-multiple", "8", "--num-workers", "4",
                   "--user-dir", "plugins", "--results-path", "again"])
    check(p.returncode == 0, f"eval-lm accepts the no-effect flags ({p.stderr[-300:]!r})")
    for flag in ("--results-path", "--required-batch-size-multiple", "--num-workers", "--user-dir"):
        check(p.stderr.count(f"{flag} has no effect in stretch") == 1, f"{flag} reported once")
    check([x for x in p.stdout.splitlines() if x.startswith("Loss")] == loss, "and they change nothing")
    p = run(sin + ["--post-process", "sentencepiece"])
    check(p.returncode == 2 and "--post-process sentencepiece is not implemented" in p.stderr,
          f"--post-process sentencepiece refused ({p.stderr.strip()!r})")
    p = run(sin + ["--remove-bpe", "@@ ", "--post-process", "@@ "])
    check(p.returncode == 2 and "--remove-bpe and --post-process" in p.stderr, "--remove-bpe with --post-process refused")
    p = run(sin + ["--num-shards", "2", "--shard-id", "2"])
    check(p.returncode == 2 and "--shard-id 2 must be in [0, --num-shards 2)" in p.stderr,
          f"--shard-id out of range refused ({p.stderr.strip()!r})")
    p = run(sin + ["--output-word-probs", "nll.tsv"])
    check(p.returncode == 2 and "nll.tsv" in p.stderr, "the former --output-word-probs FILE is a usage error naming FILE")
    p = run(sin + ["--log-format", "none"])
    check(p.returncode == 0 and "stretch | progress" not in p.stderr, "--log-format none: no progress lines")
    q = run(sin + ["--log-format", "simple"])
    check(q.returncode == 0 and "stretch | progress" in q.stderr, "--log-format simple: progress lines off a terminal")

    # train's fairseq flags without a CPU meaning: accepted, each reported once; the one-value ones
    # (fairseq's default is what stretch does) refused with another value, naming flag and value.
    tr = [b, "train", DATA, "--arch", "transformer_lm_tiny", "--max-tokens", "64", "--dump-config"]
    ignored = {"--threshold-loss-scale": "1", "--min-loss-scale": "1e-4", "--empty-cache-freq": "1",
               "--all-gather-list-size": "16384", "--heartbeat-timeout": "30", "--distributed-no-spawn": None,
               "--on-cpu-convert-precision": None, "--fixed-validation-seed": "7"}
    args = [x for f, v in ignored.items() for x in ([f] if v is None else [f, v])]
    p = run(tr + args + ["--dataset-impl", "mmap", "--model-parallel-size", "1"])
    base = run(tr)
    check(p.returncode == 0 and json.loads(p.stdout) == json.loads(base.stdout),
          f"train accepts {len(ignored)} no-effect flags, mmap and model parallel 1: the same config "
          f"({p.stderr.strip()[-300:]!r})")
    for flag in ignored:
        check(p.stderr.count(f"{flag} has no effect in stretch") == 1, f"train {flag} reported once")
    check("--dataset-impl" not in p.stderr and "--model-parallel-size" not in p.stderr,
          "mmap and --model-parallel-size 1: nothing to report")
    for cmd, flag, value, words in ((tr, "--dataset-impl", "lazy", "only mmap"),
                                    (tr, "--model-parallel-size", "2", "data parallel only"),
                                    (sin, "--dataset-impl", "cached", "only mmap")):
        p = run(cmd + [flag, value])
        check(p.returncode == 2 and f"{flag}: {value} is not allowed: only" in p.stderr and words in p.stderr,
              f"{cmd[1]} {flag} {value}: refused naming flag and value ({p.stderr.strip()[:200]!r})")
    p = run(sin + ["--log-file", "somewhere.log", "--memory-efficient-fp16", "--distributed-world-size", "1",
                   "--empty-cache-freq", "0", "--all-gather-list-size", "16384", "--model-parallel-size", "1"])
    check(p.returncode == 0 and not os.path.exists("somewhere.log")
          and [x for x in p.stdout.splitlines() if x.startswith("Loss")] == loss,
          f"eval-lm: --log-file writes nothing (as fairseq-eval-lm), the others change nothing ({p.stderr[-200:]!r})")
    for flag in ("--log-file", "--memory-efficient-fp16", "--distributed-world-size", "--empty-cache-freq",
                 "--all-gather-list-size"):
        check(p.stderr.count(f"{flag} has no effect in stretch") == 1, f"eval-lm {flag} reported once")

    sys.exit(finish())


if __name__ == "__main__":
    main()
