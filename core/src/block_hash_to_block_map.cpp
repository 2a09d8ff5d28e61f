#include "kvsim/core/block_hash_to_block_map.h"

#include <fmt/core.h>

#include <stdexcept>
#include <unordered_set>

namespace kvsim {

void BlockHashToBlockMap::clear() {
  std::fill(slots_.begin(), slots_.end(), Slot{0, kEmpty});
  size_ = 0;
  used_ = 0;
}

void BlockHashToBlockMap::check_invariants(const BlockHash* keys) const {
  size_t live = 0;
  size_t used = 0;
  std::unordered_set<BlockHash, BlockHashHasher> seen;
  for (uint32_t i = 0; i < slots_.size(); ++i) {
    const Slot& s = slots_[i];
    if (s.value == kEmpty) continue;
    ++used;
    if (s.value == kTombstone) continue;
    if (s.value < 0) throw std::logic_error(fmt::format("M1: slot {} holds {}", i, s.value));
    ++live;
    const BlockHash& key = keys[s.value];
    if (tag_of(key) != s.tag) {
      throw std::logic_error(fmt::format("M2: slot {} (block {}) has a stale tag", i, s.value));
    }
    if (find(key, keys) != i) {
      throw std::logic_error(
          fmt::format("M2: slot {} (block {}) is not reachable from its home slot", i, s.value));
    }
    if (!seen.insert(key).second) {
      throw std::logic_error(fmt::format("M3: slot {} (block {}) duplicates a key", i, s.value));
    }
  }
  if (live != size_ || used != used_) {
    throw std::logic_error(
        fmt::format("M1: {} live / {} used slots, counters {} / {}", live, used, size_, used_));
  }
  if (!slots_.empty() && used_ > max_used()) {
    throw std::logic_error(
        fmt::format("M1: {} used slots exceed half of the capacity {}", used_, slots_.size()));
  }
}

}  // namespace kvsim
