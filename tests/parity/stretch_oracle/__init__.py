"""stretch_oracle: the independent PyTorch oracle for stretch's parity tests.

Written from the specification (/work/shared/spec/REFERENCE.md §1-§4 and the checkpoint / parity-dump
contract in tests/parity/README.md), never from stretch's C++ code, so that a shared misreading
of the spec is the only way both sides can agree on a wrong answer.

Modules:
  errors          InputError: bad files or flags, reported with the path and a hint
  safetensors_io  read/write safetensors (the `safetensors` package, or a small fallback reader)
  positions       ALiBi slopes and bias, T5 buckets, RoPE, sinusoidal and learned positions
  model           fairseq transformer_lm (decoder-only) as a pure function of named parameters
  optim           fairseq NAG, fairseq Adam, cosine / fixed schedules, gradient normalisation + clip
  train           fairseq's training step (summed loss, / ntokens, clip, step, schedule)
  eval_lm         fairseq-eval-lm windows (non-overlapping and --context-window) and scoring
  compare         the error measure of the checks and their failure table
  fixtures        random configs, parameters, checkpoints and dumps for the self-tests
"""
