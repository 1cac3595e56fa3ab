// models/transformer_xl/family.h — the transformer_xl family for the --arch registry.
#pragma once
#include "models/registry.h"

namespace stretch::models {
const Family& transformer_xl_family();
}  // namespace stretch::models
