# Third-party dependencies. Normal builds (KVSIM_DEPS_DIR empty) require the system packages of
# tools/install-deps.sh, exactly as before. With KVSIM_DEPS_DIR = the source bundle written by
# tools/make_gpu_bundle.sh (for the bare GPU machine, where nothing can be installed), each of
# fmt, xxhash, CLI11, nlohmann-json, zlib, GoogleTest and Google Benchmark whose system package is
# not found comes from the bundle instead, and Abseil, which is not bundled, is replaced by
# std::unordered_map in BlockPool.
#
# With KVSIM_STATIC_RUNTIME, fmt is used header-only and xxhash inlined (XXH_INLINE_ALL) from the
# system's headers, so that no object needs their shared libraries (see CMakeLists.txt).
#
# Defines the link targets the rooms use: kvsim_fmt, kvsim_xxhash, kvsim_hash_map,
# CLI11::CLI11, nlohmann_json::nlohmann_json, ZLIB::ZLIB, and (when tests/benchmarks are built)
# GTest::gtest, GTest::gtest_main, benchmark::benchmark.

set(KVSIM_DEPS_DIR "" CACHE PATH
    "Dependency source bundle (tools/make_gpu_bundle.sh) used where a system package is missing")
if(KVSIM_DEPS_DIR)
  get_filename_component(KVSIM_DEPS_DIR "${KVSIM_DEPS_DIR}" ABSOLUTE)
  if(NOT EXISTS "${KVSIM_DEPS_DIR}/MANIFEST")
    message(FATAL_ERROR "kvsim: KVSIM_DEPS_DIR=${KVSIM_DEPS_DIR} is not a dependency bundle (no "
                        "MANIFEST): run tools/make_gpu_bundle.sh and carry .gpu-bundle")
  endif()
  set(kvsim_find_mode QUIET)
else()
  set(kvsim_find_mode REQUIRED)
endif()

# Records where a dependency came from, for the configure summary.
macro(kvsim_dep_source name where)
  message(STATUS "kvsim: ${name} from ${where}")
endmacro()

# --- fmt: the system's library (or its headers alone), else header-only from the bundle ---------
add_library(kvsim_fmt INTERFACE)
find_package(fmt ${kvsim_find_mode})
if(fmt_FOUND AND KVSIM_STATIC_RUNTIME)
  target_link_libraries(kvsim_fmt INTERFACE fmt::fmt-header-only)
  kvsim_dep_source(fmt "the system (${fmt_VERSION}), header-only")
elseif(fmt_FOUND)
  target_link_libraries(kvsim_fmt INTERFACE fmt::fmt)
  kvsim_dep_source(fmt "the system (${fmt_VERSION})")
else()
  target_include_directories(kvsim_fmt SYSTEM INTERFACE "${KVSIM_DEPS_DIR}/include")
  target_compile_definitions(kvsim_fmt INTERFACE FMT_HEADER_ONLY=1)
  kvsim_dep_source(fmt "${KVSIM_DEPS_DIR}/include (header-only)")
endif()

# --- xxhash: pkg-config library, or the bundle's single header inlined ----------------------------
add_library(kvsim_xxhash INTERFACE)
find_package(PkgConfig ${kvsim_find_mode})
if(PkgConfig_FOUND)
  pkg_check_modules(XXHASH ${kvsim_find_mode} IMPORTED_TARGET libxxhash)
endif()
if(XXHASH_FOUND AND KVSIM_STATIC_RUNTIME)
  target_include_directories(kvsim_xxhash SYSTEM INTERFACE ${XXHASH_INCLUDE_DIRS})
  target_compile_definitions(kvsim_xxhash INTERFACE XXH_INLINE_ALL=1)
  kvsim_dep_source(xxhash "the system (${XXHASH_VERSION}), XXH_INLINE_ALL")
elseif(XXHASH_FOUND)
  target_link_libraries(kvsim_xxhash INTERFACE PkgConfig::XXHASH)
  kvsim_dep_source(xxhash "the system (${XXHASH_VERSION})")
else()
  target_include_directories(kvsim_xxhash SYSTEM INTERFACE "${KVSIM_DEPS_DIR}/include")
  target_compile_definitions(kvsim_xxhash INTERFACE XXH_INLINE_ALL=1)
  kvsim_dep_source(xxhash "${KVSIM_DEPS_DIR}/include (XXH_INLINE_ALL)")
endif()

# --- Abseil (BlockPool's hash map): no bundle; std::unordered_map instead --------------------------
add_library(kvsim_hash_map INTERFACE)
find_package(absl ${kvsim_find_mode})
if(absl_FOUND)
  target_link_libraries(kvsim_hash_map INTERFACE absl::flat_hash_map absl::hash)
  kvsim_dep_source(absl "the system (BlockPool uses absl::flat_hash_map)")
else()
  # PUBLIC through kvsim_core: every translation unit must see the same BlockPool layout.
  target_compile_definitions(kvsim_hash_map INTERFACE KVSIM_STD_HASH_MAP=1)
  message(STATUS "kvsim: absl not found: BlockPool uses std::unordered_map (slower; results equal)")
endif()

# --- CLI11 and nlohmann-json (header-only) and zlib: kvsim_sim and the kvsim CLI -------------------
# The bundle carries CLI11's and nlohmann-json's headers and zlib's C source (built here as a static
# library: the GPU machine's image is not known to have zlib's header, so the bundle build never
# depends on it).
find_package(CLI11 ${kvsim_find_mode})
if(CLI11_FOUND)
  kvsim_dep_source(CLI11 "the system (${CLI11_VERSION})")
