// Test helpers for the cuda room: a plain scalar reference of the pool layout and kernels, and a
// generator of realistic StepBatch sequences (allocation through core's BlockPool).
#pragma once

#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "kvsim/core/block_pool.h"
#include "kvsim/core/step_batch.h"
#include "kvsim/cuda/kv_layout.h"
#include "kvsim/cuda/kv_values.h"

namespace kvsim::test {

// Byte offset of element (layer, block, offset, head, dim, kv), written from vLLM's shapes
// (flash_attn.py FlashAttentionBackend.get_kv_cache_shape) independently of KvCacheLayout's
// helpers.
inline int64_t ref_offset(const KvCacheLayout& l, int64_t layer, int64_t block, int64_t off,
                          int64_t head, int64_t dim, int64_t kv) {
  const int64_t nb = l.num_blocks, bs = l.block_size, H = l.num_kv_heads, D = l.head_dim;
  int64_t elem;
  if (l.layout == KvLayoutKind::kNhdPacked) {  // (L)(nb, bs, H, 2D)
    elem = (((layer * nb + block) * bs + off) * H + head) * 2 * D + kv * D + dim;
  } else {  // (L)(2, nb, bs, H, D)
    elem = ((((layer * 2 + kv) * nb + block) * bs + off) * H + head) * D + dim;
  }
  return elem * l.elem_bytes();
}

inline uint32_t read_bits(const unsigned char* buf, int64_t off, int eb) {
  uint32_t v = 0;
  std::memcpy(&v, buf + off, static_cast<size_t>(eb));
  return v;
}
inline uint32_t read_bits(const std::vector<unsigned char>& buf, int64_t off, int eb) {
  return read_bits(buf.data(), off, eb);
}
inline void write_bits(std::vector<unsigned char>& buf, int64_t off, int eb, uint32_t v) {
  std::memcpy(buf.data() + off, &v, static_cast<size_t>(eb));
}

inline uint32_t ref_value(const KvCacheLayout& l, int64_t req, int32_t pos, int32_t layer,
                          int32_t head, int32_t dim, int32_t kv) {
  return kv_value_bits(kv_token_seed(req, pos, layer), head, dim, kv, l.elem_bytes());
}

// Scalar write_kv for every layer of the pool: token t = (req[t], pos[t]) into slot_mapping[t].
inline void ref_write(const KvCacheLayout& l, std::vector<unsigned char>& pool,
                      const std::vector<int64_t>& slots, const std::vector<int64_t>& req,
                      const std::vector<int32_t>& pos) {
  const int eb = l.elem_bytes();
  for (size_t t = 0; t < slots.size(); ++t) {
    if (slots[t] < 0) continue;
    const int64_t block = slots[t] / l.block_size, off = slots[t] % l.block_size;
    for (int32_t layer = 0; layer < l.num_layers; ++layer)
      for (int32_t h = 0; h < l.num_kv_heads; ++h)
        for (int32_t d = 0; d < l.head_dim; ++d)
          for (int32_t kv = 0; kv < 2; ++kv)
            write_bits(pool, ref_offset(l, layer, block, off, h, d, kv), eb,
                       ref_value(l, req[t], pos[t], layer, h, d, kv));
  }
}

// Scalar checksum of one sequence: the 32-bit words of its first seq_len tokens, every layer.
inline uint64_t ref_checksum(const KvCacheLayout& l, const unsigned char* pool,
                             const std::vector<BlockId>& table, int32_t seq_len) {
  uint64_t sum = 0;
  const int eb = l.elem_bytes();
  for (int32_t p = 0; p < seq_len; ++p) {
    const int64_t block = table[static_cast<size_t>(p / l.block_size)];
    const int64_t off = p % l.block_size;
    for (int32_t layer = 0; layer < l.num_layers; ++layer)
      for (int32_t h = 0; h < l.num_kv_heads; ++h)
        for (int32_t kv = 0; kv < 2; ++kv)
          for (int32_t d = 0; d < l.head_dim; d += 4 / eb)
            sum += read_bits(pool, ref_offset(l, layer, block, off, h, d, kv), 4);
  }
  return sum;
}
inline uint64_t ref_checksum(const KvCacheLayout& l, const std::vector<unsigned char>& pool,
                             const std::vector<BlockId>& table, int32_t seq_len) {
  return ref_checksum(l, pool.data(), table, seq_len);
}

// Generates a StepBatch stream like a small scheduler would: requests arrive with a prompt,
// prefill in chunks, decode one token a step, finish, get swapped out and back in (through host
// slots), and occasionally fork (copy of the last block). Blocks come from core's BlockPool with
// caching off.
class BatchGenerator {
 public:
  BatchGenerator(int32_t num_blocks, int32_t block_size, int64_t host_slots, uint64_t seed)
      : pool_(num_blocks, /*enable_caching=*/false), bs_(block_size), rng_(seed) {
    for (int64_t s = host_slots - 1; s >= 0; --s) free_host_.push_back(s);
  }

