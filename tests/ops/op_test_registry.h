// tests/ops/op_test_registry.h — one registry of op test cases, fast path vs reference
// (GGML's test-backend-ops habit). Each case names an op and a shape, writes down its tolerance
// and the reason for it, and makes an OpRun that owns the inputs (shared by both implementations)
// and one set of outputs per implementation. check_case() runs forward (and backward) of the
// reference and the fast path and compares every named output element by element:
//     |fast − ref| ≤ atol + rtol·|ref|        (NaN anywhere fails)
// The same cases drive bench/bench_ops.cpp (Size::Bench cases, timed on the fast path).
// No GoogleTest here, so the benchmarks can link it.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace stretch::ops::testing {

enum class Impl : uint8_t { Reference, Fast };
enum class Pass : uint8_t { Forward, Backward };
enum class Size : uint8_t { Edge, Bench };  // Bench: large shapes (benchmarks; tests with STRETCH_LONG=1)

struct Tolerance {
  double atol = 0, rtol = 0;
  std::string reason;  // why this tolerance (error analysis), printed on failure
};

// One output buffer of one implementation.
struct Output {
  std::string name;
  float* data = nullptr;  // [n]
  int64_t n = 0;
};

class OpRun {
 public:
  virtual ~OpRun() = default;
  // Backward of an implementation uses the saved state of its own Forward (run that first).
  virtual void run(Impl impl, Pass pass) = 0;
  virtual std::vector<Output> outputs(Impl impl, Pass pass) = 0;
  // Bytes a pass must move at least (inputs read + outputs written), for bandwidth benchmarks.
  virtual int64_t bytes(Pass pass) const = 0;
};

struct OpCase {
  std::string op;     // "layernorm"
  std::string shape;  // "n=1 c=7"
  Tolerance tol;
  std::function<std::unique_ptr<OpRun>()> make;
  bool has_backward = true;
  Size size = Size::Edge;
  std::string name() const { return op + " [" + shape + "]"; }
};

struct CheckReport {
  bool ok = true;
  int64_t compared = 0;       // elements compared
  double worst_ratio = 0;     // max over elements of |fast − ref| / (atol + rtol·|ref|)
  std::string message;        // first failure (or empty)
};

// Runs the case and compares fast vs reference (forward, then backward if it has one).
CheckReport check_case(const OpCase& c);
// Compares two output lists (same names and sizes) under a tolerance; used by check_case.
CheckReport compare_outputs(const std::vector<Output>& fast, const std::vector<Output>& ref, const Tolerance& tol);

// Every registered case (built once, in a fixed order).
const std::vector<OpCase>& op_cases();

// A copy of `c` whose fast path is wrong by `factor` × its tolerance in one element of output
// `output_index` of `pass`: the checker must report it (proves the gate can fail).
OpCase perturbed_case(const OpCase& c, Pass pass, int output_index, double factor);

// Case lists per op (op_cases_*.cpp), gathered by op_cases().
void add_linear_cases(std::vector<OpCase>& cases);
void add_layernorm_cases(std::vector<OpCase>& cases);
void add_channel_scale_cases(std::vector<OpCase>& cases);
void add_activation_cases(std::vector<OpCase>& cases);
void add_elementwise_cases(std::vector<OpCase>& cases);
void add_embedding_cases(std::vector<OpCase>& cases);
void add_dropout_cases(std::vector<OpCase>& cases);
void add_cross_entropy_cases(std::vector<OpCase>& cases);
void add_position_cases(std::vector<OpCase>& cases);  // rope, sinusoidal
void add_row_gather_cases(std::vector<OpCase>& cases);  // row_gather, embedding with a padding row

// Deterministic test data.
std::vector<float> random_floats(int64_t n, uint64_t seed, float lo = -1.f, float hi = 1.f);
std::vector<int32_t> random_ids(int64_t n, int32_t v, uint64_t seed);

}  // namespace stretch::ops::testing
