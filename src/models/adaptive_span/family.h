// models/adaptive_span/family.h — the adaptive_span family's registration (models/registry.h).
#pragma once
#include "models/registry.h"

namespace stretch::models {
const Family& adaptive_span_family();
}  // namespace stretch::models
