// models/layers_to_keep.h — fairseq's decoder_layers_to_keep as an evaluation override
// (checkpoint_utils.prune_state_dict): `--model-overrides "{'decoder_layers_to_keep': '0,2'}"`
// keeps those blocks of a trained transformer_lm, renumbered 0..n−1 in increasing order, and
// drops the others; decoder_layers becomes n. fairseq's LayerDrop paper prunes this way at test time.
// Contract (usage errors name the file, the key and the value):
//  * the value is a string of distinct layer indices in [0, decoder_layers), comma-separated (spaces
//    around them allowed, as Python's int() takes them); an empty string or null keeps every layer;
//  * only the transformer_lm family (tensors decoder.layers.K.*); a model whose config ties a key to
//    layer numbers (alibi_layer_scale, alibi_no_bias_heads, pos_upper) is refused: the pruned model
//    would read them against the new numbering;
//  * tensors whose name starts with "decoder" and holds ".layers.K." are renamed or dropped (fairseq's
//    two regular expressions); every other tensor is kept as it is.
#pragma once
#include <nlohmann/json.hpp>

#include "models/model_file.h"

namespace stretch::models {

// Applies `value` (the override's) to the model file in place: renames / drops the layer tensors and
// sets m.model["decoder_layers"].
void prune_decoder_layers(ModelFile& m, const nlohmann::json& value);

}  // namespace stretch::models
