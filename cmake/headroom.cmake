# Build helpers shared by every module: warnings, sanitizers, module and test declarations.

function(headroom_warnings target)
  # Host compilers only: CUDA sources get the host flags through nvcc's -Xcompiler below.
  set(host "$<COMPILE_LANGUAGE:C,CXX>")
  target_compile_options(${target} PRIVATE "$<${host}:-Wall;-Wextra;-Wno-missing-field-initializers>")
  # The fuzz build uses clang, which spells GCC's -Wshadow=local differently.
  if(CMAKE_CXX_COMPILER_ID MATCHES "Clang")
    target_compile_options(${target} PRIVATE "$<${host}:-Wshadow-uncaptured-local>")
  else()
    target_compile_options(${target} PRIVATE "$<${host}:-Wshadow=local>")
  endif()
  if(HEADROOM_WERROR)
    target_compile_options(${target} PRIVATE "$<${host}:-Werror>")
  endif()
  # nvcc: warnings of the host compiler on the host half of .cu files, and nvcc's own.
  target_compile_options(${target} PRIVATE "$<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=-Wall,-Wextra>")
  if(HEADROOM_WERROR)
    target_compile_options(${target} PRIVATE "$<$<COMPILE_LANGUAGE:CUDA>:-Werror=all-warnings;-Xcompiler=-Werror>")
  endif()
endfunction()

# lld links where the compiler can use it: the sanitized build's executables are ~170 MB each, and
# GNU ld took ~4x as long to link them (headroom: 6.3 s against 1.7 s), on a cold CI run's
# critical path. Without lld the default linker links, and configure says so.
option(HEADROOM_LLD "Link with lld when the compiler can use it" ON)
if(HEADROOM_LLD)
  include(CheckLinkerFlag)
  check_linker_flag(CXX -fuse-ld=lld HEADROOM_HAVE_LLD)
  if(HEADROOM_HAVE_LLD)
    add_link_options($<$<LINK_LANGUAGE:C,CXX>:-fuse-ld=lld>)
  else()
    message(STATUS "lld not found: linking with the default linker, more slowly "
                   "(scripts/setup.sh installs lld)")
  endif()
endif()

# Fuzzing instruments every library for coverage and ASan + UBSan; only the fuzz targets link
# libFuzzer's main (fuzz/CMakeLists.txt).
if(HEADROOM_FUZZ)
  if(NOT CMAKE_CXX_COMPILER_ID MATCHES "Clang")
    message(FATAL_ERROR "HEADROOM_FUZZ needs clang: configure a separate build directory with "
                        "CC=clang CXX=clang++ (scripts/fuzz.sh does)")
  endif()
  # -O1 and line tables (after the build type's -O2 -g): a finding's stack trace needs no more, and
  # it compiles ~15 % faster.
  add_compile_options(-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined
                      -fno-omit-frame-pointer -O1 -gline-tables-only)
  add_link_options(-fsanitize=address,undefined)
endif()

if(HEADROOM_SANITIZE)
  add_compile_options(-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer)
  # -O1 -g1 (after the build type's -O2 -g, so they win): GCC compiles instrumented code at -O2 -g
  # about 2.3x slower than this, which was most of CI's time; -O1 is what ASan recommends, and
  # line tables are all its stack traces need.
  add_compile_options(-O1 -g1)
  # GCC's flow analysis is unreliable once the sanitizers instrument the code: GCC 12 reports false
  # maybe-uninitialized warnings inside libstdc++ (<regex>, std::function). The Release build keeps
  # the warning; the sanitized build finds real uninitialized reads at run time instead.
  if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
    add_compile_options(-Wno-maybe-uninitialized)
  endif()
  add_link_options(-fsanitize=address,undefined)
  # Executables not position-independent: the sanitizers' per-check data holds pointers, so a PIE
  # headroom carried 2.9 million relative relocations (4 thousand in Release) and every start, of
  # each test and each headroom a test runs, spent ~0.4 s applying them (0.72 s to print
  # --version, 0.29 s without).
  string(APPEND CMAKE_EXE_LINKER_FLAGS " -no-pie")
endif()

# Code whose speed no test depends on compiles at less optimization, since compiling is most of
# CI's time (measured on one test file: -O3 27 s, -O1 17 s; instrumented -O1 44 s, -O0 23 s):
# - test files (headroom_test): -O1 in optimized builds, -O0 under the sanitizers (gtest expands
#   every assertion; the code under test keeps its own flags);
# - under the sanitizers only, the glue around the compute (the CLI, chat templates, conversion,
#   the load client, planning, telemetry): -O0. The compute modules, the thread pool, the server
#   and the doctor (whose tests have deadlines and timings) keep -O1. Release builds of the
#   product are untouched.
set(HEADROOM_SANITIZE_O0_MODULES chat convert load plan telemetry)

function(headroom_light_test_code target)
  if(HEADROOM_SANITIZE)
    target_compile_options(${target} PRIVATE -O0)
  elseif(CMAKE_BUILD_TYPE MATCHES "^(Release|RelWithDebInfo|MinSizeRel)$")
    target_compile_options(${target} PRIVATE -O1)
  endif()
endfunction()

function(headroom_light_glue target)
  if(HEADROOM_SANITIZE)
    target_compile_options(${target} PRIVATE -O0)
  endif()
endfunction()