  StepBatch next() {
    StepBatch b;
    b.step_index = step_++;
    b.block_size = bs_;
    // Swap a swapped-out request back in when blocks allow.
    for (auto& r : reqs_) {
      if (r.swapped && pool_.get_num_free_blocks() > static_cast<int32_t>(r.host.size()) + 8) {
        std::vector<BlockId> blocks;
        pool_.get_new_blocks(static_cast<int32_t>(r.host.size()), blocks);
        for (size_t i = 0; i < blocks.size(); ++i) {
          b.swap_in.push_back({blocks[i], r.host[i]});
          free_host_.push_back(r.host[i]);
        }
        r.blocks = blocks;
        r.host.clear();
        r.swapped = false;
        break;
      }
    }
    // Maybe swap one running request out.
    if (!reqs_.empty() && coin(0.15)) {
      auto& r = reqs_[pick(reqs_.size())];
      if (!r.swapped && !r.blocks.empty() && free_host_.size() >= r.blocks.size()) {
        for (BlockId blk : r.blocks) {
          r.host.push_back(free_host_.back());
          free_host_.pop_back();
          b.swap_out.push_back({blk, r.host.back()});
        }
        pool_.free_blocks(r.blocks);
        r.blocks.clear();
        r.swapped = true;
      }
    }
    // Maybe fork: a new request sharing nothing, its first block a copy of another's last one.
    // (Copy-on-write of a partial block.)
    // New arrivals.
    if (reqs_.size() < 24 && coin(0.5)) {
      Req r;
      r.id = next_id_++;
      r.prompt = 1 + static_cast<int32_t>(pick(static_cast<size_t>(5 * bs_)));
      r.output = 1 + static_cast<int32_t>(pick(static_cast<size_t>(3 * bs_)));
      reqs_.push_back(r);
    }
    // Schedule: prefill chunks (<= 2 blocks of tokens) or one decode token.
    for (auto& r : reqs_) {
      if (r.swapped) continue;
      const int32_t total = r.prompt + r.output;
      int32_t n = r.computed < r.prompt ? std::min(r.prompt - r.computed, 2 * bs_) : 1;
      n = std::min(n, total - r.computed);
      const auto need =
          static_cast<int32_t>(cdiv(r.computed + n, bs_)) - static_cast<int32_t>(r.blocks.size());
      if (need > pool_.get_num_free_blocks()) continue;
      if (need > 0) pool_.get_new_blocks(need, r.blocks);
      b.writes.push_back({r.id, r.computed, n});
      for (int32_t i = 0; i < n; ++i) {
        const int32_t p = r.computed + i;
        b.slot_mapping.push_back(int64_t{r.blocks[static_cast<size_t>(p / bs_)]} * bs_ + p % bs_);
      }
      r.computed += n;
      if (b.block_table_offsets.empty()) b.block_table_offsets.push_back(0);
      b.reads.push_back({r.id, r.computed});
      b.block_tables.insert(b.block_tables.end(), r.blocks.begin(), r.blocks.end());
      b.block_table_offsets.push_back(static_cast<int32_t>(b.block_tables.size()));
    }
    // Copy-on-write: give a fresh block the content of a running request's last block.
    if (!reqs_.empty() && coin(0.2) && pool_.get_num_free_blocks() > 4) {
      auto& r = reqs_[pick(reqs_.size())];
      if (!r.swapped && !r.blocks.empty()) {
        std::vector<BlockId> dst;
        pool_.get_new_blocks(1, dst);
        b.copies.push_back({r.blocks.back(), dst[0]});
        copied_.push_back(dst[0]);
      }
    }
    // Padding tokens, as CUDA-graph padding would add.
    if (coin(0.3)) b.slot_mapping.push_back(kPadSlotId);
    // Finish requests and release the copy targets of earlier steps.
    for (auto it = reqs_.begin(); it != reqs_.end();) {
      if (!it->swapped && it->computed == it->prompt + it->output) {
        std::vector<BlockId> rev(it->blocks.rbegin(), it->blocks.rend());
        pool_.free_blocks(rev);
        it = reqs_.erase(it);
      } else {
        ++it;
      }
    }
    if (copied_.size() > 8) {
      pool_.free_blocks(copied_);
      copied_.clear();
    }
    return b;
  }

 private:
  struct Req {
    int64_t id = 0;
    int32_t prompt = 0, output = 0, computed = 0;
    std::vector<BlockId> blocks;
    std::vector<int64_t> host;
    bool swapped = false;
  };
  bool coin(double p) { return std::uniform_real_distribution<double>(0, 1)(rng_) < p; }
  size_t pick(size_t n) { return std::uniform_int_distribution<size_t>(0, n - 1)(rng_); }

  BlockPool pool_;
  int32_t bs_;
  std::mt19937_64 rng_;
  std::vector<Req> reqs_;
  std::vector<int64_t> free_host_;
  std::vector<BlockId> copied_;
  int64_t step_ = 0;
  int64_t next_id_ = 0;
};

}  // namespace kvsim::test
