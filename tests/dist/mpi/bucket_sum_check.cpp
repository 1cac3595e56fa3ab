// tests/dist/mpi/bucket_sum_check.cpp — run under mpirun (tests/dist/mpi_bucket_sum.sh, 2 and 3
// ranks): the bucketed all-reduce overlapped with backward (dist/bucket_allreduce.h, watched by
// autograd/grad_ready.h) must give every rank exactly the rank-order float sum of the ranks'
// gradients, for every --bucket-cap-mb, and must really start buckets during backward.
//   * oracle: each rank's plain backward gradients, MPI_Allgather'ed (raw bits, no reduction by
//     MPI), summed here in rank order: ((g0 + g1) + g2);
//   * the bucketed result == oracle bit for bit, for caps 0 (one parameter per bucket), 4 KiB,
//     64 KiB and 25 MiB (one bucket), on a model with tied input/output embeddings and one without;
//   * at cap 0, at least half the buckets started before backward ended (the overlap);
//   * MPI_Allreduce per parameter (the legacy path): == oracle bitwise for 2 ranks (a + b = b + a);
//     for 3 ranks OpenMPI may add in another order, so |allreduce − oracle| <= 2·eps·Σ|g_r|;
//   * a deliberately wrong watch that calls every gradient final after the first closure must
//     NOT match (the comparison can fail).
// Exit 0 when all hold on every rank, 1 otherwise (each failure printed with rank and parameter).
#include <mpi.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <vector>

#include "autograd/grad_ready.h"
#include "autograd/tape.h"
#include "core/rng.h"
#include "dist/bucket_allreduce.h"
#include "models/transformer_lm/transformer_lm.h"
#include "train/update.h"

namespace {

using namespace stretch;

int g_failures = 0;

void fail(int rank, const char* what) {
  std::fprintf(stderr, "rank %d: FAIL: %s\n", rank, what);
  ++g_failures;
}

models::TransformerLMConfig tiny(bool tied) {
  models::TransformerLMConfig c = models::preset("transformer_lm_tiny");
  c.vocab_size = 50;
  c.decoder_layers = 3;
  c.decoder_embed_dim = 32;
  c.decoder_ffn_embed_dim = 64;
  c.decoder_attention_heads = 4;
  c.share_decoder_input_output_embed = tied;
  c.dropout = 0;
  return c;
}

// forward + backward of one rank-specific batch, exactly as train::train_update does it.
void forward_backward(models::TransformerLM& model, const train::LmBatch& b) {
  autograd::Var hidden = model.features(b.src, {.mode = models::Mode::Train, .seed = 1, .step = 0, .micro = 0});
  nn::HeadLoss head = model.head().loss(hidden, b.tgt, 1, nn::LossUse::Training);
  autograd::tape().backward(head.loss);
}

train::LmBatch batch_of(int rank) {
  Rng rng(1000 + static_cast<uint64_t>(rank));
  const int64_t B = 3, T = 16;
  train::LmBatch b{Tensor::empty({B, T}, DType::I32), Tensor::empty({B, T}, DType::I32), B * T};
  for (int64_t i = 0; i < B * T; ++i) {
    b.src.i32()[i] = 4 + static_cast<int32_t>(rng.below(46));
    b.tgt.i32()[i] = 4 + static_cast<int32_t>(rng.below(46));
  }
  return b;
}

std::vector<std::vector<float>> grads_of(models::TransformerLM& model) {
  std::vector<std::vector<float>> out;
  for (const auto& s : train::grad_slices(model)) out.emplace_back(s.grad, s.grad + s.numel);
  return out;
}

bool bitwise_equal(const std::vector<std::vector<float>>& a, const std::vector<std::vector<float>>& b, size_t* param) {
  for (size_t p = 0; p < a.size(); ++p)
    if (a[p].size() != b[p].size() || std::memcmp(a[p].data(), b[p].data(), a[p].size() * sizeof(float)) != 0) {
      *param = p;
      return false;
    }
  return true;
}

// Calls every parameter final after the first closure: the broken watch the check must catch.
class TooEarly final : public autograd::GradWatch {
 public:
  explicit TooEarly(dist::BucketAllreduce& b) : b_(b) {}
  void on_input(const float*, int64_t, size_t) override {}
  void on_entry_done(size_t) override {
    if (done_) return;
    for (size_t p = 0; p < b_.params().size(); ++p) b_.ready(p);
    done_ = true;
  }