else()
  add_library(CLI11::CLI11 INTERFACE IMPORTED)
  set_target_properties(CLI11::CLI11 PROPERTIES INTERFACE_INCLUDE_DIRECTORIES "${KVSIM_DEPS_DIR}/include")
  kvsim_dep_source(CLI11 "${KVSIM_DEPS_DIR}/include (header-only)")
endif()
find_package(nlohmann_json 3.10 ${kvsim_find_mode})
if(nlohmann_json_FOUND)
  kvsim_dep_source(nlohmann-json "the system (${nlohmann_json_VERSION})")
else()
  add_library(nlohmann_json::nlohmann_json INTERFACE IMPORTED)
  set_target_properties(nlohmann_json::nlohmann_json PROPERTIES
    INTERFACE_INCLUDE_DIRECTORIES "${KVSIM_DEPS_DIR}/include")
  kvsim_dep_source(nlohmann-json "${KVSIM_DEPS_DIR}/include (header-only)")
endif()
find_package(ZLIB ${kvsim_find_mode})
if(ZLIB_FOUND)
  kvsim_dep_source(zlib "the system (${ZLIB_VERSION_STRING})")
else()
  set(kvsim_zlib_dir "${KVSIM_DEPS_DIR}/zlib")
  if(NOT EXISTS "${kvsim_zlib_dir}/zlib.h")
    message(FATAL_ERROR "kvsim: ${kvsim_zlib_dir} missing: rerun tools/make_gpu_bundle.sh")
  endif()
  enable_language(C) # zlib is C (K&R definitions in 1.2.13: not valid C++); file scope here
  set(kvsim_zlib_sources adler32 compress crc32 deflate gzclose gzlib gzread gzwrite infback
                         inffast inflate inftrees trees uncompr zutil)
  list(TRANSFORM kvsim_zlib_sources PREPEND "${kvsim_zlib_dir}/")
  list(TRANSFORM kvsim_zlib_sources APPEND ".c")
  add_library(kvsim_bundled_zlib STATIC ${kvsim_zlib_sources})
  # What zlib's ./configure finds on Linux: unistd.h (lseek/read/write in gz*.c), stdarg.h.
  target_compile_definitions(kvsim_bundled_zlib PRIVATE HAVE_UNISTD_H HAVE_STDARG_H)
  target_include_directories(kvsim_bundled_zlib SYSTEM INTERFACE "${kvsim_zlib_dir}")
  set_target_properties(kvsim_bundled_zlib PROPERTIES POSITION_INDEPENDENT_CODE ON)
  add_library(ZLIB::ZLIB ALIAS kvsim_bundled_zlib)
  kvsim_dep_source(zlib "${kvsim_zlib_dir} (source, static)")
endif()

# --- NLopt (kvsim calibrate's optimiser): optional in bundle builds, which then lack `calibrate` --
find_package(NLopt CONFIG ${kvsim_find_mode})
if(TARGET NLopt::nlopt)
  kvsim_dep_source(NLopt "the system (${NLopt_VERSION})")
else()
  message(STATUS "kvsim: NLopt not found: the calibrate command is not built")
endif()

# --- GoogleTest / Google Benchmark: built from the bundle's source --------------------------------
# Their own tests, installs and -Werror are off; our warning flags never reach them
# (kvsim_warnings is per target).
macro(kvsim_bundle_subproject dir)
  if(NOT EXISTS "${KVSIM_DEPS_DIR}/${dir}/CMakeLists.txt")
    message(FATAL_ERROR "kvsim: ${KVSIM_DEPS_DIR}/${dir} missing: rerun tools/make_gpu_bundle.sh")
  endif()
  set(CMAKE_POLICY_DEFAULT_CMP0077 NEW) # option() honours the variables set below
  add_subdirectory("${KVSIM_DEPS_DIR}/${dir}" "${CMAKE_BINARY_DIR}/_deps/${dir}" EXCLUDE_FROM_ALL)
endmacro()

function(kvsim_find_gtest)
  find_package(GTest ${kvsim_find_mode})
  if(GTest_FOUND)
    kvsim_dep_source(GoogleTest "the system (${GTest_VERSION})")
    return()
  endif()
  set(BUILD_GMOCK OFF)
  set(INSTALL_GTEST OFF)
  set(gtest_force_shared_crt OFF)
  kvsim_bundle_subproject(googletest)
  foreach(t gtest gtest_main)
    if(NOT TARGET GTest::${t})
      add_library(GTest::${t} ALIAS ${t})
    endif()
  endforeach()
  kvsim_dep_source(GoogleTest "${KVSIM_DEPS_DIR}/googletest (source)")
endfunction()

function(kvsim_find_benchmark)
  find_package(benchmark ${kvsim_find_mode})
  if(benchmark_FOUND)
    kvsim_dep_source(benchmark "the system (${benchmark_VERSION})")
    return()
  endif()
  set(BENCHMARK_ENABLE_TESTING OFF)
  set(BENCHMARK_ENABLE_GTEST_TESTS OFF)
  set(BENCHMARK_ENABLE_INSTALL OFF)
  set(BENCHMARK_INSTALL_DOCS OFF)
  set(BENCHMARK_ENABLE_WERROR OFF)
  set(BENCHMARK_ENABLE_LTO OFF)
  set(BENCHMARK_ENABLE_LIBPFM OFF)
  set(GIT_VERSION "0.0.0") # Debian's patch 0001 skips git describe: use project()'s version
  kvsim_bundle_subproject(benchmark)
  kvsim_dep_source(benchmark "${KVSIM_DEPS_DIR}/benchmark (source)")
endfunction()
