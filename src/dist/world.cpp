#include "dist/world.h"

#include <climits>
#include <cstdlib>

#ifdef STRETCH_HAVE_MPI
#include <mpi.h>
#endif

namespace stretch::dist {

World& World::get() {
  static World w;
  return w;
}

World::World() {
#ifdef STRETCH_HAVE_MPI
  // Only join MPI when started by a launcher; a plain `stretch train` stays single-process.
  if (std::getenv("OMPI_COMM_WORLD_SIZE") || std::getenv("PMI_SIZE")) {
    int init = 0;
    MPI_Initialized(&init);
    if (!init) MPI_Init(nullptr, nullptr);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
    std::atexit([] {
      int fin = 0;
      MPI_Finalized(&fin);
      if (!fin) MPI_Finalize();
    });
  }
#endif
}

void World::allreduce_sum(float* data, int64_t n) const {
  if (size_ == 1) return;
#ifdef STRETCH_HAVE_MPI
  for (int64_t off = 0; off < n; off += INT_MAX) {
    int cnt = static_cast<int>(n - off < INT_MAX ? n - off : INT_MAX);
    MPI_Allreduce(MPI_IN_PLACE, data + off, cnt, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  }
#endif
}

void World::allreduce_sum(double* data, int64_t n) const {
  if (size_ == 1) return;
#ifdef STRETCH_HAVE_MPI
  MPI_Allreduce(MPI_IN_PLACE, data, static_cast<int>(n), MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
#endif
}

void World::barrier() const {
#ifdef STRETCH_HAVE_MPI
  if (size_ > 1) MPI_Barrier(MPI_COMM_WORLD);
#endif
}

}  // namespace stretch::dist