 private:
  dist::BucketAllreduce& b_;
  bool done_ = false;
};

void check_model(bool tied, int rank, int size) {
  models::TransformerLM model(tiny(tied));
  model.init(7);  // the same weights on every rank
  const train::LmBatch b = batch_of(rank);
  // The oracle: local gradients, gathered bit-exactly, summed in rank order.
  model.params().zero_grad();
  forward_backward(model, b);
  const auto local = grads_of(model);
  std::vector<std::vector<float>> oracle, mpi = local;
  double err_bound_violations = 0, max_allreduce_diff = 0;
  for (size_t p = 0; p < local.size(); ++p) {
    const int n = static_cast<int>(local[p].size());
    std::vector<float> all(static_cast<size_t>(n) * size);  // [size, n]
    MPI_Allgather(local[p].data(), n, MPI_FLOAT, all.data(), n, MPI_FLOAT, MPI_COMM_WORLD);
    std::vector<float> sum(all.begin(), all.begin() + n);
    for (int r = 1; r < size; ++r)
      for (int j = 0; j < n; ++j) sum[j] += all[static_cast<size_t>(r) * n + j];
    MPI_Allreduce(MPI_IN_PLACE, mpi[p].data(), n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    for (int j = 0; j < n; ++j) {
      double abs_sum = 0;
      for (int r = 0; r < size; ++r) abs_sum += std::fabs(all[static_cast<size_t>(r) * n + j]);
      const double d = std::fabs(static_cast<double>(mpi[p][j]) - sum[j]);
      max_allreduce_diff = std::max(max_allreduce_diff, d);
      if (d > 2 * std::numeric_limits<float>::epsilon() * abs_sum) ++err_bound_violations;
    }
    oracle.push_back(std::move(sum));
  }
  char msg[256];
  size_t bad = 0;
  if (size == 2 && !bitwise_equal(mpi, oracle, &bad)) {
    std::snprintf(msg, sizeof msg, "tied=%d: MPI_Allreduce differs from a + b at parameter %zu", tied, bad);
    fail(rank, msg);
  }
  if (err_bound_violations > 0) {
    std::snprintf(msg, sizeof msg, "tied=%d: MPI_Allreduce off the rank-order sum by more than 2 eps sum|g| (%g elements)",
                  tied, err_bound_violations);
    fail(rank, msg);
  }
  for (int64_t cap : {int64_t{0}, int64_t{4096}, int64_t{65536}, int64_t{25} << 20}) {
    dist::BucketAllreduce buckets(dist::World::get(), train::grad_slices(model), cap);
    model.params().zero_grad();
    buckets.begin();
    size_t reported = 0;
    {
      std::vector<autograd::LeafGrad> leaves;
      for (const auto& s : buckets.params()) leaves.push_back({.grad = s.grad, .numel = s.numel});
      autograd::GradReady ready(std::move(leaves), [&](size_t p) { buckets.ready(p); }, [&] { buckets.poll(); });
      autograd::GradWatchScope watch(&ready);
      forward_backward(model, b);
      reported = ready.reported();
    }
    const size_t early = buckets.launched_early();
    buckets.finish();
    const auto got = grads_of(model);
    if (!bitwise_equal(got, oracle, &bad)) {
      std::snprintf(msg, sizeof msg, "tied=%d cap=%lld: bucketed sum differs from the rank-order sum at parameter %zu",
                    tied, static_cast<long long>(cap), bad);
      fail(rank, msg);
    }
    if (reported != buckets.params().size()) {
      std::snprintf(msg, sizeof msg, "tied=%d cap=%lld: GradReady reported %zu of %zu parameters", tied,
                    static_cast<long long>(cap), reported, buckets.params().size());
      fail(rank, msg);
    }
    if (cap == 0 && 2 * early < buckets.num_buckets()) {
      std::snprintf(msg, sizeof msg, "tied=%d cap=0: only %zu of %zu buckets started during backward", tied, early,
                    buckets.num_buckets());
      fail(rank, msg);
    }
    if (rank == 0)
      std::printf("tied=%d cap=%lld: %zu buckets, %zu started during backward, bitwise %s\n", tied,
                  static_cast<long long>(cap), buckets.num_buckets(), early, g_failures ? "?" : "equal");
  }
  {  // the negative control
    dist::BucketAllreduce buckets(dist::World::get(), train::grad_slices(model), 0);
    model.params().zero_grad();
    buckets.begin();
    {
      TooEarly early(buckets);
      autograd::GradWatchScope watch(&early);
      forward_backward(model, b);
    }
    buckets.finish();
    if (bitwise_equal(grads_of(model), oracle, &bad)) fail(rank, "a watch that starts every bucket after the first closure still matched");
  }
  if (rank == 0) std::printf("tied=%d: MPI_Allreduce vs rank-order sum: max |diff| %.3g\n", tied, max_allreduce_diff);
}

}  // namespace

int main() {
  auto& world = stretch::dist::World::get();
  if (world.size() < 2) {
    std::fprintf(stderr, "bucket_sum_check: run it under mpirun with 2 or more ranks (world size %d)\n", world.size());
    return 1;
  }
  check_model(/*tied=*/true, world.rank(), world.size());
  check_model(/*tied=*/false, world.rank(), world.size());
  int local = g_failures, total = 0;
  MPI_Allreduce(&local, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (world.rank() == 0) std::printf("%s: %d ranks, %d failures\n", total ? "FAIL" : "ok", world.size(), total);
  return total ? 1 : 0;
}
