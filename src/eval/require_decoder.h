// eval/require_decoder.h — the one refusal of an encoder by the next-token tools (eval-lm
// without --task masked_lm, sweep, generate): a usage error naming the tool, the file and the
// arch when the model is of family roberta, with `eval-lm --task masked_lm` as the hint (without
// it an encoder reached the dictionary check and failed as a vocabulary mismatch: <mask> is
// appended to its dictionary). Defined in eval_lm.cpp.
#pragma once
#include <string>

#include "models/language_model.h"

namespace stretch::eval {

void require_decoder(const models::ModelInfo& info, const std::string& path, const std::string& tool);

}  // namespace stretch::eval
