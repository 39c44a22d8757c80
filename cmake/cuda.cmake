# The CUDA backend (src/kernels/cuda): HEADROOM_CUDA=AUTO builds it when nvcc is found, ON requires
# it, OFF skips it. Sets HEADROOM_CUDA_ENABLED for the folders that build CUDA code.
#
# Sanitized and fuzz builds never compile CUDA: nvcc's device code cannot be instrumented, and
# those builds exist to check the host code (scripts/test.sh --sanitize, scripts/fuzz.sh).
set(HEADROOM_CUDA AUTO CACHE STRING "Build the CUDA backend: AUTO (when nvcc is found), ON (required), OFF")
set_property(CACHE HEADROOM_CUDA PROPERTY STRINGS AUTO ON OFF)
set(HEADROOM_CUDA_ENABLED OFF)

if(HEADROOM_CUDA STREQUAL "OFF")
  message(STATUS "headroom: CUDA backend not built (HEADROOM_CUDA=OFF)")
elseif(HEADROOM_SANITIZE OR HEADROOM_FUZZ)
  if(HEADROOM_CUDA STREQUAL "ON")
    message(FATAL_ERROR "HEADROOM_CUDA=ON cannot be combined with HEADROOM_SANITIZE or HEADROOM_FUZZ")
  endif()
  message(STATUS "headroom: CUDA backend not built (sanitized and fuzz builds check host code only)")
else()
  include(CheckLanguage)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    # sm_90 (H100/H200) and sm_75 (Turing, the oldest CUDA 13 targets). Each entry embeds machine
    # code and PTX, so the GPUs in between (sm_80/86/89) and after run the PTX, JIT-compiled by
    # the driver at first use. CMake's CUDAARCHS environment variable (or -D) chooses others: CI
    # builds sm_90 only, which halves the device compile (.ci/run).
    if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES AND NOT DEFINED ENV{CUDAARCHS})
      set(CMAKE_CUDA_ARCHITECTURES 75 90)
    endif()
    enable_language(CUDA)
    find_package(CUDAToolkit REQUIRED)
    # CMake 3.25 does not know nvcc's C++20 flag (the CXX_STANDARD of the project carries over to
    # CUDA sources): tell it.
    if(NOT CMAKE_CUDA20_STANDARD_COMPILE_OPTION)
      set(CMAKE_CUDA20_STANDARD_COMPILE_OPTION "-std=c++20")
      set(CMAKE_CUDA20_EXTENSION_COMPILE_OPTION "-std=c++20")
    endif()
    set(CMAKE_CUDA_STANDARD 20)
    set(CMAKE_CUDA_STANDARD_REQUIRED ON)
    set(CMAKE_CUDA_EXTENSIONS OFF)
    set(HEADROOM_CUDA_ENABLED ON)
    message(STATUS "headroom: CUDA backend built (nvcc ${CMAKE_CUDA_COMPILER_VERSION}, "
                   "architectures ${CMAKE_CUDA_ARCHITECTURES}, static CUDA runtime)")
  elseif(HEADROOM_CUDA STREQUAL "ON")
    message(FATAL_ERROR "HEADROOM_CUDA=ON but no CUDA compiler was found: put nvcc on PATH or set CUDACXX "
                        "(or configure with -DHEADROOM_CUDA=OFF)")
  else()
    message(STATUS "headroom: CUDA backend not built (no nvcc found; set CUDACXX or put nvcc on PATH)")
  endif()
endif()
