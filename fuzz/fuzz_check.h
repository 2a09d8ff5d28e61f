// Shared by the fuzz targets: an invariant that must hold when a parser accepts its input.
// A violation aborts, which libFuzzer (and the standalone regression runner) report as a crash.
#pragma once

#include <cstdio>
#include <cstdlib>

#define KVSIM_FUZZ_CHECK(cond)                                                            \
  do {                                                                                    \
    if (!(cond)) {                                                                        \
      std::fprintf(stderr, "%s:%d: invariant violated: %s\n", __FILE__, __LINE__, #cond); \
      std::abort();                                                                       \
    }                                                                                     \
  } while (0)