# Precompiled headers: the standard library, fmt and nlohmann/json (and GoogleTest for tests) are
# parsed once per family of compile flags instead of in every file: compiling is most of a cold CI
# run. GCC uses a PCH only under the -O level and code-generation flags it was made with (and
# crashed, ICE, on an -O1 PCH in an -O3 file), so each family makes its own, in a one-file object
# library with that family's flags, and its targets reuse it; -Winvalid-pch makes a mismatch fail
# the build (with -Werror) instead of silently compiling slowly. Families: "module" (the compute
# modules and, in unsanitized builds, everything but the tests), "glue" (the -O0 glue under the
# sanitizers), "test" (test files). hr_tensor (-ffp-contract=off) goes without.
set(HEADROOM_PCH_HEADERS
    <algorithm> <array> <atomic> <chrono> <cmath> <condition_variable> <cstdint> <cstring>
    <deque> <filesystem> <functional> <map> <memory> <mutex> <optional> <set> <span> <sstream>
    <string> <string_view> <thread> <unordered_map> <unordered_set> <utility> <variant> <vector>
    <fmt/format.h> <nlohmann/json.hpp>)

function(headroom_pch target family)
  if(NOT HEADROOM_PCH)
    return()
  endif()
  if(family STREQUAL "glue" AND NOT HEADROOM_SANITIZE)
    set(family module)
  endif()
  set(pch hr_pch_${family})
  if(NOT TARGET ${pch})
    add_library(${pch} OBJECT ${PROJECT_SOURCE_DIR}/cmake/pch.cpp)
    # The definitions its users get from these (Debian's fmt defines FMT_SHARED).
    target_link_libraries(${pch} PRIVATE fmt::fmt nlohmann_json::nlohmann_json)
    headroom_warnings(${pch})
    headroom_pch_flags(${pch})
    set(headers ${HEADROOM_PCH_HEADERS})
    if(family STREQUAL "test")
      target_link_libraries(${pch} PRIVATE GTest::gtest)
      headroom_light_test_code(${pch})
      list(APPEND headers <gtest/gtest.h>)
    elseif(family STREQUAL "glue")
      headroom_light_glue(${pch})
    endif()
    target_precompile_headers(${pch} PRIVATE ${headers})
  endif()
  target_precompile_headers(${target} REUSE_FROM ${pch})
  headroom_pch_flags(${target})
endfunction()

function(headroom_pch_flags target)
  target_compile_options(${target} PRIVATE "$<$<COMPILE_LANGUAGE:CXX>:-Winvalid-pch>")
  # GCC 12 loses the system-header mark of a precompiled <string>, so its known-false middle-end
  # warnings on std::string's inlined moves and copies fire in our files and fail -Werror; the
  # sanitized build catches real out-of-bounds accesses.
  if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
    target_compile_options(${target} PRIVATE "$<$<COMPILE_LANGUAGE:CXX>:-Wno-array-bounds;-Wno-stringop-overflow;-Wno-stringop-overread;-Wno-restrict>")
  endif()
endfunction()

# headroom_module(NAME [DEPS targets...] [SOURCES files...])
# Declares the static library hr_NAME from the *.cpp files of the calling folder (or SOURCES).
# Modules include each other as "module/file.h" from src/; DEPS must point downwards (DESIGN.md).
function(headroom_module name)
  cmake_parse_arguments(M "" "" "DEPS;SOURCES" ${ARGN})
  if(NOT M_SOURCES)
    file(GLOB M_SOURCES CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/*.cpp)
  endif()
  add_library(hr_${name} STATIC ${M_SOURCES})
  target_include_directories(hr_${name} PUBLIC ${PROJECT_SOURCE_DIR}/src)
  target_link_libraries(hr_${name} PUBLIC ${M_DEPS})
  headroom_warnings(hr_${name})
  if(name IN_LIST HEADROOM_SANITIZE_O0_MODULES)
    headroom_light_glue(hr_${name})
    headroom_pch(hr_${name} glue)
  elseif(NOT name STREQUAL "tensor")
    headroom_pch(hr_${name} module)
  endif()
endfunction()

# headroom_test(NAME [SERIAL] [DEPS targets...] [SOURCES files...])
# One GoogleTest executable per test folder; every TEST becomes a ctest case. SERIAL runs each of
# its tests alone under `ctest -j`, for tests that measure speed and would read a neighbour's load
# as theirs.
function(headroom_test name)
  cmake_parse_arguments(T "SERIAL" "" "DEPS;SOURCES" ${ARGN})
  if(NOT T_SOURCES)
    file(GLOB T_SOURCES CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/*_test.cpp)
  endif()
  add_executable(${name} ${T_SOURCES})
  target_link_libraries(${name} PRIVATE ${T_DEPS} hr_testing GTest::gtest_main)
  headroom_warnings(${name})
  headroom_light_test_code(${name})
  headroom_pch(${name} test)
  # A test folder compiles as one file: its test files share most of what they compile
  # (GoogleTest's assertions, nlohmann/json, fmt and cpp-httplib instantiated for the same types),
  # so the nine server test files took 36 s of CPU together against 112 s one by one. The names a
  # test file declares must therefore be unique in its folder; shared helpers live in tests/testing.
  set_target_properties(${name} PROPERTIES UNITY_BUILD ON UNITY_BUILD_BATCH_SIZE 0)
  if(T_SERIAL)
    gtest_discover_tests(${name} DISCOVERY_TIMEOUT 60 PROPERTIES TIMEOUT 600 RUN_SERIAL TRUE)
  else()
    gtest_discover_tests(${name} DISCOVERY_TIMEOUT 60 PROPERTIES TIMEOUT 600)
  endif()
endfunction()
