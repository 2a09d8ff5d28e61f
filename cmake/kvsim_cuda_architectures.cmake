# The CUDA architectures kvsim builds for by default, and the list the kernel resource test
# (tests/CMakeLists.txt: cuda.kernel_resources) checks.
#
# Default: a fat binary with SASS for sm_80 (A100; its SASS also runs on sm_86/87), sm_89 (RTX 4090,
# L4, L40S), sm_90 (H100/H200) and sm_100 (B200/GB200), plus SASS and PTX for sm_120 (RTX 50xx,
# RTX PRO 6000 Blackwell; the compute_120 PTX is JIT-compiled by the driver for newer GPUs such as
# sm_121). SASS for one major version does not run on another (sm_90 SASS cannot run on sm_89 or
# sm_100), hence one entry per family the project targets.
#
# Override with -DCMAKE_CUDA_ARCHITECTURES=...: `native` builds only for the GPUs of the building
# machine (one card: the fastest build), `90` is what bench/gpu_check.sh uses on an H200.
#
# kvsim_cuda_default_architectures(<out>) must run after check_language(CUDA) and before
# enable_language(CUDA): entries the installed nvcc cannot compile (an older toolkit without
# sm_100/sm_120) are dropped with a message, and the newest remaining one gets the PTX.
set(KVSIM_CUDA_DEFAULT_ARCHITECTURES 80 89 90 100 120)

function(kvsim_cuda_supported_architectures out)
  execute_process(COMMAND "${CMAKE_CUDA_COMPILER}" --list-gpu-code
                  OUTPUT_VARIABLE codes ERROR_QUIET RESULT_VARIABLE rc)
  set(supported "")
  if(rc EQUAL 0)
    string(REGEX MATCHALL "sm_[0-9]+" codes "${codes}")
    foreach(code IN LISTS codes)
      string(REPLACE "sm_" "" arch "${code}")
      list(APPEND supported ${arch})
    endforeach()
  endif()
  set(${out} "${supported}" PARENT_SCOPE)
endfunction()

# <out>: the default list in CMAKE_CUDA_ARCHITECTURES syntax ("80-real;89-real;90-real;100-real;120")
# <out>_NUMBERS: the same architectures as plain numbers (for the resource test)
function(kvsim_cuda_default_architectures out)
  kvsim_cuda_supported_architectures(supported)
  set(archs "")
  foreach(arch IN LISTS KVSIM_CUDA_DEFAULT_ARCHITECTURES)
    if(supported STREQUAL "" OR arch IN_LIST supported)
      list(APPEND archs ${arch})
    else()
      message(STATUS "kvsim: ${CMAKE_CUDA_COMPILER} cannot compile sm_${arch}; "
                     "left out of the default CUDA architectures")
    endif()
  endforeach()
  if(archs STREQUAL "")
    message(FATAL_ERROR "kvsim: nvcc supports none of the default CUDA architectures "
                        "(${KVSIM_CUDA_DEFAULT_ARCHITECTURES}); set CMAKE_CUDA_ARCHITECTURES")
  endif()
  set(spec "")
  list(LENGTH archs n)
  math(EXPR last "${n} - 1")
  foreach(i RANGE ${last})
    list(GET archs ${i} arch)
    if(i EQUAL last)
      list(APPEND spec "${arch}")  # SASS + PTX
    else()
      list(APPEND spec "${arch}-real")
    endif()
  endforeach()
  set(${out} "${spec}" PARENT_SCOPE)
  set(${out}_NUMBERS "${archs}" PARENT_SCOPE)
endfunction()
