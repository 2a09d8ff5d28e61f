// Chained prefix-cache block hashes (vLLM: kv_cache_utils.hash_block_tokens).
//
// H_i = hash(H_{i-1} or NONE_HASH, content of block i, extra key). Two blocks get equal hashes
// iff their whole prefixes (every earlier block's content too) are equal. kvsim supports three
// kinds of content, because traces describe prompts in three ways:
//   * token ids (kvsim JSONL `prompt_token_ids`): exactly vLLM's scheme;
//   * external hash ids (Mooncake/Bailian `hash_ids` of `hash_block_size` tokens): a block is
//     identified by the hash id(s) covering it and its offset inside them;
//   * nothing (Azure, BurstGPT, ...): a per-request salt makes every block unique to its request,
//     so only a preempted request re-hits its own blocks.
#pragma once

#include <cstdint>
#include <span>

#include "kvsim/core/types.h"

namespace kvsim {

// The parent of the first block. Deterministic (vLLM with PYTHONHASHSEED set) so runs reproduce.
BlockHash none_hash();

// Hash of a block made of `token_ids`, chained to `parent`. `extra_key` = 0 means "no extra keys"
// (vLLM: None); any other value stands for LoRA name / cache salt / multimodal keys.
BlockHash hash_block_tokens(const BlockHash& parent, std::span<const int32_t> token_ids,
                            uint64_t extra_key = 0);

// Hash of a block identified by external hash ids (the ids of the trace blocks that cover it) and
// the token offset of the block's start inside the first of them.
BlockHash hash_block_external_ids(const BlockHash& parent, std::span<const uint64_t> hash_ids,
                                  int64_t offset_in_first);

// Hash of a block whose content is unique to one request (`salt`), at block index `block_index`.
BlockHash hash_block_unique(const BlockHash& parent, uint64_t salt, int64_t block_index);

}  // namespace kvsim
