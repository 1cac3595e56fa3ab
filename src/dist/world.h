// dist/world.h — data parallelism: the set of processes training one model.
// Contract: World::get() is a world of size 1 when stretch is built without MPI or started
// without mpirun; with MPI it spans MPI_COMM_WORLD. allreduce_sum() sums a float buffer
// across ranks in place (gradients), identical on every rank afterwards.
#pragma once
#include <cstdint>

namespace stretch::dist {

class World {
 public:
  static World& get();
  int rank() const { return rank_; }
  int size() const { return size_; }
  bool is_main() const { return rank_ == 0; }
  void allreduce_sum(float* data, int64_t n) const;
  void allreduce_sum(double* data, int64_t n) const;
  void barrier() const;

 private:
  World();
  int rank_ = 0, size_ = 1;
};

}  // namespace stretch::dist
