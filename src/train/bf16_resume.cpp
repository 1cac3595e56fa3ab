// train/bf16_resume.cpp — see bf16_resume.h.
#include "train/bf16_resume.h"

#include <cstdlib>

#include "core/log.h"
#include "ops/gemm.h"

namespace stretch::train {

std::string settle_bf16_products(const std::string& saved, const dist::World& world) {
  if (ops::matmul_precision() != ops::GemmPrecision::Bf16) return "";
  auto code = [](const std::string& name) {
    ops::Bf16Products p = ops::Bf16Products::Native;
    ops::parse_bf16_products(name, &p);  // (checkpoint.cpp has refused any other name)
    return p;
  };
  const std::string now = ops::bf16_products_name(ops::bf16_products());
  if (!saved.empty() && saved != now) {
    const char* env = std::getenv("STRETCH_BF16_PRODUCTS");
    const bool env_set = env != nullptr && *env != '\0';
    const ops::Bf16MatmulKind kind = ops::bf16_matmul_kind();
    if (!env_set && (kind == ops::Bf16MatmulKind::Dot || kind == ops::Bf16MatmulKind::Amx)) {
      ops::set_bf16_products(code(saved));
      if (world.is_main())
        log_info("--bf16: the resumed run keeps its checkpoint's bf16 products (" + saved + "; this start measured " +
                 now + "), so it continues bit for bit; STRETCH_BF16_PRODUCTS=native|fp32|native-fp32-attention "
                 "chooses otherwise");
    } else if (world.is_main()) {
      log_warning("--bf16: the checkpoint's run computed its bf16 products as " + saved + ", this launch as " + now +
                  (env_set ? " (STRETCH_BF16_PRODUCTS)" : " (this CPU's choice)") +
                  ": the run continues, with other roundings than an uninterrupted run's");
    }
  }
  if (world.size() > 1) {  // the first process's choice everywhere (its enum value; the others add 0)
    double v = world.is_main() ? static_cast<double>(ops::bf16_products()) : 0.0;
    world.allreduce_sum(&v, 1);
    ops::set_bf16_products(static_cast<ops::Bf16Products>(static_cast<int>(v + 0.5)));
  }
  return ops::bf16_products_name(ops::bf16_products());
}

}  // namespace stretch::train
