// models/transformer_xl/transformer_xl.cpp — see transformer_xl.h.
#include "models/transformer_xl/transformer_xl.h"

#include <cmath>
#include <string>
#include <vector>

#include "autograd/functions.h"
#include "autograd/tape.h"
#include "core/error.h"
#include "models/transformer_lm/hidden_memory.h"
#include "models/transformer_xl/rel_attention.h"
#include "nn/projected_adaptive_softmax.h"
#include "nn/softmax_head.h"

namespace stretch::models {
using namespace stretch::autograd;
namespace {

constexpr uint64_t kMaxMicro = 1u << 8, kMaxLayerSlots = 1u << 12;  // sites 0..4 < 16
constexpr float kInitStd = 0.02f;                                   // HF's init_std
constexpr float kProjInitStd = 0.01f;                               // HF's proj_init_std
// Generation at mem_len 0 keeps every earlier token's layer inputs (HF then re-runs the whole sequence).
constexpr int64_t kUnboundedMemory = int64_t{1} << 62;

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

}  // namespace

Tensor xl_relative_embedding(int64_t rows, int64_t dim, int64_t clamp) {
  Tensor out = Tensor::empty({rows, dim});  // [rows, C]
  const int64_t half = dim / 2;
  std::vector<double> freq(static_cast<size_t>(half));  // [C/2] f_k
  for (int64_t k = 0; k < half; ++k)
    freq[static_cast<size_t>(k)] = 1.0 / std::pow(10000.0, static_cast<double>(2 * k) / static_cast<double>(dim));
  for (int64_t d = 0; d < rows; ++d) {
    const double p = static_cast<double>(clamp > 0 ? std::min(d, clamp) : d);
    float* row = out.f32() + d * dim;
    for (int64_t k = 0; k < half; ++k) {
      const double f = freq[static_cast<size_t>(k)];
      row[k] = static_cast<float>(std::sin(p * f));
      row[half + k] = static_cast<float>(std::cos(p * f));
    }
  }
  return out;
}

const Tensor& TransformerXL::relative_embedding(int64_t rows) {
  if (!relative_embedding_.defined() || relative_embedding_.dim(0) != rows)
    relative_embedding_ = xl_relative_embedding(rows, config_.d_model, config_.clamp_len);
  return relative_embedding_;
}

TransformerXL::TransformerXL(TransformerXLConfig config) : config_(std::move(config)) {
  config_.validate();
  const auto& c = config_;
  if (static_cast<uint64_t>(c.n_layer + 1) >= kMaxLayerSlots)
    fail_usage("--n-layer " + std::to_string(c.n_layer) + ": at most " + std::to_string(kMaxLayerSlots - 2) +
                   " layers have distinct dropout masks",
               "use fewer layers");
  if (c.vocab_size <= 0) fail_usage("transformer_xl: vocab_size is not set", "it comes from dict.txt");
  c.check_vocabulary();
  const int64_t C = c.d_model, H = c.n_head, D = c.d_head, HD = c.inner_dim(), V = c.vocab_size;
  const std::string top = "decoder.model.transformer.";
  if (c.shared_r()) {  // HF registers the model's own parameters before its modules
    shared_r_w_bias_ = params_.add(top + "r_w_bias", {H, D});
    shared_r_r_bias_ = params_.add(top + "r_r_bias", {H, D});
  }
  const std::vector<int64_t> cutoffs = c.kept_cutoffs();
  const nn::VocabBands bands = nn::VocabBands::make(cutoffs, V);
  const int64_t k = bands.count();
  if (c.div_val == 1) {
    word_emb_ = nn::Embedding::make(params_, top + "word_emb.emb_layers.0.weight", V, C);
  } else {
    adaptive_emb_ = nn::AdaptiveInput(params_, top + "word_emb.",
                                      {.vocab_size = V,
                                       .padding_idx = -1,  // HF's nn.Embedding has none
                                       .initial_dim = C,
                                       .factor = static_cast<double>(c.div_val),
                                       .output_dim = C,
                                       .cutoff = cutoffs,
                                       .hf_names = true});
  }
  layers_.resize(static_cast<size_t>(c.n_layer));
  for (int64_t l = 0; l < c.n_layer; ++l) {
    Layer& L = layers_[static_cast<size_t>(l)];
    const std::string a = top + "layers." + std::to_string(l) + ".dec_attn.";
    const std::string f = top + "layers." + std::to_string(l) + ".pos_ff.";
    if (c.shared_r()) {
      L.r_r_bias = shared_r_r_bias_;
      L.r_w_bias = shared_r_w_bias_;
    } else {
      L.r_r_bias = params_.add(a + "r_r_bias", {H, D});
      L.r_w_bias = params_.add(a + "r_w_bias", {H, D});
    }
    L.qkv_net = nn::Linear::make(params_, a + "qkv_net.", C, 3 * HD, nn::Bias::Without);
    L.o_net = nn::Linear::make(params_, a + "o_net.", HD, C, nn::Bias::Without);
    L.attn_norm = nn::LayerNorm::make(params_, a + "layer_norm.", C);
    L.r_net = nn::Linear::make(params_, a + "r_net.", C, HD, nn::Bias::Without);
    L.fc1 = nn::Linear::make(params_, f + "CoreNet.0.", C, c.d_inner);
    L.fc2 = nn::Linear::make(params_, f + "CoreNet.3.", c.d_inner, C);
    L.ff_norm = nn::LayerNorm::make(params_, f + "layer_norm.", C);
  }
  const std::string crit = "decoder.model.crit.";
  if (k == 1 && c.div_val == 1) {
    head_ = std::make_unique<nn::SoftmaxHead>(word_emb_.weight, params_.add(crit + "out_layers.0.bias", {V}));
    return;
  }
  nn::ProjectedAdaptiveSoftmaxWeights w{.vocab_size = V, .input_dim = C, .bands = bands};
  if (k > 1) {  // HF registers the clusters first, then out_layers, then out_projs
    w.cluster_weight = params_.add(crit + "cluster_weight", {k - 1, C});
    w.cluster_bias = params_.add(crit + "cluster_bias", {k - 1});
  }
  if (c.div_val == 1) {
    w.full_weight = word_emb_.weight;
    w.full_bias = params_.add(crit + "out_layers.0.bias", {V});
  } else {
    for (int64_t i = 0; i < k; ++i) {
      w.weight.push_back(adaptive_emb_.table(i));  // tied: out_layers.{i}.weight
      w.bias.push_back(params_.add(crit + "out_layers." + std::to_string(i) + ".bias", {bands.size(i)}));
    }
    w.proj.push_back(params_.add(crit + "out_projs.0", {C, adaptive_emb_.band_dim(0)}));  // tie_projs[0] = False
    for (int64_t i = 1; i < k; ++i) w.proj.push_back(adaptive_emb_.projection(i));       // tied: emb_projs.{i}
  }
  head_ = std::make_unique<nn::ProjectedAdaptiveSoftmax>(std::move(w));
}

ModelInfo TransformerXL::info() const {
  const auto& c = config_;
  std::string summary = c.arch + " layers=" + std::to_string(c.n_layer) + " d_model=" + std::to_string(c.d_model) +
                        " heads=" + std::to_string(c.n_head) + "x" + std::to_string(c.d_head) +
                        " mem_len=" + std::to_string(c.mem_len);
  if (c.clamp_len > 0) summary += " clamp_len=" + std::to_string(c.clamp_len);
  if (c.same_length) summary += " same_length";
  if (c.xl_original) summary += " xl_original";
  else if (!c.untie_r) summary += " shared_r";
  return {.arch = c.arch,
          .family = "transformer_xl",
          .vocab_size = c.vocab_size,
          .padding_idx = c.padding_idx,
          .tokens_per_sample = c.tokens_per_sample,
          .label = "xl",
          .summary = summary};
}

void TransformerXL::init(uint64_t seed) {
  Rng rng(seed, /*stream=*/0x7e1);
  for (const auto& [name, var] : params_.items()) {
    Var v = var;
    const bool norm = name.find("layer_norm.") != std::string::npos;
    const bool bias = ends_with(name, ".bias") || ends_with(name, "cluster_bias");
    const bool proj = name.find("emb_projs.") != std::string::npos || name.find("out_projs.") != std::string::npos;
    if (norm && !bias) nn::init_normal(v, 1.f, kInitStd, rng);         // LayerNorm weight N(1, 0.02)
    else if (bias) nn::init_constant(v, 0.f);                          // Linear / LayerNorm / softmax / cluster biases
    else if (proj) nn::init_normal(v, 0.f, kProjInitStd, rng);         // adaptive projections N(0, 0.01)
    else nn::init_normal(v, 0.f, kInitStd, rng);                       // weights, tables, r biases, cluster_weight
  }
}

uint64_t TransformerXL::dropout_stream(const ForwardOptions& opt, int64_t layer, int site) const {
  return (opt.step << 24) ^ (opt.micro << 16) ^ (static_cast<uint64_t>(layer + 1) << 4) ^ static_cast<uint64_t>(site);
}

std::unique_ptr<SegmentState> TransformerXL::new_segment_state(SegmentUse use) const {
  if (use == SegmentUse::Training)
    return config_.mem_len > 0 ? std::make_unique<HiddenMemory>(config_.n_layer, config_.mem_len) : nullptr;
  if (use == SegmentUse::Decode)  // HF's generate with `mems`; mem_len 0: every earlier token (HF recomputes them)
    return std::make_unique<HiddenMemory>(config_.n_layer, config_.mem_len > 0 ? config_.mem_len : kUnboundedMemory);
  fail_usage("transformer_xl: --kv-cache is not built for this family",
             "evaluate Transformer-XL with --task truncated_bptt_lm and its memory (--model-overrides "
             "'{\"mem_len\":...}'), as fairseq does");
}

Var TransformerXL::features(const Tensor& src, const ForwardOptions& opt) {
  const auto& c = config_;
  STRETCH_CHECK(src.rank() == 2, "features: src must be [B, T], got " << src.shape().str());
  const bool train = opt.mode == Mode::Train;
  if (train && opt.micro >= kMaxMicro)
    fail_usage("--update-freq " + std::to_string(opt.micro + 1) + ": at most " + std::to_string(kMaxMicro) +
                   " micro-batches per update have distinct dropout masks",
               "use --update-freq <= " + std::to_string(kMaxMicro));
  const int64_t B = src.dim(0), T = src.dim(1), C = c.d_model, HD = c.inner_dim();
  HiddenMemory* memory = nullptr;
  std::unique_ptr<HiddenMemory> call_memory;  // HF: a call without a state still starts from zeros
  if (opt.state) {
    memory = dynamic_cast<HiddenMemory*>(opt.state);
    STRETCH_CHECK(memory, "features: the segment state was not made by this transformer_xl");
  } else if (c.mem_len > 0 && c.zero_memory_start()) {
    call_memory = std::make_unique<HiddenMemory>(c.n_layer, c.mem_len);
    memory = call_memory.get();
  }
  if (memory) {
    memory->check_rows(B);
    if (memory->kept() == 0 && c.zero_memory_start() && c.mem_len > 0) memory->start_zeros(B, c.mem_len, C);
  }
  const int64_t M = memory ? memory->kept() : 0, S = M + T;
  const int64_t window = c.same_length ? c.mem_len : 0;
  const int64_t rows = window > 0 ? std::min(S, window) : S;  // every visible distance
  const float p = train ? c.dropout : 0.f;
  const float emb_scale = std::sqrt(static_cast<float>(C));  // HF's d_proj ** 0.5
  Var x = c.div_val == 1 ? word_emb_(src, emb_scale) : adaptive_emb_(src, emb_scale);  // [B, T, C]
  x = dropout(x, {.p = p, .seed = opt.seed, .stream = dropout_stream(opt, -1, 0)});
  Var R = dropout(Var(relative_embedding(rows)),
                  {.p = p, .seed = opt.seed, .stream = dropout_stream(opt, -1, 1)});  // [rows, C]
  std::vector<Tensor> layer_inputs;  // [L] of [B, T, C]: the memory's next rows
  for (size_t l = 0; l < layers_.size(); ++l) {
    const Layer& L = layers_[l];
    const auto index = static_cast<int64_t>(l);
    if (memory && opt.state) layer_inputs.push_back(x.value().clone());
    const Var cat = M > 0 ? concat_time(memory->layer(index), x) : x;  // [B, S, C]
    // qkv_net: q for the segment's rows only (the memory's queries are never used), k and v for
    // all S rows; the memory's rows get no input gradient (concat_time would drop it).
    const Var q = autograd::linear_rows(x, L.qkv_net.weight, 0, HD);                 // [B, T, HD]
    const Var kv = autograd::linear_rows(cat, L.qkv_net.weight, HD, 2 * HD, {}, M);  // [B, S, 2HD]
    const Var r = L.r_net(R);                                                 // [rows, HD]
    const Var a = xl::rel_attention(q, kv, r, L.r_w_bias, L.r_r_bias,
                                    {.heads = c.n_head,
                                     .window = window,
                                     .dropatt = train ? c.dropatt : 0.f,
                                     .seed = opt.seed,
                                     .stream = dropout_stream(opt, index, 1)});  // [B, T, HD]
    x = L.attn_norm(dropout_add(x, L.o_net(a), {.p = p, .seed = opt.seed, .stream = dropout_stream(opt, index, 2)}));
    Var h = L.fc1(x, ops::LinearEpilogue::Relu);  // [B, T, d_inner]
    h = dropout(h, {.p = p, .seed = opt.seed, .stream = dropout_stream(opt, index, 3)});
    x = L.ff_norm(dropout_add(x, L.fc2(h), {.p = p, .seed = opt.seed, .stream = dropout_stream(opt, index, 4)}));
  }
  x = dropout(x, {.p = p, .seed = opt.seed, .stream = dropout_stream(opt, c.n_layer, 0)});
  if (memory && opt.state) memory->update(layer_inputs, Tensor(), B, T);
  if (opt.last_block_queries > 0 && opt.last_block_queries < T) x = last_time(x, opt.last_block_queries);
  return x;
}

int64_t TransformerXL::parameter_count(const TransformerXLConfig& c) {
  const int64_t C = c.d_model, HD = c.inner_dim(), F = c.d_inner, V = c.vocab_size;
  const int64_t r_biases = 2 * c.n_head * c.d_head;
  const nn::VocabBands bands = nn::VocabBands::make(c.kept_cutoffs(), V);
  const int64_t k = bands.count();
  int64_t n = (k - 1) * (C + 1);  // cluster_weight [k − 1, C] and cluster_bias
  if (c.div_val == 1) {
    n += V * C + V;  // tied embedding/output weight + output bias
  } else {
    for (int64_t i = 0; i < k; ++i) {
      const int64_t d = nn::VocabBands::dim(C, static_cast<double>(c.div_val), i);
      n += bands.size(i) * d + C * d + bands.size(i);  // tied table, tied projection, bias
    }
    n += C * C;  // out_projs.0 (the head's own)
  }
  n += c.shared_r() ? r_biases : c.n_layer * r_biases;
  n += c.n_layer * (3 * HD * C + HD * C + C * HD + 2 * C + (C * F + F) + (F * C + C) + 2 * C);
  return n;
}

}  // namespace stretch::models
