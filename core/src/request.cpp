#include "kvsim/core/request.h"

#include <fmt/core.h>

#include <algorithm>
#include <climits>
#include <stdexcept>

#include "kvsim/core/block_hash.h"

namespace kvsim {

void Request::enable_block_hashing(int32_t block_size, bool defer_private) {
  if (block_size <= 0)
    throw std::invalid_argument("Request::enable_block_hashing: block_size <= 0");
  hash_block_size = block_size;
  block_hashes.clear();
  num_deferred_block_hashes = 0;
  defer_private_block_hashes = defer_private;
  first_private_block_hash = INT32_MAX;
  // One allocation for the request's whole life in the common case (the list grows as tokens
  // are generated); capped so a huge max_tokens cannot reserve memory it may never use. A
  // deferring request usually never computes its private hashes: no reservation.
  if (!defer_private) {
    const int64_t expected = (int64_t{num_prompt_tokens} + max_tokens) / block_size + 1;
    block_hashes.reserve(static_cast<size_t>(std::min<int64_t>(expected, 4096)));
  }
  update_block_hashes();
}

void Request::materialize_block_hashes() {
  if (num_deferred_block_hashes == 0) return;
  const auto first = static_cast<int64_t>(block_hashes.size());
  const int64_t end = first + num_deferred_block_hashes;
  block_hashes.reserve(static_cast<size_t>(end));
  for (int64_t i = first; i < end; ++i) {
    const BlockHash parent = i == 0 ? none_hash() : block_hashes[static_cast<size_t>(i - 1)];
    block_hashes.push_back(hash_block_unique(parent, content.salt, i));
  }
  num_deferred_block_hashes = 0;
}

void Request::update_block_hashes_general() {
  if (hash_block_size <= 0) return;
  const int64_t bs = hash_block_size;
  const int64_t num_full = num_tokens() / bs;
  const auto* tokens = content.token_ids.get();
  const auto* ids = content.hash_ids.get();
  const int64_t hbs = content.hash_ids_block_size;
  for (int64_t i = num_block_hashes(); i < num_full; ++i) {
    const int64_t start = i * bs;
    const int64_t end = start + bs;  // exclusive
    const bool by_tokens = end <= num_prompt_tokens && tokens != nullptr &&
                           static_cast<int64_t>(tokens->size()) >= end;
    const bool by_ids = !by_tokens && end <= num_prompt_tokens && ids != nullptr && hbs > 0 &&
                        (end - 1) / hbs < static_cast<int64_t>(ids->size());
    if (!by_tokens && !by_ids) {
      // Generated tokens, or a prompt without content: unique to this request, and so is every
      // later block.
      if (first_private_block_hash == INT32_MAX) first_private_block_hash = static_cast<int32_t>(i);
      if (defer_private_block_hashes || num_deferred_block_hashes > 0) {
        num_deferred_block_hashes += static_cast<int32_t>(num_full - i);
        break;
      }
    }
    // (A block with content never follows a private one; should it, compute the chain first.)
    if (num_deferred_block_hashes > 0) materialize_block_hashes();
    const BlockHash parent = i == 0 ? none_hash() : block_hashes[static_cast<size_t>(i - 1)];
    BlockHash h;
    if (by_tokens) {
      h = hash_block_tokens(
          parent, std::span<const int32_t>(tokens->data() + start, static_cast<size_t>(bs)));
    } else if (by_ids) {
      const int64_t j0 = start / hbs;
      const int64_t j1 = (end - 1) / hbs;
      h = hash_block_external_ids(
          parent, std::span<const uint64_t>(ids->data() + j0, static_cast<size_t>(j1 - j0 + 1)),
          start - j0 * hbs);
    } else {
      h = hash_block_unique(parent, content.salt, i);
    }
    block_hashes.push_back(h);
  }
  const int64_t next = (int64_t{num_block_hashes()} + 1) * bs;
  next_block_hash_tokens = static_cast<int32_t>(std::min<int64_t>(next, INT32_MAX));
}

}  // namespace kvsim
