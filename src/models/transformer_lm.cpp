#include "models/transformer_lm.h"

#include <cmath>
#include <string>

#include "autograd/attention.h"
#include "autograd/functions.h"
#include "autograd/tape.h"
#include "position/positions.h"

namespace stretch::models {

using namespace stretch::autograd;

TransformerLM::TransformerLM(TransformerLMConfig config) : config_(std::move(config)) {
  config_.validate();
  const auto& c = config_;
  const int64_t C = c.decoder_embed_dim, F = c.decoder_ffn_embed_dim, V = c.vocab_size;
  embed_tokens_ = params_.add("decoder.embed_tokens.weight", {V, C});
  if (c.pos == PosMethod::Learned)
    embed_positions_ = params_.add("decoder.embed_positions.weight", {c.max_target_positions + c.padding_idx + 1, C});
  for (int64_t l = 0; l < c.decoder_layers; ++l) {
    const std::string p = "decoder.layers." + std::to_string(l) + ".";
    Layer L;
    // One [3C, C] weight (and [3C] bias, with gradients alike) holds q, k, v so that a single GEMM
    // projects all three; the named parameters are views into it (fairseq names, k, v, q order).
    Tensor w = Tensor::zeros({3 * C, C}), gw = Tensor::zeros({3 * C, C});
    Tensor b = Tensor::zeros({3 * C}), gb = Tensor::zeros({3 * C});
    L.qkv_w = Var(w, gw, true);
    L.qkv_b = Var(b, gb, true);
    auto part = [&](const Tensor& t, const Tensor& g, int i) { return Var(t.slice_rows(i * C, C), g.slice_rows(i * C, C), true); };
    L.k_w = params_.add(p + "self_attn.k_proj.weight", part(w, gw, 1));
    L.k_b = params_.add(p + "self_attn.k_proj.bias", part(b, gb, 1));
    L.v_w = params_.add(p + "self_attn.v_proj.weight", part(w, gw, 2));
    L.v_b = params_.add(p + "self_attn.v_proj.bias", part(b, gb, 2));
    L.q_w = params_.add(p + "self_attn.q_proj.weight", part(w, gw, 0));
    L.q_b = params_.add(p + "self_attn.q_proj.bias", part(b, gb, 0));
    L.out_w = params_.add(p + "self_attn.out_proj.weight", {C, C});
    L.out_b = params_.add(p + "self_attn.out_proj.bias", {C});
    L.attn_ln_w = params_.add(p + "self_attn_layer_norm.weight", {C});
    L.attn_ln_b = params_.add(p + "self_attn_layer_norm.bias", {C});
    L.fc1_w = params_.add(p + "fc1.weight", {F, C});
    L.fc1_b = params_.add(p + "fc1.bias", {F});
    L.fc2_w = params_.add(p + "fc2.weight", {C, F});
    L.fc2_b = params_.add(p + "fc2.bias", {C});
    L.ffn_ln_w = params_.add(p + "final_layer_norm.weight", {C});
    L.ffn_ln_b = params_.add(p + "final_layer_norm.bias", {C});
    layers_.push_back(L);
  }
  if (c.has_final_norm()) {
    final_ln_w_ = params_.add("decoder.layer_norm.weight", {C});
    final_ln_b_ = params_.add("decoder.layer_norm.bias", {C});
  }
  output_projection_ =
      c.share_decoder_input_output_embed ? embed_tokens_ : params_.add("decoder.output_projection.weight", {V, C});
  if (c.pos == PosMethod::T5)
    t5_table_ = params_.add("decoder.relative_attention_bias.weight", {c.t5_num_buckets, c.decoder_attention_heads});
  if (c.pos == PosMethod::Alibi) alibi_slopes_ = alibi_slopes_var(c.decoder_attention_heads);  // fixed, not a parameter
}

void TransformerLM::init(uint64_t seed) {
  const auto& c = config_;
  const int64_t C = c.decoder_embed_dim;
  Rng rng(seed, /*stream=*/0x1417);
  const float emb_std = 1.0f / std::sqrt(static_cast<float>(C));
  nn::init_normal(embed_tokens_, 0.f, emb_std, rng);  // fairseq Embedding: N(0, C^-1/2), pad row 0
  std::fill_n(embed_tokens_.data() + c.padding_idx * C, C, 0.f);
  if (embed_positions_.defined()) {  // LearnedPositionalEmbedding: same init, pad row 0
    nn::init_normal(embed_positions_, 0.f, emb_std, rng);
    std::fill_n(embed_positions_.data() + c.padding_idx * C, C, 0.f);
  }
  const float qkv_gain = 1.0f / std::sqrt(2.0f);
  for (auto& L : layers_) {
    nn::init_xavier_uniform(L.k_w, qkv_gain, rng);
    nn::init_uniform_fan_in(L.k_b, C, rng);
    nn::init_xavier_uniform(L.v_w, qkv_gain, rng);
    nn::init_uniform_fan_in(L.v_b, C, rng);
    nn::init_xavier_uniform(L.q_w, qkv_gain, rng);
    nn::init_uniform_fan_in(L.q_b, C, rng);
    nn::init_xavier_uniform(L.out_w, 1.0f, rng);
    nn::init_constant(L.out_b, 0.f);
    nn::init_constant(L.attn_ln_w, 1.f);
    nn::init_constant(L.attn_ln_b, 0.f);
    nn::init_uniform_fan_in(L.fc1_w, C, rng);  // kaiming_uniform(a=√5) == U(±1/sqrt(fan_in))
    nn::init_uniform_fan_in(L.fc1_b, C, rng);
    nn::init_uniform_fan_in(L.fc2_w, c.decoder_ffn_embed_dim, rng);
    nn::init_uniform_fan_in(L.fc2_b, c.decoder_ffn_embed_dim, rng);
    nn::init_constant(L.ffn_ln_w, 1.f);
    nn::init_constant(L.ffn_ln_b, 0.f);
  }
  if (final_ln_w_.defined()) {
    nn::init_constant(final_ln_w_, 1.f);
    nn::init_constant(final_ln_b_, 0.f);
  }
  if (!c.share_decoder_input_output_embed) nn::init_normal(output_projection_, 0.f, emb_std, rng);
  if (t5_table_.defined()) nn::init_normal(t5_table_, 0.f, emb_std, rng);
}

uint64_t TransformerLM::dropout_stream(const ForwardOptions& opt, int64_t layer, int site) const {
  // Distinct for every (update, micro-batch, layer, site): masks never repeat within a run.
  return (opt.step << 24) ^ (opt.micro << 16) ^ (static_cast<uint64_t>(layer + 1) << 4) ^ static_cast<uint64_t>(site);
}

Var TransformerLM::add_positions(const Var& x, const Tensor& src, int64_t pos_offset) {
  const auto& c = config_;
  if (c.pos == PosMethod::Sinusoidal) {
    Tensor table = position::sinusoidal_for_tokens(src, c.decoder_embed_dim, c.padding_idx, pos_offset);  // [B, T, C]
    return add(x, Var(table));
  }
  if (c.pos == PosMethod::Learned) {
    Tensor ids = position::make_positions(src, c.padding_idx, pos_offset);  // [B, T]
    const int64_t rows = embed_positions_.shape()[0];
    const int64_t T = src.dim(1) + pos_offset;
    if (T + c.padding_idx + 1 > rows)
      fail_usage("learned positions: a window of " + std::to_string(T) + " tokens needs positions up to " +
                     std::to_string(T + c.padding_idx) + ", but the table has " + std::to_string(rows) +
                     " rows (max_target_positions = " + std::to_string(c.max_target_positions) + ")",
                 "learned position embeddings cannot extrapolate past their training length (the published "
                 "failure); evaluate with --tokens-per-sample <= " +
                     std::to_string(c.max_target_positions) + " or train with --pos alibi");
    return add(x, embedding(ids, embed_positions_, 1.0f));
  }
  return x;
}

Var TransformerLM::features(const Tensor& src, const ForwardOptions& opt) {
  const auto& c = config_;
  STRETCH_CHECK(src.rank() == 2, "features: src must be [B, T], got " << src.shape().str());
  const bool train = opt.mode == Mode::Train;
  STRETCH_CHECK(!opt.cache || opt.mode == Mode::Eval, "incremental decoding is evaluation only");
  const int64_t pos_offset = opt.cache ? opt.cache->length : 0;
  if (opt.cache && opt.cache->k.empty()) {
    opt.cache->k.resize(layers_.size());
    opt.cache->v.resize(layers_.size());
  }
  Tensor key_padding = opt.cache ? Tensor() : position::key_padding_mask(src, c.padding_idx);  // undefined when no pad
  const float embed_scale = c.no_scale_embedding ? 1.0f : std::sqrt(static_cast<float>(c.decoder_embed_dim));
  Var x = embedding(src, embed_tokens_, embed_scale);
  x = add_positions(x, src, pos_offset);
  x = dropout(x, {.p = train ? c.dropout : 0.f, .seed = opt.seed, .stream = dropout_stream(opt, -1, 0)});
  const int64_t T = src.dim(1);
  STRETCH_CHECK(opt.last_block_queries == 0 || (!autograd::grad_enabled() && !opt.cache),
                "last_block_queries is for evaluation without grad or cache");
  const int64_t last_queries = opt.last_block_queries > 0 ? std::min(opt.last_block_queries, T) : T;
  for (size_t l = 0; l < layers_.size(); ++l)
    x = block(layers_[l], static_cast<int64_t>(l), x, key_padding, opt, l + 1 == layers_.size() ? last_queries : T);
  if (final_ln_w_.defined()) x = layer_norm(x, final_ln_w_, final_ln_b_);
  if (opt.cache) opt.cache->length += src.dim(1);
  return x;
}

namespace {
// The last n positions of x [B, T, C]: [B, n, C] (evaluation without grad only).
Var last_positions(const Var& x, int64_t n) {
  const Tensor& v = x.value();
  const int64_t B = v.dim(0), T = v.dim(1), C = v.dim(2);
  if (n == T) return x;
  Tensor out = Tensor::empty({B, n, C});
  for (int64_t b = 0; b < B; ++b) std::copy_n(v.f32() + (b * T + T - n) * C, n * C, out.f32() + b * n * C);
  return Var(out);
}

// Appends x [B, H, T, D] to the cached [B, H, S, D] along the time axis: [B, H, S+T, D].
Tensor append_time(const Tensor& cached, const Tensor& x) {
  if (!cached.defined()) return x.clone();
  const int64_t B = x.dim(0), H = x.dim(1), T = x.dim(2), D = x.dim(3), S = cached.dim(2);
  Tensor out = Tensor::empty({B, H, S + T, D});
  for (int64_t bh = 0; bh < B * H; ++bh) {
    std::copy_n(cached.f32() + bh * S * D, S * D, out.f32() + bh * (S + T) * D);
    std::copy_n(x.f32() + bh * T * D, T * D, out.f32() + bh * (S + T) * D + S * D);
  }
  return out;
}
}  // namespace

Var TransformerLM::output(const Var& hidden) { return linear(hidden, output_projection_, Var()); }

Var TransformerLM::self_attention(const Layer& L, int64_t index, const Var& xq, const Var& xkv,
                                  const Tensor& key_padding, const ForwardOptions& opt) {
  const auto& c = config_;
  const int64_t H = c.decoder_attention_heads;
  AttentionInputs in;
  in.bias = c.pos == PosMethod::Alibi ? ops::BiasPolicy::Alibi
            : c.pos == PosMethod::T5  ? ops::BiasPolicy::T5
                                      : ops::BiasPolicy::None;
  in.scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim()));
  in.slopes = alibi_slopes_;
  in.slope_scale = c.alibi_slope_scale;
  in.window = c.attention_window;
  in.key_padding = key_padding;
  in.t5_table = t5_table_;
  in.t5_num_buckets = c.t5_num_buckets;
  in.t5_max_distance = c.t5_max_distance;
  in.dropout = opt.mode == Mode::Train ? c.attention_dropout : 0.f;
  in.seed = opt.seed;
  in.stream = dropout_stream(opt, index, 1);
  if (c.pos != PosMethod::Rope && !opt.cache && xq.shape()[1] == xkv.shape()[1]) {
    // One GEMM for q, k, v; attention reads them in place and writes [B, T, C].
    Var qkv = linear(xkv, L.qkv_w, L.qkv_b);  // [B, T, 3C]
    return linear(attention_qkv(qkv, H, in), L.out_w, L.out_b);
  }
  Var q = split_heads(linear(xq, L.q_w, L.q_b), H);   // [B, H, Tq, D]
  Var k = split_heads(linear(xkv, L.k_w, L.k_b), H);  // [B, H, T, D]
  Var v = split_heads(linear(xkv, L.v_w, L.v_b), H);
  const int64_t pos0 = opt.cache ? opt.cache->length : 0;
  if (c.pos == PosMethod::Rope) {
    q = rope(q, pos0 + xkv.shape()[1] - xq.shape()[1], c.rope_base);
    k = rope(k, pos0, c.rope_base);
  }
  if (opt.cache) {  // keys/values of the whole prefix; the kernel places query i at key S−T+i
    opt.cache->k[index] = append_time(opt.cache->k[index], k.value());
    opt.cache->v[index] = append_time(opt.cache->v[index], v.value());
    k = Var(opt.cache->k[index]);
    v = Var(opt.cache->v[index]);
  }
  Var a = merge_heads(attention(q, k, v, in));  // [B, T, C]
  return linear(a, L.out_w, L.out_b);
}

