// nn::ParameterList::zero_grad clears every gradient of a model whatever the thread count: the
// zeroing runs in chunks of 256 KiB over both threads, so the gradients here are made to span
// several chunks (the embedding's 300 × 512 floats = 600 KiB), to end inside one and to be views
// into a fused gradient (q, k, v); a parameter without a gradient buffer stays without one.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/threads.h"
#include "models/transformer_lm/transformer_lm.h"

namespace stretch::models {
namespace {

TEST(ParameterList, ZeroGradClearsEveryGradientOnTwoThreads) {
  TransformerLMConfig cfg = preset("transformer_lm_tiny");
  cfg.vocab_size = 300;
  cfg.decoder_embed_dim = 512;
  cfg.decoder_attention_heads = 8;
  cfg.decoder_ffn_embed_dim = 40;
  TransformerLM model(cfg);
  model.init(1);
  const auto& items = model.params().items();
  ASSERT_GT(items.size(), 4u);
  std::string untouched;  // a parameter whose gradient buffer is never created below
  for (const auto& [name, v] : items)
    if (!v.has_grad()) untouched = name;
  ASSERT_FALSE(untouched.empty());
  int64_t filled = 0;
  for (const auto& [name, v] : items) {
    if (name == untouched) continue;
    float* g = v.grad_data();  // creates the buffer
    for (int64_t i = 0; i < v.numel(); ++i) g[i] = i % 2 ? std::numeric_limits<float>::quiet_NaN() : 1.f + i;
    filled += v.numel();
  }
  ASSERT_GT(filled, 300 * 512);
  for (int threads : {2, 1}) {
    set_num_threads(threads);
    model.params().zero_grad();
    for (const auto& [name, v] : items) {
      if (name == untouched) {
        EXPECT_FALSE(v.has_grad()) << name;
        continue;
      }
      const float* g = v.grad_data();
      int64_t nonzero = 0;
      for (int64_t i = 0; i < v.numel(); ++i) nonzero += !(g[i] == 0.f && !std::signbit(g[i]));
      EXPECT_EQ(nonzero, 0) << name << " (" << v.numel() << " elements) after zero_grad on " << threads << " threads";
    }
    for (const auto& [name, v] : items)  // dirty again for the next thread count
      if (name != untouched) std::fill(v.grad_data(), v.grad_data() + v.numel(), -3.f);
  }
  set_num_threads(0);
}

}  // namespace
}  // namespace stretch::models
