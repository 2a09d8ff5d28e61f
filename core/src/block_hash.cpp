#include "kvsim/core/block_hash.h"

#define XXH_STATIC_LINKING_ONLY  // XXH3_state_t on the stack
#include <xxhash.h>

#include <array>
#include <cstring>

namespace kvsim {
namespace {

// Domain tags keep the three content kinds from ever colliding with each other.
enum class Domain : uint64_t { kTokens = 1, kExternalIds = 2, kUnique = 3 };

BlockHash to_block_hash(XXH128_hash_t h) {
  return BlockHash{h.low64, h.high64};
}

class Hasher {
 public:
  Hasher(const BlockHash& parent, Domain domain) {
    XXH3_128bits_reset(&state_);
    update(&parent.lo, sizeof parent.lo);
    update(&parent.hi, sizeof parent.hi);
    const uint64_t d = static_cast<uint64_t>(domain);
    update(&d, sizeof d);
  }
  void update(const void* p, size_t n) { XXH3_128bits_update(&state_, p, n); }
  BlockHash digest() const { return to_block_hash(XXH3_128bits_digest(&state_)); }

 private:
  XXH3_state_t state_{};
};

}  // namespace

BlockHash none_hash() {
  static const BlockHash kNone = [] {
    static constexpr char kSeed[] = "kvsim NONE_HASH";
    return to_block_hash(XXH3_128bits(kSeed, sizeof kSeed - 1));
  }();
  return kNone;
}

BlockHash hash_block_tokens(const BlockHash& parent, std::span<const int32_t> token_ids,
                            uint64_t extra_key) {
  Hasher h(parent, Domain::kTokens);
  const uint64_t n = token_ids.size();
  h.update(&n, sizeof n);
  h.update(token_ids.data(), token_ids.size_bytes());
  h.update(&extra_key, sizeof extra_key);
  return h.digest();
}

BlockHash hash_block_external_ids(const BlockHash& parent, std::span<const uint64_t> hash_ids,
                                  int64_t offset_in_first) {
  Hasher h(parent, Domain::kExternalIds);
  const uint64_t n = hash_ids.size();
  h.update(&n, sizeof n);
  h.update(hash_ids.data(), hash_ids.size_bytes());
  h.update(&offset_in_first, sizeof offset_in_first);
  return h.digest();
}

BlockHash hash_block_unique(const BlockHash& parent, uint64_t salt, int64_t block_index) {
  // Hot path (every generated block): hash a fixed 40-byte record in one shot.
  std::array<uint64_t, 5> rec{parent.lo, parent.hi, static_cast<uint64_t>(Domain::kUnique), salt,
                              static_cast<uint64_t>(block_index)};
  return to_block_hash(XXH3_128bits(rec.data(), sizeof rec));
}

}  // namespace kvsim
