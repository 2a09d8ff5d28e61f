// Fuzz target: merge_sweep_csvs() on 1-3 shards cut from arbitrary bytes at form feeds. On
// success the merge is a fixed point (merging its own output gives it back) and keeps every row.
#include <algorithm>
#include <cstdint>
#include <exception>
#include <new>
#include <string>
#include <vector>

#include "fuzz_check.h"
#include "kvsim/sim/sweep/sweep.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  std::vector<kvsim::NamedText> shards;
  size_t b = 0;
  while (shards.size() < 3) {
    const size_t e = text.find('\f', b);
    shards.push_back({"shard" + std::to_string(shards.size()), text.substr(b, e - b)});
    if (e == std::string::npos) break;
    b = e + 1;
  }
  std::string merged;
  try {
    merged = kvsim::merge_sweep_csvs(shards);
  } catch (const std::bad_alloc&) {
    throw;
  } catch (const std::exception&) {
    return 0;
  }
  int64_t rows = 0;
  for (const kvsim::NamedText& s : shards) {
    rows += std::count(s.text.begin(), s.text.end(), '\n') - 1;  // minus the header
  }
  KVSIM_FUZZ_CHECK(std::count(merged.begin(), merged.end(), '\n') - 1 == rows);
  const std::vector<kvsim::NamedText> again = {{"merged", merged}};
  KVSIM_FUZZ_CHECK(kvsim::merge_sweep_csvs(again) == merged);
  return 0;
}
