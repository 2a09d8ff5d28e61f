// The allocator for teaching and tests: BlockPool, KVCacheManager and Request with vLLM's method
// names (vllm/v1/core/block_pool.py, kv_cache_manager.py), so the lesson's examples can be
// stepped through interactively. Blocks are plain integer ids (vLLM passes KVCacheBlock objects);
// a block hash is one 128-bit Python int.
//
// The C++ classes trust their callers (the scheduler) with block ids and ref counts; here every
// id, count and request id coming from Python is checked first, so a wrong call raises
// ValueError instead of corrupting memory.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <fmt/core.h>
#include <nanobind/nanobind.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "bindings.h"
#include "kvsim/core/block_pool.h"
#include "kvsim/core/kv_cache_manager.h"
#include "kvsim/core/request.h"
#include "kvsim/core/vllm_version.h"
#include "kvsim/run/plan_options.h"

namespace nb = nanobind;

namespace kvsim::python {
namespace {

// Request ids index the manager's tables, which grow to the largest id: keep them small.
constexpr int64_t kMaxRequestId = 1 << 24;

nb::int_ hash_to_int(const BlockHash& h) {
  nb::object hi = nb::int_(h.hi);
  nb::object shifted = nb::steal(PyNumber_Lshift(hi.ptr(), nb::int_(64).ptr()));
  if (!shifted.is_valid()) throw nb::python_error();
  nb::object v = nb::steal(PyNumber_Or(shifted.ptr(), nb::int_(h.lo).ptr()));
  if (!v.is_valid()) throw nb::python_error();
  return nb::borrow<nb::int_>(v);
}

BlockHash hash_from_int(nb::int_ v) {
  if (PyObject_RichCompareBool(v.ptr(), nb::int_(0).ptr(), Py_LT) == 1) {
    throw std::invalid_argument("a block hash is a non-negative 128-bit integer");
  }
  nb::object hi = nb::steal(PyNumber_Rshift(v.ptr(), nb::int_(64).ptr()));
  if (!hi.is_valid()) throw nb::python_error();
  const unsigned long long hi_v = PyLong_AsUnsignedLongLong(hi.ptr());
  if (PyErr_Occurred()) {
    PyErr_Clear();
    throw std::invalid_argument("a block hash is a non-negative 128-bit integer");
  }
  return BlockHash{PyLong_AsUnsignedLongLongMask(v.ptr()), hi_v};
}

void check_block(const BlockPool& pool, BlockId b) {
  if (b < 0 || b >= pool.num_gpu_blocks()) {
    throw std::invalid_argument(
        fmt::format("block {} is not in the pool (ids 0 .. {})", b, pool.num_gpu_blocks() - 1));
  }
}

void check_blocks(const BlockPool& pool, const std::vector<BlockId>& blocks) {
  for (BlockId b : blocks) check_block(pool, b);
}

void check_request_id(int64_t id) {
  if (id < 0 || id >= kMaxRequestId) {
    throw std::invalid_argument(fmt::format(
        "request_id {}: kvsim's request ids are dense integers in [0, {})", id, kMaxRequestId));
  }
}

std::vector<BlockId> to_vector(std::span<const BlockId> s) {
  return {s.begin(), s.end()};
}

}  // namespace

void register_allocator(nb::module_& m) {
  nb::class_<BlockPool>(m, "BlockPool",
                        "vLLM 0.26's BlockPool: block 0 is the null block, the free queue starts "
                        "[1 .. N-1], frees put unhashed blocks first (LIFO reuse) and hashed "
                        "blocks last (LRU eviction).")
      .def(
          "__init__",
          [](BlockPool* self, int32_t num_gpu_blocks, bool enable_caching) {
            new (self) BlockPool(num_gpu_blocks, enable_caching);
          },
          nb::arg("num_gpu_blocks"), nb::arg("enable_caching") = true,
          "A pool of num_gpu_blocks blocks (the null block included).")
      .def_prop_ro("num_gpu_blocks", &BlockPool::num_gpu_blocks, "N, the null block included.")
      .def_prop_ro("enable_caching", &BlockPool::enable_caching, "Prefix caching on.")
      .def("get_num_free_blocks", &BlockPool::get_num_free_blocks, "Blocks in the free queue.")
      .def("get_usage", &BlockPool::get_usage, "1 - free / (N - 1).")
      .def(
          "get_new_blocks",
          [](BlockPool& p, int32_t n) {
            if (n < 0 || n > p.get_num_free_blocks()) {
              throw std::invalid_argument(fmt::format("get_new_blocks({}): {} blocks are free", n,
                                                      p.get_num_free_blocks()));
            }
            std::vector<BlockId> out;
            p.get_new_blocks(n, out);
            return out;
          },
          nb::arg("num_blocks"),
          "Pops num_blocks blocks from the free-queue head (evicting their cached hashes), "
          "each with ref_cnt 1; returns their ids in order.")
      .def(
          "get_cached_block",
          [](const BlockPool& p, nb::int_ hash) { return p.get_cached_block(hash_from_int(hash)); },
          nb::arg("block_hash"), "The first block cached under block_hash, or None.")
      .def(
          "cache_full_blocks",
          [](BlockPool& p, const std::vector<BlockId>& blocks,
             const std::vector<nb::int_>& hashes) {
            if (blocks.size() != hashes.size()) {
              throw std::invalid_argument(fmt::format("cache_full_blocks: {} blocks but {} hashes",
                                                      blocks.size(), hashes.size()));
            }
            check_blocks(p, blocks);
            std::vector<BlockHash> hs;
            for (const nb::int_& h : hashes) hs.push_back(hash_from_int(h));
            p.cache_full_blocks(blocks, hs);
          },
          nb::arg("blocks"), nb::arg("block_hashes"),
          "Registers blocks[i] under block_hashes[i] (a block already hashed is skipped).")
      .def(
          "touch",
          [](BlockPool& p, const std::vector<BlockId>& blocks) {
            check_blocks(p, blocks);
            p.touch(blocks);
          },
          nb::arg("blocks"),
          "ref_cnt += 1 for each block, taking a free (cached) block out of the free queue.")
      .def(
          "free_blocks",
          [](BlockPool& p, const std::vector<BlockId>& blocks) {
            check_blocks(p, blocks);
            std::vector<int32_t> refs(static_cast<size_t>(p.num_gpu_blocks()), 0);
            for (BlockId b : blocks) {
              if (b == kNullBlockId) continue;
              if (++refs[static_cast<size_t>(b)] > p.ref_cnt(b)) {
                throw std::invalid_argument(
                    fmt::format("free_blocks: block {} is freed more often than it is held "
                                "(ref_cnt {})",
                                b, p.ref_cnt(b)));
              }
            }
            p.free_blocks(blocks);
          },
          nb::arg("ordered_blocks"),
          "ref_cnt -= 1 for each block in order; blocks reaching 0 go back to the free queue "
          "(unhashed first, hashed last).")
      .def("reset_prefix_cache", &BlockPool::reset_prefix_cache,
           "Forgets every hash if no block but the null block is in use; returns whether it did.")
      .def(
          "ref_cnt",
          [](const BlockPool& p, BlockId b) {
            check_block(p, b);
            return p.ref_cnt(b);
          },
          nb::arg("block_id"), "The block's reference count.")
      .def(
          "block_hash",
          [](const BlockPool& p, BlockId b) -> std::optional<nb::int_> {
            check_block(p, b);
            const std::optional<BlockHash> h = p.block_hash(b);
            if (!h) return std::nullopt;
            return hash_to_int(*h);
          },
          nb::arg("block_id"), "The block's prefix-cache hash, or None.")
      .def_prop_ro(
          "free_block_ids",
          [](const BlockPool& p) { return p.free_block_queue().get_all_free_blocks(); },
          "The free queue, head (next allocated) first.")
      .def_prop_ro("num_cached_blocks", &BlockPool::num_cached_blocks,
                   "Blocks holding a hash (in use or evictable).")
      .def_prop_ro("num_evictions", &BlockPool::num_evictions,
                   "Cached blocks evicted by get_new_blocks so far.")
      .def("check_invariants", &BlockPool::check_invariants,
           "Raises RuntimeError naming the first broken invariant.");

  nb::class_<Request>(m, "Request",
                      "A request as the allocator sees it: a prompt, the tokens computed so "
                      "far and the hashes of its full blocks.")
      .def(
          "__init__",
          [](Request* self, int64_t request_id,
             std::optional<std::vector<int32_t>> prompt_token_ids,
             std::optional<int32_t> num_prompt_tokens, int32_t max_tokens,
             std::optional<int32_t> block_size) {
            check_request_id(request_id);
            if (max_tokens < 1) throw std::invalid_argument("max_tokens must be >= 1");
            new (self) Request();
            self->request_id = request_id;
            self->max_tokens = max_tokens;
            self->content.salt = static_cast<uint64_t>(request_id) + 1;
            if (prompt_token_ids) {
              if (num_prompt_tokens &&
                  static_cast<size_t>(*num_prompt_tokens) != prompt_token_ids->size()) {
                throw std::invalid_argument("num_prompt_tokens differs from len(prompt_token_ids)");
              }
              self->num_prompt_tokens = static_cast<int32_t>(prompt_token_ids->size());
              self->content.token_ids =
                  std::make_shared<const std::vector<int32_t>>(std::move(*prompt_token_ids));
            } else if (num_prompt_tokens && *num_prompt_tokens >= 0) {
              self->num_prompt_tokens = *num_prompt_tokens;
            } else {
              throw std::invalid_argument(
                  "give prompt_token_ids, or num_prompt_tokens >= 0 (a prompt of unique tokens)");
            }
            if (block_size) {
              if (*block_size < 1) throw std::invalid_argument("block_size must be >= 1");
              self->enable_block_hashing(*block_size);
            }
          },
          nb::arg("request_id"), nb::arg("prompt_token_ids") = nb::none(),
          nb::arg("num_prompt_tokens") = nb::none(), nb::arg("max_tokens") = 1,
          nb::arg("block_size") = nb::none(),
          "A request with a dense integer id. prompt_token_ids make equal prompts share cached "
          "blocks; num_prompt_tokens alone is a prompt no other request shares. block_size "
          "(the manager's) turns on block hashing, needed for prefix caching.")
      .def_ro("request_id", &Request::request_id)
      .def_ro("num_prompt_tokens", &Request::num_prompt_tokens)
      .def_ro("max_tokens", &Request::max_tokens)
      .def_ro("num_output_tokens", &Request::num_output_tokens)
      .def_rw("num_computed_tokens", &Request::num_computed_tokens,
              "Tokens whose KV is computed (the scheduler advances it after each step).")
      .def_prop_ro("num_tokens", &Request::num_tokens, "Prompt + output tokens.")
      .def_prop_ro(
          "block_hashes",
          [](const Request& r) {
            std::vector<nb::int_> out;
            for (const BlockHash& h : r.block_hashes) out.push_back(hash_to_int(h));
            return out;
          },
          "Chained hashes of the full blocks (empty without block_size).")
      .def(
          "append_output_tokens",
          [](Request& r, int32_t n) {
            if (n < 0) throw std::invalid_argument("append_output_tokens: n must be >= 0");
            r.append_output_tokens(n);
          },
          nb::arg("n"),
          "Appends n generated tokens (vLLM: append_output_token_ids; kvsim keeps no token ids).");

  nb::class_<KVCacheManager>(m, "KVCacheManager",
                             "vLLM's KVCacheManager for one full-attention group over a "
                             "BlockPool.")
      .def(
          "__init__",
          [](KVCacheManager* self, int32_t num_gpu_blocks, int32_t block_size,
             int32_t max_model_len, bool enable_caching, double watermark,
             const std::string& vllm_version) {
            KVCacheManagerConfig c;
            c.num_gpu_blocks = num_gpu_blocks;
            c.block_size = block_size;
            c.max_model_len = max_model_len;
            c.enable_caching = enable_caching;
            c.watermark = watermark;
            c.prefix_cache_stats_at_admission =
                vllm_behavior(run::resolve_vllm_version(vllm_version))
                    .prefix_cache_stats_at_admission;
            new (self) KVCacheManager(c);
          },
          nb::arg("num_gpu_blocks"), nb::arg("block_size") = kDefaultBlockSize,
          nb::arg("max_model_len"), nb::arg("enable_caching") = true, nb::arg("watermark") = 0.0,
          nb::arg("vllm_version") = std::string(to_string(kDefaultVllmVersion)),
          "A manager over a new pool of num_gpu_blocks blocks of block_size tokens, behaving as "
          "vllm_version's ('0.26' or '0.33'): 0.26 records prefix_cache_stats at every "
          "get_computed_blocks, 0.33 only through record_prefix_cache_stats (the scheduler "
          "calls it once a request is admitted).")
      .def(
          "record_prefix_cache_stats",
          [](KVCacheManager& k, const Request& r, int32_t num_hit_tokens) {
            k.record_prefix_cache_stats(r, num_hit_tokens);
          },
          nb::arg("request"), nb::arg("num_hit_tokens"),
          "One prefix_cache_stats record for an admitted request's lookup (vLLM 0.33's "
          "KVCacheManager.record_prefix_cache_stats).")
      .def_prop_ro("block_size", [](const KVCacheManager& k) { return k.block_size(); })
      .def_prop_ro(
          "usage", [](const KVCacheManager& k) { return k.usage(); },
          "Fraction of the usable blocks in use.")
      .def_prop_ro("num_free_blocks", [](const KVCacheManager& k) { return k.num_free_blocks(); })
      .def_prop_ro(
          "padding_tokens", [](const KVCacheManager& k) { return k.padding_tokens(); },
          "Slots allocated but holding no token, over live requests (last-block "
          "waste and lookahead).")
      .def_prop_ro(
          "block_pool", [](const KVCacheManager& k) -> const BlockPool& { return k.block_pool(); },
          nb::rv_policy::reference_internal,
          "The underlying BlockPool (read it; change it through the manager).")
      .def(
          "get_computed_blocks",
          [](KVCacheManager& k, const Request& r) {
            ComputedBlocks c = k.get_computed_blocks(r);
            return std::make_pair(std::move(c.blocks), c.num_computed_tokens);
          },
          nb::arg("request"),
          "The longest cached prefix: (block ids, num_computed_tokens), capped at "
          "floor((num_tokens - 1) / block_size) blocks.")
      .def(
          "allocate_slots",
          [](KVCacheManager& k, Request& r, int32_t num_new_tokens, int32_t num_new_computed_tokens,
             std::optional<std::vector<BlockId>> new_computed_blocks, int32_t num_lookahead_tokens,
             bool full_sequence_must_fit,
             bool has_scheduled_reqs) -> std::optional<std::vector<BlockId>> {
            check_request_id(r.request_id);
            if (num_new_tokens < 0 || num_new_computed_tokens < 0 || num_lookahead_tokens < 0) {
              throw std::invalid_argument("allocate_slots: token counts must be >= 0");
            }
            const std::vector<BlockId> hits = new_computed_blocks.value_or(std::vector<BlockId>{});
            check_blocks(k.block_pool(), hits);
            AllocateSlotsArgs a;
            a.num_new_tokens = num_new_tokens;
            a.num_new_computed_tokens = num_new_computed_tokens;
            a.new_computed_blocks = hits;
            a.num_lookahead_tokens = num_lookahead_tokens;
            a.full_sequence_must_fit = full_sequence_must_fit;
            a.has_scheduled_reqs = has_scheduled_reqs;
            const auto got = k.allocate_slots(r, a);
            if (!got) return std::nullopt;
            return to_vector(*got);
          },
          nb::arg("request"), nb::arg("num_new_tokens"), nb::arg("num_new_computed_tokens") = 0,
          nb::arg("new_computed_blocks") = nb::none(), nb::arg("num_lookahead_tokens") = 0,
          nb::arg("full_sequence_must_fit") = false, nb::arg("has_scheduled_reqs") = true,
          "Allocates blocks for num_new_tokens more tokens; returns the new block ids, or None "
          "(nothing changed) when they do not fit.")
      .def(
          "cache_blocks",
          [](KVCacheManager& k, const Request& r, int64_t num_computed_tokens) {
            k.cache_blocks(r, num_computed_tokens);
          },
          nb::arg("request"), nb::arg("num_computed_tokens"),
          "Hashes the request's full blocks among its first num_computed_tokens tokens.")
      .def(
          "free", [](KVCacheManager& k, const Request& r) { k.free(r); }, nb::arg("request"),
          "Frees the request's blocks in reverse order.")
      .def(
          "get_block_ids",
          [](const KVCacheManager& k, int64_t request_id) {
            check_request_id(request_id);
            return to_vector(k.get_block_ids(request_id));
          },
          nb::arg("request_id"), "The request's block table.")
      .def_prop_ro(
          "prefix_cache_stats",
          [](const KVCacheManager& k) {
            const PrefixCacheStats& s = k.prefix_cache_stats();
            nb::dict d;
            d["requests"] = s.requests;
            d["queries"] = s.queries;
            d["hits"] = s.hits;
            d["preempted_requests"] = s.preempted_requests;
            d["preempted_queries"] = s.preempted_queries;
            d["preempted_hits"] = s.preempted_hits;
            return d;
          },
          "vLLM's PrefixCacheStats counters.")
      .def(
          "reset_prefix_cache", [](KVCacheManager& k) { return k.reset_prefix_cache(); },
          "Forgets every hash if no request holds blocks; returns whether it did.")
      .def(
          "check_invariants", [](const KVCacheManager& k) { k.check_invariants(); },
          "Raises RuntimeError naming the first broken invariant.");
}

}  // namespace kvsim::python
