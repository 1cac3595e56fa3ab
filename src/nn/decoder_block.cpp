// nn/decoder_block.cpp — see decoder_block.h.
#include "nn/decoder_block.h"

#include <algorithm>

namespace stretch::nn {

using namespace autograd;

Var last_positions(const Var& x, int64_t n) { return last_time(x, n); }

DecoderBlock::DecoderBlock(ParameterList& params, const std::string& p, const BlockConfig& c,
                           const AttentionPosition* position)
    : c_attn(c.scale_heads ? params.add(p + "c_attn", {c.heads}) : Var()),
      w_resid(c.scale_resids ? params.add(p + "w_resid", {c.dim}) : Var()),
      self_attn(params, p + "self_attn.", c.dim, c.heads, position),
      attn_ln(c.scale_attn ? LayerNorm::make(params, p + "attn_ln.", c.dim) : LayerNorm{}),
      self_attn_layer_norm(LayerNorm::make(params, p + "self_attn_layer_norm.", c.dim)),
      ffn(FeedForward::make(params, p, c.dim, c.ffn_dim, c.activation, c.scale_fc)),
      final_layer_norm(LayerNorm::make(params, p + "final_layer_norm.", c.dim)),
      normalize_before_(c.normalize_before) {}

void DecoderBlock::init_normformer() {
  if (c_attn.defined()) init_constant(c_attn, 1.f);
  if (w_resid.defined()) init_constant(w_resid, 1.f);
  if (attn_ln.defined()) attn_ln.init();
  if (ffn.norm.defined()) ffn.norm.init();
}

Var DecoderBlock::operator()(const Var& x_in, const BlockCall& call) const {
  const bool pre = normalize_before_;
  const int64_t T = x_in.shape()[1];
  const int64_t queries = call.queries > 0 ? call.queries : T;
  ops::DropoutParams drop{.p = call.dropout, .seed = call.seed};
  Var x = x_in;

  Var h = pre ? self_attn_layer_norm(x) : x;  // [B, T, C]
  h = self_attn(last_positions(h, queries), h,
                {.key_padding = call.key_padding, .dropout = call.attention_dropout, .seed = call.seed,
                 .stream = call.streams[0], .kv = call.kv, .pos0 = call.pos0,
                 .detached = pre ? 0 : call.memory_rows});  // [B, queries, C]
  if (c_attn.defined()) h = channel_scale(h, c_attn, h.shape()[-1] / c_attn.numel());  // group D = C / H
  if (attn_ln.defined()) h = attn_ln(h);
  x = last_positions(x, queries);
  drop.stream = call.streams[1];
  x = dropout_add(x, h, drop);  // x + dropout(h)
  if (!pre) x = self_attn_layer_norm(x);

  h = pre ? final_layer_norm(x) : x;
  h = ffn(h, {.p = call.activation_dropout, .seed = call.seed, .stream = call.streams[2]});
  drop.stream = call.streams[3];
  x = dropout_add(w_resid.defined() ? channel_scale(x, w_resid) : x, h, drop);
  if (!pre) x = final_layer_norm(x);
  return x;
}

Var DecoderBlock::operator()(const Var& x, const BlockCall& call, Activations activations) const {
  if (activations == Activations::Keep) return (*this)(x, call);
  STRETCH_CHECK(call.kv == nullptr, "DecoderBlock: activation recomputation is for training (no KV cache)");
  // The closure outlives this call: it holds the padding mask and the scalars, not `call`.
  return checkpoint(x, [this, padding = call.key_padding, dropout = call.dropout,
                        attention_dropout = call.attention_dropout, activation_dropout = call.activation_dropout,
                        seed = call.seed, streams = call.streams, pos0 = call.pos0,
                        queries = call.queries, memory_rows = call.memory_rows](const Var& in) {
    return (*this)(in, {.key_padding = padding,
                        .dropout = dropout,
                        .attention_dropout = attention_dropout,
                        .activation_dropout = activation_dropout,
                        .seed = seed,
                        .streams = streams,
                        .kv = nullptr,
                        .pos0 = pos0,
                        .queries = queries,
                        .memory_rows = memory_rows});
  });
}

}  // namespace stretch::nn
