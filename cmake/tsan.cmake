# STRETCH_TSAN (cmake/flags.cmake): one OpenMP runtime for the whole process, and Archer.
# stretch is compiled against clang's libomp, but Debian's libdnnl and OpenBLAS (openmp build) link
# libgomp.so.1: two runtimes would each run their own thread pool (a oneDNN call inside a
# concurrent backward section would start two more threads, not run on one) and ThreadSanitizer
# would not see libgomp's barriers. libomp implements libgomp's ABI (its GOMP_* entry points, with
# libgomp's symbol versions), so build-tsan/tsan-omp/libgomp.so.1 is a link to libomp and
# build-tsan/tsan.env puts it first on LD_LIBRARY_PATH; the loader then maps libomp once for all
# three (same file). OMP_TOOL_LIBRARIES loads Archer, which tells ThreadSanitizer what the
# runtime's barriers, locks and tasks order. scripts/test.sh --tsan reads tsan.env.
if(NOT STRETCH_TSAN)
  return()
endif()
if(NOT OpenMP_omp_LIBRARY)
  message(FATAL_ERROR "STRETCH_TSAN: clang's OpenMP runtime (libomp) was not found: install libomp-dev (scripts/setup.sh)")
endif()
get_filename_component(STRETCH_OMP_REAL ${OpenMP_omp_LIBRARY} REALPATH)
get_filename_component(STRETCH_OMP_DIR ${OpenMP_omp_LIBRARY} DIRECTORY)
find_library(STRETCH_ARCHER_LIBRARY NAMES archer HINTS ${STRETCH_OMP_DIR} NO_DEFAULT_PATH)
if(NOT STRETCH_ARCHER_LIBRARY)
  message(FATAL_ERROR "STRETCH_TSAN: libarcher.so not found next to ${OpenMP_omp_LIBRARY}: install libomp-dev (scripts/setup.sh)")
endif()
file(MAKE_DIRECTORY ${CMAKE_BINARY_DIR}/tsan-omp)
file(CREATE_LINK ${STRETCH_OMP_REAL} ${CMAKE_BINARY_DIR}/tsan-omp/libgomp.so.1 SYMBOLIC)
file(WRITE ${CMAKE_BINARY_DIR}/tsan.env
     "LD_LIBRARY_PATH=${CMAKE_BINARY_DIR}/tsan-omp\nOMP_TOOL_LIBRARIES=${STRETCH_ARCHER_LIBRARY}\n")
