// autograd::GradReady on real models (one process): every parameter is reported exactly once
// during backward, and at the moment it is reported its gradient is already final — a copy taken
// then equals the gradient after backward bit for bit. That is what lets dist::BucketAllreduce
// send a bucket while backward goes on. Checked on a plain, a tied and an adaptive-softmax model
// (fused q/k/v views, tied weights, clusters a batch may leave unused), and on T5 / learned / rope
// positions (a table shared by all layers).
#include <gtest/gtest.h>

#include <cstring>

#include "autograd/grad_ready.h"
#include "autograd/tape.h"
#include "core/rng.h"
#include "models/transformer_lm/transformer_lm.h"
#include "train/update.h"

namespace stretch::train {
namespace {

void check_reports_final_gradients(models::TransformerLMConfig c) {
  models::TransformerLM model(c);
  model.init(3);
  Rng rng(11);
  const int64_t B = 2, T = 12;
  LmBatch b{Tensor::empty({B, T}, DType::I32), Tensor::empty({B, T}, DType::I32), B * T};
  for (int64_t i = 0; i < B * T; ++i) {
    b.src.i32()[i] = 4 + static_cast<int32_t>(rng.below(static_cast<uint64_t>(c.vocab_size - 4)));
    b.tgt.i32()[i] = 4 + static_cast<int32_t>(rng.below(static_cast<uint64_t>(c.vocab_size - 4)));
  }
  const std::vector<dist::GradSlice> slices = grad_slices(model);
  std::vector<std::vector<float>> at_report(slices.size());
  std::vector<int> times(slices.size(), 0);
  size_t closures = 0, reported_before_last = 0;
  model.params().zero_grad();
  {
    std::vector<autograd::LeafGrad> leaves;
    for (const auto& s : slices) leaves.push_back({.grad = s.grad, .numel = s.numel});
    autograd::GradReady ready(
        std::move(leaves),
        [&](size_t p) {
          at_report[p].assign(slices[p].grad, slices[p].grad + slices[p].numel);
          ++times[p];
        },
        [&] { ++closures; });
    autograd::GradWatchScope watch(&ready);
    autograd::Var hidden = model.features(b.src, {.mode = models::Mode::Train, .seed = 1});
    nn::HeadLoss head = model.head().loss(hidden, b.tgt, 1, nn::LossUse::Training);
    const size_t n_entries = autograd::tape().size();
    autograd::tape().backward(head.loss);
    EXPECT_EQ(closures, n_entries);
    reported_before_last = ready.reported();
  }
  for (size_t p = 0; p < slices.size(); ++p) {
    const std::string& name = model.params().items()[p].first;
    if (times[p] == 0) continue;  // no op took it (an adaptive cluster without targets): final after backward
    EXPECT_EQ(times[p], 1) << name;
    ASSERT_EQ(at_report[p].size(), static_cast<size_t>(slices[p].numel));
    EXPECT_EQ(std::memcmp(at_report[p].data(), slices[p].grad, at_report[p].size() * sizeof(float)), 0)
        << name << " changed after GradReady called it final";
  }
  EXPECT_GT(reported_before_last, slices.size() / 2);
}

models::TransformerLMConfig tiny() {
  models::TransformerLMConfig c = models::preset("transformer_lm_tiny");
  c.vocab_size = 60;
  c.decoder_layers = 2;
  c.decoder_embed_dim = 16;
  c.decoder_ffn_embed_dim = 32;
  c.decoder_attention_heads = 2;
  c.dropout = 0.1;
  return c;
}

TEST(GradReady, ReportsEachGradientOnceWhenFinal) { check_reports_final_gradients(tiny()); }

TEST(GradReady, TiedEmbedding) {
  auto c = tiny();
  c.share_decoder_input_output_embed = true;
  check_reports_final_gradients(c);
}

TEST(GradReady, AdaptiveSoftmaxAndInput) {
  auto c = tiny();
  c.adaptive_softmax_cutoff = "20,40";
  c.adaptive_input = true;
  c.adaptive_input_cutoff = "20,40";
  c.criterion = models::Criterion::AdaptiveLoss;
  check_reports_final_gradients(c);
}

// Position methods with their own parameters: T5's one bias table shared by every layer (first
// taken by layer 0, so final only at the end), learned positions (an embedding beside the tokens').
TEST(GradReady, SharedT5TableAndLearnedPositions) {
  for (models::PosMethod pos : {models::PosMethod::T5, models::PosMethod::Learned, models::PosMethod::Rope}) {
    auto c = tiny();
    c.pos = pos;
    check_reports_final_gradients(c);
  }
}

TEST(GradReady, RefusesOverlappingLeaves) {
  std::vector<float> g(10);
  EXPECT_THROW(autograd::GradReady({{.grad = g.data(), .numel = 6}, {.grad = g.data() + 4, .numel = 6}},
                                   [](size_t) {}, nullptr),
               std::exception);
}

}  // namespace
}  // namespace stretch::train
