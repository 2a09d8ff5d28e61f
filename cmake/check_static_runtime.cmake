# ctest cli.static_runtime (KVSIM_STATIC_RUNTIME builds): the kvsim executable needs no shared C++
# library - not libstdc++, libgcc_s, fmt or xxhash - and starts.
# Usage: cmake -DREADELF=<readelf> -DKVSIM=<kvsim executable> -P check_static_runtime.cmake
execute_process(COMMAND "${READELF}" -d "${KVSIM}" OUTPUT_VARIABLE dynamic RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "readelf -d ${KVSIM} failed (${rc})")
endif()
foreach(lib "libstdc\\+\\+" libgcc_s libfmt libxxhash)
  if(dynamic MATCHES "\\(NEEDED\\)[^\n]*\\[${lib}\\.so")
    string(REGEX MATCH "\\[${lib}\\.so[^]]*\\]" name "${dynamic}")
    message(FATAL_ERROR "${KVSIM} needs the shared library ${name} (KVSIM_STATIC_RUNTIME)")
  endif()
endforeach()
execute_process(COMMAND "${KVSIM}" --version OUTPUT_VARIABLE version RESULT_VARIABLE rc)
if(NOT rc EQUAL 0 OR NOT version MATCHES "^kvsim ")
  message(FATAL_ERROR "${KVSIM} --version failed (${rc}): ${version}")
endif()
