// tests/eval/eval_test_util.h — fixtures for the eval tests: small models with fixed weights,
// token streams, a data-bin made by `stretch preprocess` from a synthetic corpus, and
// checkpoints that match its dictionary.
// The reference evaluation here is written from REFERENCE.md §4.4's direct definition (token k
// of block b is predicted from s'[max(0, b(L−c) − c) : k + 1], s' = eos + stream), one window
// per full forward pass with a double-precision log-softmax over all logits — not from
// data::EvalWindows' collater or eval-lm's scorer, which are what it checks.
#pragma once
#include <cmath>
#include <string>
#include <vector>

#include "autograd/tape.h"
#include "core/rng.h"
#include "data/data_test_util.h"
#include "data/dictionary.h"
#include "models/transformer_lm/transformer_lm.h"
#include "train/checkpoint.h"

namespace stretch::eval::testing {

using data::testing::run_stretch;
using data::testing::TempDir;
using data::testing::read_file;
using data::testing::write_file;

// 2 layers, C 32, 4 heads, F 64, no dropout; trained length 8, learned table 16.
inline models::TransformerLMConfig tiny_config(models::PosMethod pos, int64_t vocab) {
  models::TransformerLMConfig c = models::preset("transformer_lm_tiny");
  c.vocab_size = vocab;
  c.decoder_layers = 2;
  c.decoder_embed_dim = 32;
  c.decoder_ffn_embed_dim = 64;
  c.decoder_attention_heads = 4;
  c.pos = pos;
  c.tokens_per_sample = 8;
  c.max_target_positions = 16;
  c.dropout = 0;
  return c;
}

inline std::unique_ptr<models::TransformerLM> tiny_model(models::PosMethod pos, int64_t vocab, uint64_t seed = 5) {
  auto m = std::make_unique<models::TransformerLM>(tiny_config(pos, vocab));
  m->init(seed);
  return m;
}

// Ids in [4, vocab): no specials inside the stream except eos, which ends each "line".
inline std::vector<int32_t> random_stream(int64_t n, int64_t vocab, uint64_t seed) {
  Rng rng(seed, 17);
  std::vector<int32_t> s(static_cast<size_t>(n));
  for (auto& t : s) t = rng.below(9) == 0 ? 2 : 4 + static_cast<int32_t>(rng.below(static_cast<uint64_t>(vocab - 4)));
  return s;
}

// −log p(target) at each position of one window (full forward, batch 1), in double.
inline std::vector<double> window_nll(models::TransformerLM& model, const std::vector<int32_t>& input,
                                      const std::vector<int32_t>& targets) {
  autograd::NoGradGuard no_grad;
  const int64_t W = static_cast<int64_t>(input.size()), V = model.config().vocab_size;
  Tensor src = Tensor::empty({1, W}, DType::I32);
  std::copy(input.begin(), input.end(), src.i32());
  Tensor logits = model.forward(src, {}).value();  // [1, W, V]
  std::vector<double> out;
  for (int64_t t = 0; t < static_cast<int64_t>(targets.size()); ++t) {
    const float* l = logits.f32() + t * V;
    double mx = l[0];
    for (int64_t v = 1; v < V; ++v) mx = std::max(mx, static_cast<double>(l[v]));
    double z = 0;
    for (int64_t v = 0; v < V; ++v) z += std::exp(static_cast<double>(l[v]) - mx);
    out.push_back(std::log(z) + mx - l[targets[static_cast<size_t>(t)]]);
  }
  return out;
}

struct Reference {
  double nll_sum = 0;  // nats
  int64_t count = 0;
};

// fairseq-eval-lm's figures by the direct definition (see the file comment).
inline Reference reference_eval(models::TransformerLM& model, const std::vector<int32_t>& stream, int64_t L,
                                int64_t c, int32_t eos = 2) {
  std::vector<int32_t> shifted = {eos};  // s'[i] is the input that predicts stream[i]
  shifted.insert(shifted.end(), stream.begin(), stream.end() - 1);
  const int64_t N = static_cast<int64_t>(stream.size()), block = L - c;
  Reference r;
  for (int64_t b0 = 0; b0 < N; b0 += block) {
    const int64_t b1 = std::min(N, b0 + block), w0 = std::max<int64_t>(0, b0 - c);
    std::vector<int32_t> input(shifted.begin() + w0, shifted.begin() + b1);
    std::vector<int32_t> targets(stream.begin() + w0, stream.begin() + b1);
    const std::vector<double> nll = window_nll(model, input, targets);
    for (int64_t k = b0; k < b1; ++k) r.nll_sum += nll[static_cast<size_t>(k - w0)];
    r.count += b1 - b0;
  }
  return r;
}

// A synthetic corpus: `lines` lines of 3-9 words from a 40-word vocabulary (seeded).
inline std::string synthetic_text(int64_t lines, uint64_t seed) {
  Rng rng(seed, 3);
  std::string text;
  for (int64_t l = 0; l < lines; ++l) {
    const int64_t n = 3 + static_cast<int64_t>(rng.below(7));
    for (int64_t i = 0; i < n; ++i) text += (i ? " w" : "w") + std::to_string(rng.below(40));
    text += "\n";
  }
  return text;
}

inline std::string q(const std::string& s) { return "'" + s + "'"; }

// DIR/bin: a data-bin (train, valid, test) made by the stretch binary from synthetic text.
inline std::string make_data_bin(const TempDir& dir, const std::string& name = "bin", bool byte_level = false) {
  write_file(dir / (name + ".train.txt"), synthetic_text(60, 1));
  write_file(dir / (name + ".valid.txt"), synthetic_text(12, 2));
  write_file(dir / (name + ".test.txt"), synthetic_text(10, 3));
  const auto r = run_stretch("preprocess --only-source --trainpref " + q(dir / (name + ".train.txt")) +
                             " --validpref " + q(dir / (name + ".valid.txt")) + " --testpref " +
                             q(dir / (name + ".test.txt")) + " --destdir " + q(dir / name) +
                             (byte_level ? " --byte-level" : ""));
  if (r.exit_code != 0) throw std::runtime_error("preprocess failed: " + r.output);
  return dir / name;
}

// Saves a fresh tiny model matching DATA/dict.txt; returns the checkpoint path.
inline std::string save_tiny_checkpoint(const std::string& data_dir, const std::string& path, models::PosMethod pos,
                                        uint64_t seed = 5) {
  data::Dictionary dict = data::Dictionary::load(data_dir + "/dict.txt");
  auto model = tiny_model(pos, dict.size(), seed);
  train::save_checkpoint(path, *model, {.dict_hash = dict.content_hash(), .dictionary = dict.to_text()});
  return path;
}

}  // namespace stretch::eval::testing
