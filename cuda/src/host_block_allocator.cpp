#include <fmt/format.h>
#include <thrust/execution_policy.h>
#include <thrust/for_each.h>
#include <thrust/iterator/counting_iterator.h>
#include <thrust/scan.h>

#include <stdexcept>

#include "kvsim/cuda/block_allocator.h"

namespace kvsim {

HostBlockAllocator::HostBlockAllocator(int32_t num_blocks)
    : num_blocks_(num_blocks), count_(num_blocks - 1) {
  if (num_blocks < 1) {
    throw std::invalid_argument(fmt::format("num_blocks = {} must be >= 1", num_blocks));
  }
  stack_.resize(static_cast<size_t>(num_blocks - 1));
  for (int32_t i = 0; i < num_blocks - 1; ++i) stack_[static_cast<size_t>(i)] = num_blocks - 1 - i;
}

bool HostBlockAllocator::allocate(std::span<const int32_t> demands, std::vector<int32_t>& offsets,
                                  std::vector<BlockId>& block_ids) {
  int64_t total = 0;
  for (size_t i = 0; i < demands.size(); ++i) {
    if (demands[i] < 0) {
      throw std::invalid_argument(fmt::format("demands[{}] = {} is negative", i, demands[i]));
    }
    total += demands[i];
  }
  if (total > count_) return false;
  offsets.resize(demands.size() + 1);
  thrust::exclusive_scan(thrust::cpp::par, demands.begin(), demands.end(), offsets.begin());
  offsets.back() = static_cast<int32_t>(total);
  block_ids.resize(static_cast<size_t>(total));
  thrust::for_each(thrust::cpp::par, thrust::counting_iterator<int64_t>(0),
                   thrust::counting_iterator<int64_t>(total),
                   ops::StackTakeOp{stack_.data(), count_, block_ids.data()});
  count_ -= total;
  return true;
}

void HostBlockAllocator::free(std::span<const BlockId> blocks) {
  const auto total = static_cast<int64_t>(blocks.size());
  if (count_ + total > num_blocks_ - 1) {
    throw std::invalid_argument(
        fmt::format("freeing {} blocks with {} free overflows the {}-block pool (double free?)",
                    total, count_, num_blocks_ - 1));
  }
  for (size_t i = 0; i < blocks.size(); ++i) {
    if (blocks[i] < 1 || blocks[i] >= num_blocks_) {
      throw std::invalid_argument(
          fmt::format("blocks[{}] = {} is out of range [1, {})", i, blocks[i], num_blocks_));
    }
  }
  thrust::for_each(thrust::cpp::par, thrust::counting_iterator<int64_t>(0),
                   thrust::counting_iterator<int64_t>(total),
                   ops::StackPushOp{stack_.data(), count_, blocks.data(), total});
  count_ += total;
}

std::vector<BlockId> HostBlockAllocator::free_ids_top_first() const {
  return {
      stack_.rbegin() + static_cast<std::ptrdiff_t>(stack_.size() - static_cast<size_t>(count_)),
      stack_.rend()};
}

}  // namespace kvsim
