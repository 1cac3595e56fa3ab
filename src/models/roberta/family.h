// models/roberta/family.h — the roberta encoder family for the --arch registry.
#pragma once
#include "models/registry.h"

namespace stretch::models {
const Family& roberta_family();
}
