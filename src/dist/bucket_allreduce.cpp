#include "dist/bucket_allreduce.h"

#include <algorithm>
#include <climits>
#include <cstring>

#include "core/error.h"

#ifdef STRETCH_HAVE_MPI
#include <mpi.h>
#endif

namespace stretch::dist {

struct BucketAllreduce::Mpi {
#ifdef STRETCH_HAVE_MPI
  // Two communicators: the all-to-alls and the all-gathers are each issued in bucket order on
  // every rank, but they interleave differently on different ranks (a gather starts when this
  // rank sees its exchange done), and MPI orders collectives per communicator.
  MPI_Comm exchange = MPI_COMM_NULL, gather = MPI_COMM_NULL;
  std::vector<MPI_Request> exchange_req, gather_req;  // per bucket
#endif
};

BucketAllreduce::BucketAllreduce(const World& world, std::vector<GradSlice> params, int64_t cap_bytes)
    : world_(world), params_(std::move(params)), mpi_(std::make_unique<Mpi>()) {
  std::vector<int64_t> numels;
  for (const GradSlice& p : params_) numels.push_back(p.numel);
  buckets_ = grad_buckets(numels, cap_bytes);
  bucket_of_.assign(params_.size(), 0);
  const int64_t n = world_.size();
  for (size_t b = 0; b < buckets_.size(); ++b) {
    for (size_t p : buckets_[b].params) bucket_of_[p] = b;
    const int64_t chunk = (buckets_[b].numel + n - 1) / n;
    STRETCH_CHECK(chunk <= INT_MAX, "bucketed all-reduce: a bucket of " << buckets_[b].numel
                                        << " gradients is more than INT_MAX per rank; lower --bucket-cap-mb");
    chunk_.push_back(chunk);
  }
  if (n == 1) return;
#ifdef STRETCH_HAVE_MPI
  for (size_t b = 0; b < buckets_.size(); ++b) {
    flat_.emplace_back(static_cast<size_t>(n * chunk_[b]), 0.0f);
    parts_.emplace_back(static_cast<size_t>(n * chunk_[b]), 0.0f);
  }
  MPI_Comm_dup(MPI_COMM_WORLD, &mpi_->exchange);
  MPI_Comm_dup(MPI_COMM_WORLD, &mpi_->gather);
  mpi_->exchange_req.assign(buckets_.size(), MPI_REQUEST_NULL);
  mpi_->gather_req.assign(buckets_.size(), MPI_REQUEST_NULL);
#endif
}

BucketAllreduce::~BucketAllreduce() {
#ifdef STRETCH_HAVE_MPI
  int fin = 0;
  MPI_Finalized(&fin);
  if (!fin && mpi_->exchange != MPI_COMM_NULL) MPI_Comm_free(&mpi_->exchange);
  if (!fin && mpi_->gather != MPI_COMM_NULL) MPI_Comm_free(&mpi_->gather);
#endif
}

void BucketAllreduce::begin() {
  pending_.assign(buckets_.size(), 0);
  for (size_t b = 0; b < buckets_.size(); ++b) pending_[b] = static_cast<int64_t>(buckets_[b].params.size());
  is_ready_.assign(params_.size(), 0);
  next_launch_ = next_gather_ = 0;
  launched_early_ = 0;
}

void BucketAllreduce::ready(size_t param) {
  if (world_.size() == 1 || is_ready_[param]) return;
  is_ready_[param] = 1;
  --pending_[bucket_of_[param]];
  launch_ready();
}

void BucketAllreduce::launch_ready() {
  while (next_launch_ < buckets_.size() && pending_[next_launch_] == 0) {
    launch(next_launch_++);
    ++launched_early_;
  }
}

void BucketAllreduce::launch(size_t b) {
#ifdef STRETCH_HAVE_MPI
  const GradBucket& bk = buckets_[b];
  float* flat = flat_[b].data();
  for (size_t i = 0; i < bk.params.size(); ++i) {
    const GradSlice& p = params_[bk.params[i]];
    std::memcpy(flat + bk.offset[i], p.grad, static_cast<size_t>(p.numel) * sizeof(float));
  }
  const int chunk = static_cast<int>(chunk_[b]);
  MPI_Ialltoall(flat, chunk, MPI_FLOAT, parts_[b].data(), chunk, MPI_FLOAT, mpi_->exchange, &mpi_->exchange_req[b]);
#endif
}

// This rank's chunk: the sum over ranks in rank order, then every rank's chunk to every rank.
void BucketAllreduce::reduce_and_gather(size_t b) {
#ifdef STRETCH_HAVE_MPI
  const int64_t chunk = chunk_[b], n = world_.size();
  float* out = flat_[b].data() + world_.rank() * chunk;  // [chunk]
  const float* parts = parts_[b].data();                 // [n, chunk]
  std::memcpy(out, parts, static_cast<size_t>(chunk) * sizeof(float));
  for (int64_t r = 1; r < n; ++r) {
    const float* g = parts + r * chunk;
    for (int64_t j = 0; j < chunk; ++j) out[j] += g[j];
  }
  MPI_Iallgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, flat_[b].data(), static_cast<int>(chunk), MPI_FLOAT, mpi_->gather,
                 &mpi_->gather_req[b]);
#endif
}

void BucketAllreduce::poll() {
#ifdef STRETCH_HAVE_MPI
  if (world_.size() == 1) return;
  while (next_gather_ < next_launch_) {
    int done = 0;
    MPI_Test(&mpi_->exchange_req[next_gather_], &done, MPI_STATUS_IGNORE);
    if (!done) break;
    reduce_and_gather(next_gather_++);
  }
  // Testing the oldest gather also drives MPI's progress engine for the others.
  for (size_t b = 0; b < next_gather_; ++b) {
    if (mpi_->gather_req[b] == MPI_REQUEST_NULL) continue;
    int done = 0;
    MPI_Test(&mpi_->gather_req[b], &done, MPI_STATUS_IGNORE);
    break;
  }
#endif
}

void BucketAllreduce::finish() {
#ifdef STRETCH_HAVE_MPI
  if (world_.size() == 1) return;
  while (next_launch_ < buckets_.size()) launch(next_launch_++);  // parameters no op took, or backward's tail
  while (next_gather_ < buckets_.size()) {
    MPI_Wait(&mpi_->exchange_req[next_gather_], MPI_STATUS_IGNORE);
    reduce_and_gather(next_gather_++);
  }
  MPI_Waitall(static_cast<int>(buckets_.size()), mpi_->gather_req.data(), MPI_STATUSES_IGNORE);
  for (size_t b = 0; b < buckets_.size(); ++b) {
    const GradBucket& bk = buckets_[b];
    for (size_t i = 0; i < bk.params.size(); ++i) {
      const GradSlice& p = params_[bk.params[i]];
      std::memcpy(p.grad, flat_[b].data() + bk.offset[i], static_cast<size_t>(p.numel) * sizeof(float));
    }
  }
#endif
}

}  // namespace stretch::dist
