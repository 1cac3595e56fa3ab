// bench/bench_attention_relkey.cpp — the attention op's relative-key term and soft span mask
// against the plain kernel in the same run, as ratios of median forward+backward process CPU
// times, the variants interleaved call by call (results and command in docs/BENCHMARKS.md,
// "Relative keys and soft span mask").
//   xl_over_alibi        Transformer-XL attention (per-head R, u, w) vs ALiBi, T = 512, S = 1024
//                        (memory 512), B = 1, H = 8, D = 64; also with same_length (window 512)
//   span<L>_over_window  Adaptive Span (shared key_pe, distance ≥ 1, soft mask after the softmax,
//                        window L + 1, cache L) vs plain windowed attention of the same window
//   span_log_…           the renormalised mask with L = 1024, z = 0.25 (no window given: the
//                        kernel narrows it to 289) vs plain window 289, and for scale the plain
//                        unwindowed attention over the same S = 1536 keys vs window 289
// Run: OMP_NUM_THREADS=1 build/bench/bench_attention_relkey [reps]   (a plain program, ~1 minute)
#include <algorithm>
#include <ctime>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <vector>

#include "core/rng.h"
#include "ops/alibi.h"
#include "ops/attention.h"

namespace {

using namespace stretch;
using namespace stretch::ops;

struct Buffers {
  std::vector<float> q, k, v, dout, out, lse, dq, dk, dv;
  Buffers(int64_t B, int64_t H, int64_t T, int64_t S, int64_t D) {
    Rng rng(1, 2);
    auto fill = [&](std::vector<float>& x, size_t n) {
      x.resize(n);
      for (auto& e : x) e = rng.uniform(-1.f, 1.f);
    };
    fill(q, B * H * T * D), fill(k, B * H * S * D), fill(v, B * H * S * D), fill(dout, B * H * T * D);
    out.resize(q.size()), lse.resize(B * H * T), dq.resize(q.size()), dk.resize(k.size()), dv.resize(v.size());
  }
};

// Process CPU time (all threads): other jobs on a shared machine do not inflate it (run with
// OMP_NUM_THREADS=1 so no barrier spinning is counted either).
double cpu_ms() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) * 1e-6;
}

double fwd_bwd_ms(Buffers& b, const AttentionParams& p, const AttentionGrads& g) {
  const double t0 = cpu_ms();
  attention_forward(b.out.data(), b.lse.data(), b.q.data(), b.k.data(), b.v.data(), p);
  attention_backward(b.dq.data(), b.dk.data(), b.dv.data(), g, b.dout.data(), b.q.data(), b.k.data(), b.v.data(),
                     b.out.data(), b.lse.data(), p, GradInit::Overwrite);
  return cpu_ms() - t0;
}

double median(std::vector<double> x) {
  std::sort(x.begin(), x.end());
  return x[x.size() / 2];
}

// Median times of a (baseline) and b, interleaved call by call after one warm-up each.
void compare(const char* name, int reps, const std::function<double()>& a, const std::function<double()>& b) {
  a(), b();
  std::vector<double> ta, tb;
  for (int r = 0; r < reps; ++r) ta.push_back(a()), tb.push_back(b());
  const double ma = median(ta), mb = median(tb);
  std::printf("%-34s base %8.2f ms  variant %8.2f ms  ratio %.3f\n", name, ma, mb, mb / ma);
}

}  // namespace

