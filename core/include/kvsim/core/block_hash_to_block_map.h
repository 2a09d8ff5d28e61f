// BlockHashToBlockMap: the prefix-cache map of BlockPool (vLLM: block_pool.py BlockHashToBlockMap),
// specialised for kvsim's keys and access pattern.
//
// Every full block is inserted once and erased once when its block is reused, so the map sits on
// the allocation path. What it exploits:
//   * keys are already hashes (xxh3-128), so one multiply mixes them enough for the slot index;
//   * a slot is 8 bytes (32 bits of the mixed hash + a block id); the 128-bit key itself lives in
//     the pool's per-block array `keys` (every value v stored under key K has keys[v] == K), so a
//     probe compares the tag and reads a key only on a tag match;
//   * slots do not move except on rebuild, so the pool keeps each cached block's slot index and
//     erase(slot) is a single store (a tombstone) with no lookup;
//   * open addressing with linear probing over a power-of-two array; tombstones are reused by
//     inserts and dropped by a rebuild (at the same or twice the capacity) when live + tombstone
//     slots would pass half of the capacity (probes stay short: most end in the home slot's line).
//     A rebuild calls on_move(value, new_slot) for every live slot so the owner can update the slot
//     indices it keeps.
//
// Invariants (check_invariants, given `keys`):
//   M1 size() == live slots; live + tombstones == used_ <= capacity / 2, so every probe ends at
//      an empty slot.
//   M2 a live slot's tag is the tag of keys[value]; its key sits on the probe path from its home
//      slot with no empty slot in between (tombstones may be), so find() reaches it.
//   M3 no two live slots hold the same key.
// Memory: 8 B per slot; capacity = power of two, grown only while live slots exceed 1/4 of it
// (a map holding every block of an N-block pool has 4 N to 8 N slots: 32-64 B per block).
#pragma once

#include <algorithm>
#include <bit>
#include <cstdint>
#include <utility>
#include <vector>

#include "kvsim/core/types.h"

namespace kvsim {

class BlockHashToBlockMap {
 public:
  static constexpr uint32_t kNotFound = UINT32_MAX;

  size_t size() const { return size_; }
  uint32_t capacity() const { return static_cast<uint32_t>(slots_.size()); }

  // Slot index of `key`, or kNotFound.
  uint32_t find(const BlockHash& key, const BlockHash* keys) const {
    if (slots_.empty()) return kNotFound;
    const uint32_t tag = tag_of(key);
    for (uint32_t i = home(tag);; i = (i + 1) & mask_) {
      const Slot& s = slots_[i];
      if (s.value == kEmpty) return kNotFound;
      if (s.tag == tag && s.value >= 0 && keys[s.value] == key) return i;
    }
  }

  // Starts loading the home slot of `key` (a batch of inserts overlaps its cache misses).
  void prefetch(const BlockHash& key) const {
    if (!slots_.empty()) __builtin_prefetch(&slots_[home(tag_of(key))]);
  }

  int32_t value(uint32_t slot) const { return slots_[slot].value; }
  void set_value(uint32_t slot, int32_t v) { slots_[slot].value = v; }

  // The slot of `key` and false if present; otherwise stores `v` under it (keys[v] must already
  // equal `key`) and returns its slot and true. May rebuild first (calling on_move).
  template <class OnMove>
  std::pair<uint32_t, bool> find_or_insert(const BlockHash& key, int32_t v, const BlockHash* keys,
                                           OnMove&& on_move) {
    if (used_ + 1 > max_used()) [[unlikely]] {
      rebuild(on_move);
    }
    const uint32_t tag = tag_of(key);
    uint32_t first_tombstone = kNotFound;
    uint32_t i = home(tag);
    for (;; i = (i + 1) & mask_) {
      const Slot& s = slots_[i];
      if (s.value == kEmpty) break;
      if (s.value == kTombstone) {
        if (first_tombstone == kNotFound) first_tombstone = i;
      } else if (s.tag == tag && keys[s.value] == key) {
        return {i, false};
      }
    }
    if (first_tombstone != kNotFound) {
      i = first_tombstone;  // reuses a tombstone: used_ unchanged
    } else {
      ++used_;
    }
    slots_[i] = Slot{tag, v};
    ++size_;
    return {i, true};
  }

  // Erases the live slot `slot` (a single store; the slot becomes a tombstone).
  void erase(uint32_t slot) {
    slots_[slot].value = kTombstone;
    --size_;
  }

  // Drops every entry (keeps the capacity).
  void clear();

  // Calls f(slot, value) for every live slot.
  template <class F>
  void for_each(F&& f) const {
    for (uint32_t i = 0; i < slots_.size(); ++i) {
      if (slots_[i].value >= 0) f(i, slots_[i].value);
    }
  }

  // Throws std::logic_error naming the first broken invariant (M1..M3).
  void check_invariants(const BlockHash* keys) const;

 private:
  static constexpr int32_t kEmpty = -1;
  static constexpr int32_t kTombstone = -2;
  struct Slot {
    uint32_t tag;   // high 32 bits of the mixed key; its top bits are the home slot
    int32_t value;  // a block id, kEmpty or kTombstone
  };

  // One multiply of the folded 128-bit key: the keys are uniform hashes already, but tests and the
  // Python API may use small integers, and the top bits of a product mix every input bit.
  static uint32_t tag_of(const BlockHash& key) {
    return static_cast<uint32_t>(
        ((key.lo ^ (key.hi * 0xC2B2AE3D27D4EB4FULL)) * 0x9E3779B97F4A7C15ULL) >> 32);
  }
  uint32_t home(uint32_t tag) const { return tag >> shift_; }
  uint32_t max_used() const { return capacity() / 2; }

  template <class OnMove>
  void rebuild(OnMove& on_move);

  std::vector<Slot> slots_;
  uint32_t mask_ = 0;
  uint32_t shift_ = 32;  // 32 - log2(capacity): home(tag) is the tag's top log2(capacity) bits
  size_t size_ = 0;      // live slots
  size_t used_ = 0;      // live + tombstone slots
};

template <class OnMove>
void BlockHashToBlockMap::rebuild(OnMove& on_move) {
  // Grow when live slots alone exceed half of the allowed fill; otherwise only drop tombstones.
  // Either way at least a quarter of the capacity is free again, so rebuilds are O(1) amortised.
  size_t cap = std::max<size_t>(slots_.size(), 16);
  if (!slots_.empty() && 4 * (size_ + 1) > cap) cap *= 2;
  std::vector<Slot> old = std::move(slots_);
  slots_.assign(cap, Slot{0, kEmpty});
  mask_ = static_cast<uint32_t>(cap - 1);
  shift_ = 32 - static_cast<uint32_t>(std::countr_zero(cap));
  used_ = size_;
  // The home slot comes from the stored tag, so the keys are not read again.
  for (const Slot& s : old) {
    if (s.value < 0) continue;
    uint32_t i = home(s.tag);
    while (slots_[i].value != kEmpty) i = (i + 1) & mask_;
    slots_[i] = s;
    on_move(s.value, i);
  }
}

}  // namespace kvsim
