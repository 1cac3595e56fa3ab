// tests/eval/test_score_chunks.cpp — eval-lm's scorer projects the output layer in chunks of rows
// (eval::kScoreChunkBytes = 32 MiB of logits at a time) so a long window never holds its whole
// [N, V] logit matrix. With V = 32,768 a chunk is 256 rows, so a 1,200-token window is scored in
// five chunks through the default sizing; the loss must
// equal the one-shot computation (full logits [T, V], cross-entropy over every row).
// Tolerance: both sides sum the same per-row float NLLs; the scorer accumulates them in double
// in row order, the check does too, so the only difference is the row-chunked GEMM (different
// blocking, ≲ 1e-6 relative per logit): 1e-5 relative on the mean loss.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "autograd/functions.h"
#include "autograd/tape.h"
#include "core/rng.h"
#include "data/indexed_dataset.h"
#include "eval/eval_lm.h"
#include "models/transformer_lm/transformer_lm.h"

namespace stretch::eval {
namespace {

TEST(EvalScoreChunks, ChunkedOutputLayerMatchesOneShot) {
  models::TransformerLMConfig c = models::preset("transformer_lm_tiny");
  c.vocab_size = 32768;
  c.dropout = 0;
  c.tokens_per_sample = 1200;
  models::TransformerLM model(c);
  model.init(3);
  const int64_t T = 1200;
  std::vector<int32_t> tokens(T);
  Rng rng(5, 1);
  for (auto& t : tokens) t = 4 + static_cast<int32_t>(rng.below(static_cast<uint64_t>(c.vocab_size - 4)));
  data::MemoryTokenStream stream(tokens, {T});
  EvalOptions o;
  o.tokens_per_sample = T;
  o.max_sentences = 1;
  const EvalResult r = evaluate(model, stream, o);
  ASSERT_EQ(r.count, T);

  // One shot: the window's input is </s> then the first T − 1 tokens (eos = 2), targets all T.
  autograd::NoGradGuard no_grad;
  Tensor src = Tensor::empty({1, T}, DType::I32), tgt = Tensor::empty({T}, DType::I32);
  src.i32()[0] = o.eos;
  for (int64_t i = 0; i < T; ++i) {
    if (i + 1 < T) src.i32()[i + 1] = tokens[i];
    tgt.i32()[i] = tokens[i];
  }
  autograd::Var logits = model.forward(src, {});
  int64_t count = 0;
  autograd::Var loss = autograd::cross_entropy(logits, tgt, -1000, ops::Reduction::Sum, &count);
  const double mean_bits = loss.value().f32()[0] / static_cast<double>(count) / std::log(2.0);
  EXPECT_NEAR(r.loss2, mean_bits, 1e-5 * mean_bits);
}

}  // namespace
}  // namespace stretch::eval
