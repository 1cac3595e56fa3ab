// tests/tensor/driver/safetensors_driver.cpp — stretch's side of check_safetensors_python.py.
//   safetensors_driver write PATH   writes the fixture below with save_safetensors
//   safetensors_driver read PATH    loads PATH with load_safetensors and prints JSON:
//     {"metadata": {...}, "tensors": {name: {"dtype": "F32", "shape": [..], "values": [..]}}}
//     (values as numbers, BF16 widened to float; tensors in file order as "order": [names])
// Fixture (the script checks the same formulas): i = flat index
//   "f32"   F32  [2, 3]   0.5·i − 1          "i32"  I32 [4]  1000·i − 7
//   "bf16"  BF16 [3]      1.25·i (exact)     "i64"  I64 [2]  2^40·(i+1)
//   "u8"    U8   [5]      250 + i            "scalar" F32 []  3.5     "empty" F32 [0, 3]
//   metadata {"format": "stretch-test", "update": "42"}
// Not part of test_tensor (it lives in driver/, outside the test glob).
#include <iostream>
#include <nlohmann/json.hpp>

#include "tensor/safetensors.h"

using namespace stretch;

namespace {

void write_fixture(const std::string& path) {
  Tensor f32 = Tensor::empty({2, 3});
  for (int i = 0; i < 6; ++i) f32.f32()[i] = 0.5f * static_cast<float>(i) - 1.0f;
  Tensor i32 = Tensor::empty({4}, DType::I32);
  for (int i = 0; i < 4; ++i) i32.i32()[i] = 1000 * i - 7;
  Tensor b16 = Tensor::empty({3}, DType::BF16);
  for (int i = 0; i < 3; ++i) b16.bf()[i] = float_to_bf16(1.25f * static_cast<float>(i));
  Tensor i64 = Tensor::empty({2}, DType::I64);
  for (int i = 0; i < 2; ++i) i64.i64()[i] = (int64_t{1} << 40) * (i + 1);
  Tensor u8 = Tensor::empty({5}, DType::U8);
  for (int i = 0; i < 5; ++i) u8.u8()[i] = static_cast<uint8_t>(250 + i);
  save_safetensors(path,
                   {{"f32", f32}, {"i32", i32}, {"bf16", b16}, {"i64", i64}, {"u8", u8},
                    {"scalar", Tensor::full({}, 3.5f)}, {"empty", Tensor::empty({0, 3})}},
                   {{"format", "stretch-test"}, {"update", "42"}});
}

nlohmann::json values_of(const Tensor& t) {
  nlohmann::json v = nlohmann::json::array();
  for (int64_t i = 0; i < t.numel(); ++i) {
    switch (t.dtype()) {
      case DType::F32: v.push_back(t.f32()[i]); break;
      case DType::I32: v.push_back(t.i32()[i]); break;
      case DType::BF16: v.push_back(bf16_to_float(t.bf()[i])); break;
      case DType::I64: v.push_back(t.i64()[i]); break;
      case DType::U8: v.push_back(t.u8()[i]); break;
    }
  }
  return v;
}

void read_and_print(const std::string& path) {
  SafetensorsFile f = load_safetensors(path);
  nlohmann::json out = {{"metadata", f.metadata}, {"tensors", nlohmann::json::object()}, {"order", nlohmann::json::array()}};
  for (const auto& [name, t] : f.tensors) {
    out["tensors"][name] = {{"dtype", safetensors_dtype_name(t.dtype())}, {"shape", t.shape().dims()}, {"values", values_of(t)}};
    out["order"].push_back(name);
  }
  std::cout << out.dump() << "\n";
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const std::string mode = argc == 3 ? argv[1] : "";
    if (mode == "write") write_fixture(argv[2]);
    else if (mode == "read") read_and_print(argv[2]);
    else fail_usage("usage: safetensors_driver write|read PATH");
    return 0;
  } catch (const Error& e) {
    std::cerr << "safetensors_driver: error: " << e.what() << "\n";
    return e.exit_code();
  }
}