int main(int argc, char** argv) {
  const int reps = argc > 1 ? std::atoi(argv[1]) : 7;
  const int64_t B = 1, H = 8, T = 512, D = 64;
  {
    const int64_t S = 1024;
    Buffers buf(B, H, T, S, D);
    const std::vector<float> slopes = alibi_slopes(static_cast<int>(H));
    std::vector<float> r(S * H * D), u(H * D), w(H * D), dr(r.size()), du(u.size()), dw(w.size());
    Rng rng(3, 4);
    for (auto* x : {&r, &u, &w})
      for (auto& e : *x) e = rng.uniform(-1.f, 1.f);
    AttentionParams alibi;
    alibi.b = B, alibi.h = H, alibi.t = T, alibi.s = S, alibi.d = D, alibi.bias = BiasPolicy::Alibi;
    alibi.alibi.slopes = slopes.data();
    AttentionParams xl = alibi;
    xl.bias = BiasPolicy::None;
    xl.relkey = RelKeyOptions{.r = r.data(), .rows = S, .u = u.data(), .w = w.data()};
    const AttentionGrads g_xl{.drel_r = dr.data(), .drel_u = du.data(), .drel_w = dw.data()};
    compare("xl_over_alibi T512 S1024", reps, [&] { return fwd_bwd_ms(buf, alibi, {}); },
            [&] { return fwd_bwd_ms(buf, xl, g_xl); });
    AttentionParams alibi_w = alibi, xl_w = xl;
    alibi_w.window = xl_w.window = 512;
    compare("xl_same_length_over_alibi W512", reps, [&] { return fwd_bwd_ms(buf, alibi_w, {}); },
            [&] { return fwd_bwd_ms(buf, xl_w, g_xl); });
  }
  for (int64_t L : {64, 256, 1024}) {
    const int64_t S = T + L;
    Buffers buf(B, H, T, S, D);
    std::vector<float> pe(L * D), dpe(pe.size()), z(H), dz(H);
    Rng rng(5, 6);
    for (auto& e : pe) e = rng.uniform(-1.f, 1.f);
    for (int64_t h = 0; h < H; ++h) z[h] = 0.5f + 0.05f * static_cast<float>(h);
    AttentionParams win;
    win.b = B, win.h = H, win.t = T, win.s = S, win.d = D, win.window = L + 1;
    AttentionParams span = win;
    span.min_distance = 1;
    span.relkey = RelKeyOptions{.r = pe.data(), .rows = L, .dist0 = 1, .share = RelKeyShare::Shared};
    span.span = SpanMaskOptions{.z = z.data(), .heads = H, .ramp = 32.f, .max_span = L};
    const AttentionGrads g_span{.drel_r = dpe.data(), .dspan_z = dz.data()};
    char name[64];
    std::snprintf(name, sizeof(name), "span%lld_over_window", static_cast<long long>(L));
    compare(name, reps, [&] { return fwd_bwd_ms(buf, win, {}); }, [&] { return fwd_bwd_ms(buf, span, g_span); });
  }
  {  // The renormalised mask narrows the window itself: L = 1024, z = 0.25 → m > 0 for d < 289.
    const int64_t L = 1024, S = T + L, W = 289;
    Buffers buf(B, H, T, S, D);
    std::vector<float> pe(L * D), dpe(pe.size()), z(H, 0.25f), dz(H);
    Rng rng(7, 8);
    for (auto& e : pe) e = rng.uniform(-1.f, 1.f);
    AttentionParams win;
    win.b = B, win.h = H, win.t = T, win.s = S, win.d = D, win.window = W;
    AttentionParams full = win;
    full.window = 0;
    AttentionParams span = full;
    span.min_distance = 1;
    span.relkey = RelKeyOptions{.r = pe.data(), .rows = L, .dist0 = 1, .share = RelKeyShare::Shared};
    span.span = SpanMaskOptions{
        .z = z.data(), .heads = H, .ramp = 32.f, .max_span = L, .mode = SpanMaskMode::LogBeforeSoftmax};
    const AttentionGrads g_span{.drel_r = dpe.data(), .dspan_z = dz.data()};
    compare("span_log_z.25_L1024_over_window289", reps, [&] { return fwd_bwd_ms(buf, win, {}); },
            [&] { return fwd_bwd_ms(buf, span, g_span); });
    compare("full_S1536_over_window289", reps, [&] { return fwd_bwd_ms(buf, win, {}); },
            [&] { return fwd_bwd_ms(buf, full, {}); });
  }
  return 0;
}
