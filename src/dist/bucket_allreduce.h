// dist/bucket_allreduce.h — the data-parallel gradient sum in buckets, started during backward.
// Contract (docs/architecture.md, "Bucketed all-reduce"):
//   * construct on every rank with the same parameter list (fp32 gradient buffers) and cap;
//     the buckets are grad_buckets(numels, cap) (reverse registration order);
//   * per update: begin(); ready(p) once parameter p's gradient is final (any order; the
//     autograd GradReady says when); poll() now and then; finish() launches what is left, waits,
//     and writes the sums back into the gradient buffers;
//   * buckets are launched strictly in bucket order, when a bucket and all before it are ready,
//     so every rank issues the same collectives in the same order whatever its readiness order;
//   * the sum of every element is ((g_0 + g_1) + g_2) + ... in rank order, on every rank and for
//     any bucket layout: each bucket is cut into `size` chunks, rank r receives chunk r from every
//     rank (all-to-all), adds them in rank order and the sums are all-gathered. So the result does
//     not depend on --bucket-cap-mb, on timing or on MPI's algorithm choice, and for 2 ranks it
//     equals MPI_Allreduce's bit for bit (a + b = b + a).
// A world of size 1 (or a build without MPI): every call is a no-op and gradients are untouched.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "dist/grad_buckets.h"
#include "dist/world.h"

namespace stretch::dist {

struct GradSlice {
  float* grad = nullptr;  // [numel]
  int64_t numel = 0;
};

class BucketAllreduce {
 public:
  BucketAllreduce(const World& world, std::vector<GradSlice> params, int64_t cap_bytes);
  ~BucketAllreduce();
  BucketAllreduce(const BucketAllreduce&) = delete;
  BucketAllreduce& operator=(const BucketAllreduce&) = delete;

  void begin();
  void ready(size_t param);
  void poll();
  void finish();

  size_t num_buckets() const { return buckets_.size(); }
  const std::vector<GradSlice>& params() const { return params_; }
  const std::vector<GradBucket>& buckets() const { return buckets_; }
  // Buckets launched before finish() in the last update (the overlap with backward).
  size_t launched_early() const { return launched_early_; }

 private:
  struct Mpi;  // requests and communicators (dist/bucket_allreduce.cpp)
  void launch_ready();
  void launch(size_t b);
  void reduce_and_gather(size_t b);

  const World& world_;
  std::vector<GradSlice> params_;
  std::vector<GradBucket> buckets_;
  std::vector<size_t> bucket_of_;          // per parameter
  std::vector<int64_t> pending_;           // per bucket: parameters not yet ready
  std::vector<uint8_t> is_ready_;          // per parameter
  std::vector<int64_t> chunk_;             // per bucket: elements per rank's chunk
  std::vector<std::vector<float>> flat_;   // per bucket [size · chunk]: this rank's gradients, then the sums
  std::vector<std::vector<float>> parts_;  // per bucket [size · chunk]: chunk `rank` of every rank
  size_t next_launch_ = 0, next_gather_ = 0;
  size_t launched_early_ = 0;
  std::unique_ptr<Mpi> mpi_;
};

}  // namespace stretch::dist
