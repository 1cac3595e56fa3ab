// models/transformer_lm/family.h — the transformer_lm family's registration (models/registry.h).
#pragma once
#include "models/registry.h"

namespace stretch::models {
const Family& transformer_lm_family();
}  // namespace stretch::models
