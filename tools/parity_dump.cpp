// tools/parity_dump.cpp — writes what the PyTorch oracle (tests/parity) checks stretch against:
// a checkpoint of a freshly initialised model and a dump with one batch's src_tokens, target,
// logits [B, T, V], summed NLL loss [1] and every parameter's gradient ("grad.<name>"), through
// the same calls as a training step (cross_entropy with LogitsBuffer::ReuseForGradient).
// Usage: stretch_parity_dump --model-json '{"pos":"alibi",...}' --batch 2 --len 16
//          --pad 3 --seed 1 --checkpoint ckpt.pt --dump dump.safetensors
#include <CLI/CLI.hpp>
#include <iostream>

#include "autograd/functions.h"
#include "autograd/tape.h"
#include "core/rng.h"
#include "models/transformer_lm.h"
#include "tensor/safetensors.h"
#include "train/checkpoint.h"

using namespace stretch;

int main(int argc, char** argv) {
  CLI::App app{"stretch parity dump"};
  std::string model_json = "{}", checkpoint, dump;
  int64_t batch = 2, len = 16, pad = 0;
  uint64_t seed = 1;
  app.add_option("--model-json", model_json);
  app.add_option("--batch", batch);
  app.add_option("--len", len);
  app.add_option("--pad", pad, "right-pad the last row with this many pad tokens");
  app.add_option("--seed", seed);
  app.add_option("--checkpoint", checkpoint)->required();
  app.add_option("--dump", dump)->required();
  CLI11_PARSE(app, argc, argv);
  try {
    models::TransformerLMConfig cfg = models::preset("transformer_lm_tiny");
    cfg.dropout = 0;
    cfg.apply_overrides(nlohmann::json::parse(model_json));
    models::TransformerLM model(cfg);
    model.init(seed);
    train::save_checkpoint(checkpoint, model, nlohmann::json::object(), "parity", train::TrainState{}, nullptr);

    Rng rng(seed, 99);
    Tensor src = Tensor::empty({batch, len}, DType::I32), tgt = Tensor::empty({batch, len}, DType::I32);
    for (int64_t i = 0; i < batch * len; ++i) {
      src.i32()[i] = 4 + static_cast<int32_t>(rng.below(cfg.vocab_size - 4));
      tgt.i32()[i] = 4 + static_cast<int32_t>(rng.below(cfg.vocab_size - 4));
    }
    for (int64_t t = len - pad; t < len; ++t) {
      src.i32()[(batch - 1) * len + t] = cfg.padding_idx;
      tgt.i32()[(batch - 1) * len + t] = cfg.padding_idx;
    }
    autograd::Var logits = model.forward(src, {.mode = models::Mode::Train, .seed = seed});
    const Tensor logits_copy = logits.value().clone();  // the training path below overwrites them
    autograd::Var loss = autograd::cross_entropy(logits, tgt, cfg.padding_idx, ops::Reduction::Sum, nullptr,
                                                 autograd::LogitsBuffer::ReuseForGradient);
    autograd::tape().backward(loss);
    std::vector<std::pair<std::string, Tensor>> out = {
        {"src_tokens", src}, {"target", tgt}, {"logits", logits_copy}, {"loss", loss.value()}};
    for (const auto& [name, var] : model.params().items()) out.emplace_back("grad." + name, var.grad());
    save_safetensors(dump, out, {{"config", cfg.to_json().dump()}});
    std::cout << "loss " << loss.value().f32()[0] << "\n";
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "stretch_parity_dump: " << e.what() << "\n";
    return 1;
  }
}
