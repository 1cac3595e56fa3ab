// bench/bench_attention_layout.cpp — what reading the fused projections in place costs the attention
// kernel: the same ALiBi problem with packed [B, H, ·, D] operands and with the layouts the models
// use (q in [B, T, rows·H·D], k and v interleaved in [B, S, 2·H·D] or [B, S, 3·H·D], out in
// [B, T, H·D]), forward and forward + backward, as ratios of median process CPU times, the two
// layouts alternated call by call. The numbers are the same either way (tested in
// tests/ops/test_attention.cpp); only the memory access differs.
// Run: OMP_NUM_THREADS=1 build/bench/bench_attention_layout [reps]   (a plain program, ~20 s)
// Rows: T 512 / S 1024 / kv rows 2·H·D (transformer_lm --mem-len and Transformer-XL's k, v),
//       T = S = 512 / 2048 / 4096 with rows 3·H·D (the fused q, k, v of a plain step), B 2, H 4, D 64.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <vector>

#include "core/rng.h"
#include "ops/alibi.h"
#include "ops/attention.h"

namespace {

using namespace stretch;
using namespace stretch::ops;

double cpu_ms() {
  timespec t;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) * 1e3 + static_cast<double>(t.tv_nsec) / 1e6;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// One row of the table: T queries, S keys, k/v rows `blocks`·H·D floats apart in place.
void row(int64_t T, int64_t S, int64_t blocks, int reps) {
  const int64_t B = 2, H = 4, D = 64, HD = H * D;
  Rng rng(1, 2);
  auto random = [&](int64_t n) {
    std::vector<float> x(static_cast<size_t>(n));
    for (auto& e : x) e = rng.uniform(-1.f, 1.f);
    return x;
  };
  // In place: q and dout [B, T, H·D] rows; k, v at channel offsets 0 and H·D of [B, S, blocks·H·D].
  const std::vector<float> q = random(B * T * HD), kv = random(B * S * blocks * HD), dout = random(B * T * HD);
  const std::vector<float> slopes = alibi_slopes(static_cast<int>(H));
  AttentionParams strided;
  strided.b = B, strided.h = H, strided.t = T, strided.s = S, strided.d = D;
  strided.bias = BiasPolicy::Alibi;
  strided.alibi.slopes = slopes.data();
  strided.layout.q = {.batch = T * HD, .head = D, .row = HD};
  strided.layout.kv = {.batch = S * blocks * HD, .head = D, .row = blocks * HD};
  strided.layout.out = strided.layout.q;
  AttentionParams packed = strided;
  packed.layout = {};
  // The same values packed [B, H, N, D].
  auto pack = [&](const std::vector<float>& src, int64_t N, int64_t ld, int64_t off) {
    std::vector<float> dst(static_cast<size_t>(B * H * N * D));
    for (int64_t b = 0; b < B; ++b)
      for (int64_t h = 0; h < H; ++h)
        for (int64_t n = 0; n < N; ++n)
          std::copy_n(src.data() + (b * N + n) * ld + off + h * D, D, dst.data() + ((b * H + h) * N + n) * D);
    return dst;
  };
  const std::vector<float> qp = pack(q, T, HD, 0), kp = pack(kv, S, blocks * HD, 0), vp = pack(kv, S, blocks * HD, HD),
                           dop = pack(dout, T, HD, 0);
  std::vector<float> out(q.size()), lse(static_cast<size_t>(B * H * T)), dq(q.size()), dkv(kv.size()),
      dk(kp.size()), dv(vp.size());
  std::vector<double> fwd[2], all[2];
  for (int r = 0; r < reps; ++r)
    for (int w = 0; w < 2; ++w) {  // 0 packed, 1 in place
      const double t0 = cpu_ms();
      if (w == 0)
        attention_forward(out.data(), lse.data(), qp.data(), kp.data(), vp.data(), packed);
      else
        attention_forward(out.data(), lse.data(), q.data(), kv.data(), kv.data() + HD, strided);
      const double t1 = cpu_ms();
      if (w == 0)
        attention_backward(dq.data(), dk.data(), dv.data(), {}, dop.data(), qp.data(), kp.data(), vp.data(),
                           out.data(), lse.data(), packed, GradInit::Overwrite);
      else
        attention_backward(dq.data(), dkv.data(), dkv.data() + HD, {}, dout.data(), q.data(), kv.data(),
                           kv.data() + HD, out.data(), lse.data(), strided, GradInit::Overwrite);
      fwd[w].push_back(t1 - t0);
      all[w].push_back(cpu_ms() - t0);
    }
  std::printf("| %ld | %ld | %ld·H·D | %.2f / %.2f | **%.3f** | %.2f / %.2f | **%.3f** |\n", static_cast<long>(T),
              static_cast<long>(S), static_cast<long>(blocks), median(fwd[0]), median(fwd[1]),
              median(fwd[1]) / median(fwd[0]), median(all[0]), median(all[1]), median(all[1]) / median(all[0]));
}

}  // namespace

int main(int argc, char** argv) {
  const int reps = argc > 1 ? std::max(3, std::atoi(argv[1])) : 11;
  std::printf("| T | S | k/v row stride | forward CPU ms packed / in place | in place / packed | fwd + bwd CPU ms "
              "packed / in place | in place / packed |\n|---|---|---|---|---|---|---|\n");
  row(512, 1024, 2, reps);
  row(512, 512, 3, reps);
  row(2048, 2048, 3, std::max(3, reps / 3));
  row(4096, 4096, 3, std::max(3, reps / 5));
  return 0;
}
