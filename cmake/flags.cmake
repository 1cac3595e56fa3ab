# Compiler flags: Release tuned for the host by default, portable on request, sanitizers on request.
add_compile_options(-Wall -Wextra -Wno-unused-parameter)
if(STRETCH_WERROR)
  add_compile_options(-Werror)
endif()
if(STRETCH_NATIVE)
  # 512-bit vectors for the compiler's own vectorisation wherever the host has AVX-512 (ignored
  # without it). GCC 12 takes an Intel Xeon family 6 model 167 (AMX) for a Rocket Lake and tunes
  # for 256-bit vectors there: its auto-vectorised loops then summed in another order than on
  # Zen 4 or the Intel model 207, and the same commit trained to other bits (scripts/
  # check_train_logs.sh: every fp32 digest differed). With the preference fixed, that host gives
  # Zen 4's digests and trains at 1.00-1.03x the speed (docs/identity.md, session 36).
  add_compile_options(-march=native -mprefer-vector-width=512)
else()
  add_compile_options(-march=x86-64-v3)
endif()
set(CMAKE_CXX_FLAGS_RELEASE "-O3 -DNDEBUG")
set(CMAKE_CXX_FLAGS_RELWITHDEBINFO "-O2 -g -DNDEBUG")
if(STRETCH_SANITIZE)
  # -O1 -g1 (line tables: every report still names file:line) halves the instrumented build's
  # compile time against -O2 -g (GCC 12: test_train_cli.cpp 98 s -> 48 s of CPU); tests/ drops to
  # -O0 (24 s): the build is most of CI's sanitizer stage, the suite itself under 3 minutes.
  set(CMAKE_CXX_FLAGS_RELWITHDEBINFO "-O1 -g1 -DNDEBUG")
  add_compile_options(-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined)
  # GCC 12 at -O1 with ASan warns "may be used uninitialized" inside libstdc++'s <regex>
  # (std::function in _NFA::_M_insert_subexpr_*): a known false positive of the instrumented
  # build; the Release build keeps the warning.
  add_compile_options(-Wno-maybe-uninitialized)
  add_link_options(-fsanitize=address,undefined)
endif()
if(STRETCH_TSAN)
  # ThreadSanitizer needs to see every synchronisation, OpenMP's barriers included: LLVM's libomp
  # tells it through its Archer tool (cmake/tsan.cmake); GCC's libgomp does not, and every barrier
  # would read as a race. -O1 -g1 as the ASan build.
  if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    message(FATAL_ERROR "STRETCH_TSAN needs clang: configure with -DCMAKE_CXX_COMPILER=clang++ (scripts/test.sh --tsan does)")
  endif()
  if(STRETCH_SANITIZE)
    message(FATAL_ERROR "STRETCH_TSAN and STRETCH_SANITIZE exclude each other (ThreadSanitizer cannot run with ASan)")
  endif()
  set(CMAKE_CXX_FLAGS_RELWITHDEBINFO "-O1 -g1 -DNDEBUG")
  add_compile_options(-fsanitize=thread -fno-omit-frame-pointer)
  add_link_options(-fsanitize=thread)
endif()
if(STRETCH_FUZZ)
  # libFuzzer (clang only; Debian's libclang-rt-14-dev): every library is instrumented for coverage
  # with ASan+UBSan, the fuzz targets link the fuzzer's main (tests/fuzz/CMakeLists.txt).
  if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    message(FATAL_ERROR "STRETCH_FUZZ needs clang: configure with -DCMAKE_CXX_COMPILER=clang++ (tests/fuzz/run.sh does)")
  endif()
  add_compile_options(-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer -g)
  add_link_options(-fsanitize=address,undefined)
endif()