Var TransformerLM::block(const Layer& L, int64_t index, const Var& x_in, const Tensor& key_padding,
                         const ForwardOptions& opt, int64_t queries) {
  const auto& c = config_;
  const bool train = opt.mode == Mode::Train;
  const bool pre = c.decoder_normalize_before;
  ops::DropoutParams drop{.p = train ? c.dropout : 0.f, .seed = opt.seed};
  Var x = x_in;

  Var h = pre ? layer_norm(x, L.attn_ln_w, L.attn_ln_b) : x;  // [B, T, C]
  h = self_attention(L, index, last_positions(h, queries), h, key_padding, opt);  // [B, queries, C]
  x = last_positions(x, queries);
  drop.stream = dropout_stream(opt, index, 2);
  x = dropout_add(x, h, drop);  // x + dropout(h)
  if (!pre) x = layer_norm(x, L.attn_ln_w, L.attn_ln_b);

  h = pre ? layer_norm(x, L.ffn_ln_w, L.ffn_ln_b) : x;
  h = c.activation_fn == ops::Activation::Relu ? linear(h, L.fc1_w, L.fc1_b, ops::LinearEpilogue::Relu)
                                               : activation(linear(h, L.fc1_w, L.fc1_b), c.activation_fn);
  h = dropout(h, {.p = train ? c.activation_dropout : 0.f, .seed = opt.seed, .stream = dropout_stream(opt, index, 3)});
  h = linear(h, L.fc2_w, L.fc2_b);
  drop.stream = dropout_stream(opt, index, 4);
  x = dropout_add(x, h, drop);
  if (!pre) x = layer_norm(x, L.ffn_ln_w, L.ffn_ln_b);
  return x;
}

}  // namespace stretch::models
