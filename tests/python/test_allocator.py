"""kvsim.BlockPool / KVCacheManager / Request: vLLM's method names and behaviour, checked inputs."""

import pytest

import kvsim


def test_block_pool_free_queue_order():
    pool = kvsim.BlockPool(10)
    assert pool.free_block_ids == list(range(1, 10))  # block 0 is the null block
    assert pool.get_new_blocks(3) == [1, 2, 3]
    assert pool.get_num_free_blocks() == 6
    assert pool.get_usage() == pytest.approx(3 / 9)
    h = (1 << 100) + 5  # a 128-bit hash
    pool.cache_full_blocks([1], [h])
    assert pool.block_hash(1) == h and pool.get_cached_block(h) == 1
    pool.free_blocks([3, 2, 1])
    # Unhashed blocks go to the front (LIFO reuse), hashed ones to the back (LRU eviction).
    assert pool.free_block_ids == [3, 2, 4, 5, 6, 7, 8, 9, 1]
    assert pool.get_cached_block(h) == 1  # still a prefix hit until evicted
    pool.touch([1])
    assert pool.ref_cnt(1) == 1 and 1 not in pool.free_block_ids
    pool.check_invariants()


def test_block_pool_checks_ids_and_counts():
    pool = kvsim.BlockPool(4)
    with pytest.raises(ValueError, match="not in the pool"):
        pool.touch([7])
    with pytest.raises(ValueError, match="freed more often"):
        pool.free_blocks([1])
    with pytest.raises(ValueError, match="3 blocks are free"):
        pool.get_new_blocks(5)
    with pytest.raises(ValueError):
        kvsim.BlockPool(0)
    pool.check_invariants()


def test_prefix_cache_hit_between_equal_prompts():
    kv = kvsim.KVCacheManager(num_gpu_blocks=20, block_size=4, max_model_len=64)
    a = kvsim.Request(0, prompt_token_ids=list(range(10)), block_size=4)
    assert kv.allocate_slots(a, 10) == [1, 2, 3]
    b = kvsim.Request(1, prompt_token_ids=list(range(10)), block_size=4)
    hits, tokens = kv.get_computed_blocks(b)
    assert (hits, tokens) == ([1, 2], 8)  # the two full blocks; the partial one is not cached
    new = kv.allocate_slots(b, 2, num_new_computed_tokens=tokens, new_computed_blocks=hits)
    assert new == [4]
    assert kv.get_block_ids(1) == [1, 2, 4]
    assert kv.block_pool.ref_cnt(1) == 2
    # vLLM 0.33 (the default) records a lookup once the request is admitted, by the caller.
    assert kv.prefix_cache_stats["hits"] == 0
    kv.record_prefix_cache_stats(b, tokens)
    assert kv.prefix_cache_stats["hits"] == 8
    kv.check_invariants()


def test_prefix_cache_stats_per_release():
    # vLLM 0.26 records inside get_computed_blocks, at every lookup.
    kv = kvsim.KVCacheManager(num_gpu_blocks=20, block_size=4, max_model_len=64,
                              vllm_version="0.26")
    a = kvsim.Request(0, prompt_token_ids=list(range(10)), block_size=4)
    kv.get_computed_blocks(a)
    kv.get_computed_blocks(a)  # a retry after a failed admission counts again
    assert kv.prefix_cache_stats["requests"] == 2
    assert kv.prefix_cache_stats["queries"] == 20
    with pytest.raises(ValueError, match="vllm_version"):
        kvsim.KVCacheManager(num_gpu_blocks=20, block_size=4, max_model_len=64,
                             vllm_version="0.20")


def test_allocation_that_does_not_fit_returns_none():
    kv = kvsim.KVCacheManager(num_gpu_blocks=3, block_size=16, max_model_len=64)
    r = kvsim.Request(0, num_prompt_tokens=40)
    assert kv.allocate_slots(r, 40) is None  # 3 blocks needed, 2 usable
    assert kv.num_free_blocks == 2 and kv.usage == 0


def test_request_checks():
    with pytest.raises(ValueError, match="request ids"):
        kvsim.Request(-1, num_prompt_tokens=4)
    with pytest.raises(ValueError, match="give prompt_token_ids"):
        kvsim.Request(0)
    r = kvsim.Request(3, prompt_token_ids=[1, 2, 3, 4, 5], block_size=2)
    assert r.num_tokens == 5 and len(r.block_hashes) == 2
    r.append_output_tokens(1)
    assert r.num_tokens == 6 and len(r.block_hashes) == 3
