// eval/masked_lm_eval.h — `stretch eval-lm --task masked_lm`: masked-token perplexity of an
// encoder (the roberta family) at any block length, fairseq's masked_lm validation as a tool.
// Contract: the split is cut as --task masked_lm cuts it for training (train/masked_lm_data.h:
// <s> + blocks of L − 1 tokens, L = --tokens-per-sample or the model's training length,
// --sample-break-mode none), masked with fairseq's draws for seed 1 and epoch 1 (the validation
// masks of a run with fairseq's default --seed 1) at the default 15% / 80-10-10, so every model
// and every length is scored on the same kind of masked positions; the blocks differ with L (a
// longer L gives each masked token more context on both sides). Score: the masked_lm criterion's
// summed NLL over the chosen positions, loss₂ = Σ / count / ln 2, perplexity 2^loss₂. Batches of
// --max-tokens (default max(4096, L)) or --batch-size rows. A decoder model, --context-window,
// --kv-cache or word output with this task is a usage error.
#pragma once
#include "eval/eval_lm.h"

namespace stretch::eval {

int run_masked_lm_eval(const EvalLmConfig& cfg);

}  // namespace stretch::eval
