// train/bf16_resume.cpp — see bf16_resume.h.
#include "train/bf16_resume.h"

#include <cstdlib>

#include "core/log.h"
#include "ops/gemm.h"

namespace stretch::train {

std::string settle_bf16_products(const std::string& saved, const dist::World& world) {
  if (ops::matmul_precision() != ops::GemmPrecision::Bf16) return "";
  auto code = [](const std::string& name) {
    return name == ops::bf16_products_name(ops::Bf16Products::Fp32Fma) ? ops::Bf16Products::Fp32Fma
                                                                         : ops::Bf16Products::Native;
  };
  const std::string now = ops::bf16_products_name(ops::bf16_products());
  if (!saved.empty() && saved != now) {
    const char* env = std::getenv("STRETCH_BF16_PRODUCTS");
    const bool env_set = env != nullptr && *env != '\0';
    if (!env_set && ops::bf16_matmul_kind() == ops::Bf16MatmulKind::Dot) {
      ops::set_bf16_products(code(saved));
      if (world.is_main())
        log_info("--bf16: the resumed run keeps its checkpoint's bf16 products (" + saved + "; this start measured " +
                 now + "), so it continues bit for bit; STRETCH_BF16_PRODUCTS=native|fp32 chooses otherwise");
    } else if (world.is_main()) {
      log_warning("--bf16: the checkpoint's run computed its bf16 products as " + saved + ", this launch as " + now +
                  (env_set ? " (STRETCH_BF16_PRODUCTS)" : " (this CPU's choice)") +
                  ": the run continues, with other roundings than an uninterrupted run's");
    }
  }
  if (world.size() > 1) {  // the first process's choice everywhere
    double v = world.is_main() && ops::bf16_products() == ops::Bf16Products::Fp32Fma ? 1.0 : 0.0;
    world.allreduce_sum(&v, 1);
    ops::set_bf16_products(v > 0.5 ? ops::Bf16Products::Fp32Fma : ops::Bf16Products::Native);
  }
  return ops::bf16_products_name(ops::bf16_products());
}

}  // namespace stretch::train
