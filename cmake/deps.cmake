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
# libopenblas-openmp-dev: the plain fp32 products on CPUs without AVX-512 (ops/gemm.h). The OpenMP
# build (it runs on the same libgomp pool as oneDNN and stretch's kernels, so --threads N sets it
# too), named explicitly: Debian's alternatives may point libopenblas.so at the pthread build.
find_library(OPENBLAS_LIBRARY NAMES openblas REQUIRED
             HINTS /usr/lib/${CMAKE_LIBRARY_ARCHITECTURE}/openblas-openmp NO_DEFAULT_PATH)
find_path(OPENBLAS_INCLUDE_DIR cblas.h REQUIRED
          HINTS /usr/include/${CMAKE_LIBRARY_ARCHITECTURE}/openblas-openmp NO_DEFAULT_PATH)
# Not linked: ops/gemm_openblas.cpp loads it with dlopen by this path when it is first chosen (its
# load-time constructor hangs under a memory limit, where stretch keeps oneDNN instead).
get_filename_component(OPENBLAS_LIBRARY_REAL ${OPENBLAS_LIBRARY} REALPATH)
find_package(CLI11 REQUIRED)              # libcli11-dev
find_package(nlohmann_json 3 REQUIRED)    # nlohmann-json3-dev
find_package(PkgConfig REQUIRED)
pkg_check_modules(LIBZIP REQUIRED IMPORTED_TARGET libzip)  # libzip-dev: PyTorch .pt (zip) files
if(STRETCH_MPI)
  find_package(MPI COMPONENTS CXX)
endif()
# pybind11-dev + python3-dev: the Python module (python/). Its code goes into a shared object, so
# every layer is then compiled position-independent; -fno-semantic-interposition keeps the
# inlining (and so the numbers) of the position-independent executables GCC builds by default.
# Off in sanitizer and fuzz builds (the module would need the sanitizer runtime preloaded).
if(STRETCH_PYTHON_MODULE AND (STRETCH_SANITIZE OR STRETCH_FUZZ))
  set(STRETCH_PYTHON_MODULE OFF)
endif()
if(STRETCH_PYTHON_MODULE)
  set(PYBIND11_FINDPYTHON ON)
  # Debian's interpreter (the one python3-numpy, python3-pytest and build/pyenv use), not another
  # python3 first on PATH; -DPython3_EXECUTABLE=... chooses another.
  if(NOT DEFINED Python3_EXECUTABLE AND EXISTS /usr/bin/python3)
    set(Python3_EXECUTABLE /usr/bin/python3)
  endif()
  find_package(Python3 COMPONENTS Interpreter Development.Module)
  find_package(pybind11 2.6 CONFIG QUIET)
  if(pybind11_FOUND AND Python3_FOUND)
    set(CMAKE_POSITION_INDEPENDENT_CODE ON)
    add_compile_options(-fno-semantic-interposition)
    message(STATUS "stretch: Python module enabled (pybind11 ${pybind11_VERSION}, Python ${Python3_VERSION})")
  else()
    message(STATUS "stretch: no Python module (pybind11-dev / python3-dev not found; bash scripts/setup.sh installs them)")
    set(STRETCH_PYTHON_MODULE OFF)
  endif()
endif()
