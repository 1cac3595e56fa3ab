// tests/parity/relkey_dump/relkey_attention_dump.cpp — runs the fused attention op with the
// relative-key term on inputs written by check_relkey_attention.py and writes what it computes,
// for the PyTorch oracle to compare (tests/parity/README.md).
//   stretch_relkey_dump IN OUT
// IN: int64 header [B, H, T, S, D, window, clamp, rows, mem_len_unused], then float32 arrays
//   q, k, v, dout [B, H, T|S, D], R [rows, H, D] in Transformer-XL's order (row j' = distance
//   rows − 1 − j'), u, w [H, D].
// OUT: float32 out [B,H,T,D], lse [B,H,T], dq, dk, dv, dR (R's layout), du, dw.
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <vector>

#include "core/error.h"
#include "ops/attention.h"

namespace {

std::vector<float> read_floats(std::ifstream& in, size_t n, const char* what) {
  std::vector<float> x(n);
  in.read(reinterpret_cast<char*>(x.data()), static_cast<std::streamsize>(n * sizeof(float)));
  if (!in) throw std::runtime_error(std::string("relkey dump: input ends inside ") + what);
  return x;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace stretch::ops;
  if (argc != 3) {
    std::cerr << "usage: stretch_relkey_dump IN OUT\n";
    return 2;
  }
  try {
    std::ifstream in(argv[1], std::ios::binary);
    if (!in) throw std::runtime_error(std::string("relkey dump: cannot open ") + argv[1]);
    int64_t hd[9] = {};
    in.read(reinterpret_cast<char*>(hd), sizeof(hd));
    if (!in) throw std::runtime_error("relkey dump: short header");
    const int64_t B = hd[0], H = hd[1], T = hd[2], S = hd[3], D = hd[4], window = hd[5], clamp = hd[6], rows = hd[7];
    const size_t nq = B * H * T * D, nkv = B * H * S * D, nr = rows * H * D;
    const auto q = read_floats(in, nq, "q"), k = read_floats(in, nkv, "k"), v = read_floats(in, nkv, "v");
    const auto dout = read_floats(in, nq, "dout"), r = read_floats(in, nr, "R");
    const auto u = read_floats(in, H * D, "u"), w = read_floats(in, H * D, "w");
    AttentionParams p;
    p.b = B, p.h = H, p.t = T, p.s = S, p.d = D;
    p.window = window;
    p.relkey = RelKeyOptions{.r = r.data() + (rows - 1) * H * D,
                             .rows = rows,
                             .row_stride = -H * D,
                             .head_stride = D,
                             .elem_stride = 1,
                             .u = u.data(),
                             .w = w.data(),
                             .clamp = clamp};
    std::vector<float> out(nq), lse(B * H * T), dq(nq), dk(nkv), dv(nkv), dr(nr), du(H * D), dw(H * D);
    attention_forward(out.data(), lse.data(), q.data(), k.data(), v.data(), p);
    const AttentionGrads g{.drel_r = dr.data() + (rows - 1) * H * D, .drel_u = du.data(), .drel_w = dw.data()};
    attention_backward(dq.data(), dk.data(), dv.data(), g, dout.data(), q.data(), k.data(), v.data(), out.data(),
                       lse.data(), p, GradInit::Overwrite);
    std::ofstream os(argv[2], std::ios::binary);
    for (const auto* x : {&out, &lse, &dq, &dk, &dv, &dr, &du, &dw})
      os.write(reinterpret_cast<const char*>(x->data()), static_cast<std::streamsize>(x->size() * sizeof(float)));
    if (!os) throw std::runtime_error(std::string("relkey dump: cannot write ") + argv[2]);
  } catch (const std::exception& e) {
    std::cerr << e.what() << "\n";
    return 1;
  }
  return 0;
}
