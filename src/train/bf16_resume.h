// train/bf16_resume.h — which bf16 products a --bf16 run computes with, settled once per launch.
// (cli/bf16_speed.h measures the choice; a noisy measurement must not switch a run's roundings
// halfway through.) Contract: settle_bf16_products(saved, world) returns the choice to record in
// train_state.bf16_products ("native", "fp32", "native-fp32-attention", or "" without --bf16) and
// sets it process-wide (ops::set_bf16_products). Where the choice is measured at startup (oneDNN
// kind Dot: Zen 4/5, Intel without AMX; Amx: Intel model 167), a resume keeps the checkpoint's `saved` choice, so a run continues bit for
// bit whatever this launch measured; STRETCH_BF16_PRODUCTS still wins, with a warning. Under MPI
// every process takes the first process's choice (one allreduce; every rank must call it).
#pragma once
#include <string>

#include "dist/world.h"

namespace stretch::train {

std::string settle_bf16_products(const std::string& saved, const dist::World& world);

}  // namespace stretch::train
