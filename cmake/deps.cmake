# Third-party libraries, all from Debian packages installed by scripts/setup.sh.
find_package(OpenMP REQUIRED)
find_package(Threads REQUIRED)
# libdnnl-dev: GEMM. Found by hand: Debian's dnnl-config.cmake insists on OpenCL headers
# (its GPU runtime), which the CPU build does not need.
find_library(DNNL_LIBRARY NAMES dnnl REQUIRED)
find_path(DNNL_INCLUDE_DIR oneapi/dnnl/dnnl.h REQUIRED)
add_library(DNNL::dnnl UNKNOWN IMPORTED)
set_target_properties(DNNL::dnnl PROPERTIES IMPORTED_LOCATION ${DNNL_LIBRARY}
                      INTERFACE_INCLUDE_DIRECTORIES ${DNNL_INCLUDE_DIR})
find_package(CLI11 REQUIRED)              # libcli11-dev
find_package(nlohmann_json 3 REQUIRED)    # nlohmann-json3-dev
find_package(PkgConfig REQUIRED)
pkg_check_modules(LIBZIP REQUIRED IMPORTED_TARGET libzip)  # libzip-dev: PyTorch .pt (zip) files
if(STRETCH_MPI)
  find_package(MPI COMPONENTS CXX)
endif()
