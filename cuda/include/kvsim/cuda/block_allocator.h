// Batched block allocators over a free *stack*: the host twin and the GPU-resident one.
//
// Both keep the free block ids in an array `stack[0 .. count)` whose top (stack[count - 1]) is the
// next block handed out. They reproduce kvsim::BlockPool with prefix caching off (vLLM 0.26: free
// prepends unhashed blocks to the free-queue head, allocation pops the head), i.e. a LIFO:
//   * construction: stack = [N-1, ..., 2, 1] so block 1 is on top (free queue [1, 2, ..., N-1]);
//     block 0 is the null block and is never handed out;
//   * allocate(demands): request i takes demands[i] blocks; the requests take consecutive runs
//     from the top in request order (offsets = exclusive scan of demands), exactly the ids that
//     BlockPool::get_new_blocks(demands[0]), get_new_blocks(demands[1]), ... would return;
//   * free(blocks) == BlockPool::free_blocks(blocks) when every block reaches ref count 0:
//     blocks[0] becomes the top (the next block allocated), then blocks[1], ...
// Allocation is all-or-nothing: when sum(demands) > num_free() nothing changes.
// Neither allocator tracks ownership (double frees are the caller's bug); both reject ids outside
// [1, N) and frees that would overflow the stack.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "kvsim/core/types.h"
#include "kvsim/cuda/detail/hd.h"

struct CUstream_st;

namespace kvsim {

namespace ops {

// Flat output k of a batched allocation: the k-th block below the top.
struct StackTakeOp {
  const BlockId* stack;
  int64_t count;
  BlockId* out;
  KVSIM_HD void operator()(int64_t k) const { out[k] = stack[count - 1 - k]; }
};

// Pushes freed[0 .. total) so that freed[0] ends on top.
struct StackPushOp {
  BlockId* stack;
  int64_t count;
  const BlockId* freed;
  int64_t total;
  KVSIM_HD void operator()(int64_t k) const { stack[count + total - 1 - k] = freed[k]; }
};

}  // namespace ops

// Host twin (Thrust CPP system): exclusive scan + take, the same ops as the GPU allocator.
class HostBlockAllocator {
 public:
  // num_blocks >= 1 (null block included). Throws std::invalid_argument otherwise.
  explicit HostBlockAllocator(int32_t num_blocks);

  int32_t num_blocks() const { return num_blocks_; }
  int64_t num_free() const { return count_; }

  // On success returns true, `offsets` gets demands.size() + 1 entries (CSR into `block_ids`) and
  // `block_ids` the concatenated runs. Returns false and changes nothing when the blocks are
  // short. Throws std::invalid_argument on a negative demand.
  bool allocate(std::span<const int32_t> demands, std::vector<int32_t>& offsets,
                std::vector<BlockId>& block_ids);
  void free(std::span<const BlockId> blocks);
  // Free ids, next-to-allocate first (== BlockPool's free queue head to tail).
  std::vector<BlockId> free_ids_top_first() const;

 private:
  int32_t num_blocks_;
  std::vector<BlockId> stack_;
  int64_t count_;
};

// Status word written by the GPU allocator's kernels.
enum class AllocStatus : int32_t { kOk = 0, kOutOfBlocks = 1, kBadInput = 2 };

// GPU-resident allocator: the stack and its count live in device memory; allocate and free are
// one single-CTA kernel launch each (cub::BlockScan over the demands, then the take/push), fully
// asynchronous on the given stream. One CTA keeps the order deterministic and is ample for one
// engine step's batch (thousands of requests); it is not meant for millions per launch.
// Constructing it without a CUDA device (or in a build without CUDA) throws std::runtime_error.
class GpuBlockAllocator {
 public:
  explicit GpuBlockAllocator(int32_t num_blocks);
  ~GpuBlockAllocator();
  GpuBlockAllocator(const GpuBlockAllocator&) = delete;
  GpuBlockAllocator& operator=(const GpuBlockAllocator&) = delete;

  int32_t num_blocks() const { return num_blocks_; }

  // Device-pointer API. d_offsets: n + 1 entries; d_block_ids: room for every block that can be
  // free (num_blocks - 1); *d_status: an AllocStatus.
  void allocate_async(const int32_t* d_demands, int32_t n, int32_t* d_offsets, BlockId* d_block_ids,
                      int32_t* d_status, CUstream_st* stream) const;
  void free_async(const BlockId* d_blocks, int64_t n, int32_t* d_status, CUstream_st* stream) const;

  // Host convenience wrappers (copy in/out and synchronise), same contract as HostBlockAllocator.
  bool allocate(std::span<const int32_t> demands, std::vector<int32_t>& offsets,
                std::vector<BlockId>& block_ids);
  void free(std::span<const BlockId> blocks);
  int64_t num_free() const;
  std::vector<BlockId> free_ids_top_first() const;

 private:
  int32_t num_blocks_;
  // Unused where CUDA is absent (cuda_unavailable.cpp defines every member without them).
  [[maybe_unused]] BlockId* d_stack_ = nullptr;
  [[maybe_unused]] int64_t* d_count_ = nullptr;
};

}  // namespace kvsim
