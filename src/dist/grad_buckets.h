// dist/grad_buckets.h — how gradients are grouped for the data-parallel all-reduce.
// Contract: grad_buckets(numels, cap_bytes) walks the parameters in REVERSE registration order
// (backward finishes the last layers first) and closes a bucket once it holds >= cap_bytes of
// fp32 gradient (DDP's / fairseq's --bucket-cap-mb rule; a parameter larger than the cap is a
// bucket of its own; cap 0: one parameter per bucket). Every parameter is in exactly one bucket;
// the layout depends only on the sizes, so every rank builds the same one.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

namespace stretch::dist {

struct GradBucket {
  std::vector<size_t> params;   // indices into the parameter list, in the bucket's order
  std::vector<int64_t> offset;  // each parameter's first element in the bucket's flat buffer
  int64_t numel = 0;            // elements in the bucket
};

std::vector<GradBucket> grad_buckets(const std::vector<int64_t>& numels, int64_t cap_bytes);

}  // namespace stretch::dist
