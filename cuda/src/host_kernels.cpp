// The host twin: kv_ops.h functors on Thrust's CPP system (compiled by the C++ compiler with
// THRUST_DEVICE_SYSTEM=THRUST_DEVICE_SYSTEM_CPP, see cuda/CMakeLists.txt).
#include "kvsim/cuda/host_kernels.h"

#include <thrust/execution_policy.h>
#include <thrust/find.h>
#include <thrust/for_each.h>
#include <thrust/functional.h>
#include <thrust/iterator/counting_iterator.h>
#include <thrust/transform.h>
#include <thrust/transform_reduce.h>

#include "kvsim/cuda/kv_ops.h"

namespace kvsim::twin {

namespace {
template <class Op>
void for_each_item(int64_t n, const Op& op) {
  thrust::for_each(thrust::cpp::par, thrust::counting_iterator<int64_t>(0),
                   thrust::counting_iterator<int64_t>(n), op);
}
}  // namespace

void write_kv(const KvCacheLayout& layout, unsigned char* pool, int32_t layer_begin,
              int32_t num_layers, const unsigned char* key, const unsigned char* value,
              const int64_t* slot_mapping, int64_t num_tokens) {
  const ops::WriteKvOp op{layout,       pool,       key,         value,
                          slot_mapping, num_tokens, layer_begin, num_layers};
  for_each_item(op.num_items(), op);
}

void gen_kv(const KvCacheLayout& layout, int32_t layer_begin, int32_t num_layers,
            const int64_t* token_request, const int32_t* token_position, int64_t num_tokens,
            unsigned char* key, unsigned char* value) {
  const ops::GenKvOp op{layout,         key,        value,       token_request,
                        token_position, num_tokens, layer_begin, num_layers};
  for_each_item(op.num_items(), op);
}

void copy_blocks(const KvCacheLayout& layout, unsigned char* pool, const BlockCopy* pairs,
                 int64_t num_pairs) {
  const ops::CopyBlocksOp op{layout, pool, pairs, num_pairs};
  for_each_item(op.num_items(), op);
}

void gather_kv(const KvCacheLayout& layout, const unsigned char* pool, const int32_t* seq_lens,
               const int32_t* table_offsets, const BlockId* block_tables, int32_t num_seqs,
               uint64_t* checksums) {
  const ops::GatherKvOp op{layout, pool, seq_lens, table_offsets, block_tables, num_seqs};
  thrust::transform(thrust::cpp::par, thrust::counting_iterator<int32_t>(0),
                    thrust::counting_iterator<int32_t>(num_seqs), checksums, op);
}

int64_t verify_slots(const KvCacheLayout& layout, const unsigned char* pool,
                     const int64_t* slot_request, const int32_t* slot_position,
                     int64_t* first_bad_item) {
  const ops::VerifyVecOp op{layout, pool, slot_request, slot_position};
  const thrust::counting_iterator<int64_t> first(0);
  const thrust::counting_iterator<int64_t> last(op.num_items());
  const int64_t bad =
      thrust::transform_reduce(thrust::cpp::par, first, last, op, int64_t{0}, thrust::plus<>());
  *first_bad_item = -1;
  if (bad > 0) {
    *first_bad_item =
        *thrust::find_if(thrust::cpp::par, first, last, [&op](int64_t i) { return op(i) > 0; });
  }
  return bad;
}

}  // namespace kvsim::twin
