// train/memory_estimate.h — a model too large for this machine is refused before it is allocated
// (issue 17, defect 6: `--decoder-layers 100000` ended in an uncaught std::bad_alloc after minutes).
// Contract: training_bytes(config) estimates the bytes a training run needs for a decoder-only config
// with fairseq's keys (decoder_layers L, decoder_embed_dim C, decoder_ffn_embed_dim F, vocab_size V,
// share_decoder_input_output_embed): parameters P = V·C (+ V·C unshared output) + L·(4C² + 2CF +
// 9C + F), times 16 bytes (fp32 weights, gradients and two optimizer moments). Activations are
// not counted, so it is a lower bound, and --checkpoint-activations (which only changes the
// activations) leaves it unchanged. Keys absent from the config count as 0 (other families are
// bounded by what they share). Adaptive Span (a config with attn_span; keys n_layer, d_model C,
// d_inner F, n_head H, attn_span S): P = 2·V·C + V + (C/H)·S + n_layer·(4C² + 2CF + F + 5C + H)
// (in_emb, out_emb with bias, key_pe, per layer four bias-free projections, the FFN, two
// LayerNorms and z), times 12 bytes (weights, gradients and one optimizer slot:
// adagrad_with_grad_clip's sum, the family's optimizer). check_training_memory() fails with a usage error naming the flags
// and their values when the estimate exceeds available_memory_bytes(): MemAvailable + SwapFree
// from /proc/meminfo (sysconf's physical pages where that file is missing), or
// STRETCH_MEMORY_LIMIT_BYTES when set (tests).
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>

namespace stretch::train {

double training_bytes(const nlohmann::json& model_config);
double available_memory_bytes();
void check_training_memory(const nlohmann::json& model_config);

}  // namespace stretch::train
