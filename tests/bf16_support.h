// tests/bf16_support.h — bf16 tests on a CPU without bf16 matmul (ops::bf16_matmul_supported():
// oneDNN 2.x has no bf16 matmul below AVX-512, e.g. on Zen 3). There the numeric bf16 checks
// cannot run, so each such test checks the refusal instead — the bf16 work it would do must throw
// the clear stretch::Error (usage, naming bf16 and this CPU, with ops::kBf16Hint) and not crash or
// fail inside oneDNN — and then skips loudly:
//   if (!ops::bf16_matmul_supported()) {
//     testing::expect_bf16_refused([&] { /* a bf16 GEMM */ });
//     if (HasFailure()) return;
//     GTEST_SKIP() << testing::bf16_skip_message();
//   }
#pragma once
#include <gtest/gtest.h>

#include <functional>
#include <string>

#include "core/error.h"
#include "ops/gemm.h"

namespace stretch::testing {

inline void expect_bf16_refused(const std::function<void()>& bf16_work) {
  try {
    bf16_work();
    ADD_FAILURE() << "bf16 work ran although ops::bf16_matmul_supported() is false";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_EQ(e.kind(), ErrorKind::Usage) << what;
    EXPECT_NE(what.find("bf16 matmul is not supported on this CPU (" + ops::cpu_isa_summary() + ")"),
              std::string::npos)
        << what;
    EXPECT_EQ(e.hint(), ops::kBf16Hint) << what;
    EXPECT_NE(what.find("hint: bf16 needs a CPU with AVX-512"), std::string::npos) << what;
  }
}

inline std::string bf16_skip_message() {
  return "bf16 matmul not supported on this CPU (" + ops::cpu_isa_summary() + "): numeric bf16 checks not run";
}

}  // namespace stretch::testing
