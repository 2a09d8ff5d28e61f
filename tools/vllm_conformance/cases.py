"""The conformance cases: scheduler configs and seeded request workloads (no vLLM import here).

Each case is recorded in sync and async mode with the same requests. Prompts are runs of
consecutive token ids so the golden files stay small and both sides see identical contents:
  * shared "system prompts": run [1,000,000 * (j + 1), length] for prefix j;
  * unique text: runs drawn from a counter starting at 50,000,000;
  * follow-ups: an earlier request's whole prompt plus a unique suffix (multi-turn);
  * duplicates: an earlier request's exact prompt (the hit is capped one token short).
Every request satisfies cdiv(prompt + max_tokens, 16) <= num_gpu_blocks - 1 (hybrid cases: the
sum over groups, a window group counted at most at its admission cap) and
prompt + max_tokens < max_model_len, so neither vLLM nor kvsim ever rejects or spins on one.

Hybrid cases (issue 9) add "kv_cache_groups" to the config: one entry per KV cache group, in
group order, {"kind": "full_attention" | "sliding_window" | "chunked_local_attention",
"sliding_window": W | "attention_chunk_size": C}; every group has block size 16 and one page size.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

BLOCK_SIZE = 16
SHARED_BASE = 1_000_000
UNIQUE_BASE = 50_000_000


@dataclass(frozen=True)
class Workload:
    num_requests: int
    seed: int
    suffix_len: tuple[int, int]  # unique part of a prompt, inclusive range
    output_len: tuple[int, int]  # max_tokens, inclusive range
    shared_prefix_lens: tuple[int, ...]
    p_shared: float  # prompt = shared prefix + unique suffix
    p_follow_up: float  # prompt = an earlier prompt + unique suffix
    p_duplicate: float  # prompt = an earlier prompt, exactly
    arrivals_per_step: float  # mean arrivals per schedule() call (exponential gaps)
    priority_levels: int  # priorities drawn from 0..levels-1 (FCFS ignores them)
    max_total: int  # cap on prompt + max_tokens


@dataclass(frozen=True)
class Case:
    name: str
    mode: str  # "sync" | "async"
    description: str
    config: dict = field(hash=False)
    workload: Workload | None
    # Hand-written requests (used instead of the workload when set).
    requests: tuple = ()
    # release ("0.26", "0.33") -> why this case is not recorded from that release (for example an
    # option the release does not have); the recorder prints the reason and writes no file.
    skip: dict = field(default_factory=dict, hash=False)


def _check_requests(case: Case, reqs: list[dict]) -> list[dict]:
    cfg = case.config
    for r in reqs:
        n = sum(c for _, c in r["prompt"])
        total = n + r["max_tokens"]
        assert 0 < n and total < cfg["max_model_len"], (case.name, r["id"])
        assert blocks_needed(cfg, total) <= cfg["num_gpu_blocks"] - 1, (case.name, r["id"])
    return reqs


def gen_requests(case: Case) -> list[dict]:
    if case.requests:
        reqs = [dict(r, prompt=[list(x) for x in r["prompt"]]) for r in case.requests]
        assert [r["id"] for r in reqs] == list(range(len(reqs))), case.name
        assert all(a["arrival_step"] <= b["arrival_step"] for a, b in zip(reqs, reqs[1:]))
        return _check_requests(case, reqs)
    w = case.workload
    rng = random.Random(w.seed)
    next_unique = UNIQUE_BASE
    t = 0.0
    reqs: list[dict] = []

    def unique(n: int) -> list[list[int]]:
        nonlocal next_unique
        run = [[next_unique, n]]
        next_unique += n + 17
        return run

    for i in range(w.num_requests):
        t += rng.expovariate(w.arrivals_per_step)
        max_tokens = rng.randint(*w.output_len)
        budget = w.max_total - max_tokens  # most prompt tokens this request may have
        suffix = rng.randint(*w.suffix_len)
        x = rng.random()
        runs: list[list[int]] | None = None
        earlier = reqs[-20:]
        if earlier and x < w.p_duplicate:
            runs = [list(r) for r in rng.choice(earlier)["prompt"]]
        elif earlier and x < w.p_duplicate + w.p_follow_up:
            runs = [list(r) for r in rng.choice(earlier)["prompt"]] + unique(max(1, suffix // 2))
        elif x < w.p_duplicate + w.p_follow_up + w.p_shared:
            j = rng.randrange(len(w.shared_prefix_lens))
            runs = [[SHARED_BASE * (j + 1), w.shared_prefix_lens[j]]] + unique(suffix)
        if runs is None or sum(c for _, c in runs) > budget:
            runs = unique(min(suffix, budget))
        reqs.append({
            "id": i,
            "arrival_step": int(t),
            "priority": rng.randrange(w.priority_levels),
            "max_tokens": max_tokens,
            "prompt": runs,
        })
    return _check_requests(case, reqs)


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def blocks_needed(cfg: dict, total: int) -> int:
    """Blocks a sequence of `total` tokens may hold at once: per group cdiv(total, 16), a window
    group capped at vLLM's max_admission_blocks_per_request (with async's in-flight tokens, the
    larger of the two modes')."""
    groups = cfg.get("kv_cache_groups") or [{"kind": "full_attention"}]
    in_flight = 2 * cfg["max_num_batched_tokens"]
    blocks = _cdiv(total, BLOCK_SIZE)
    need = 0
    for g in groups:
        if g["kind"] == "sliding_window":
            cap = _cdiv(min(g["sliding_window"] - 1 + in_flight, cfg["max_model_len"]),
                        BLOCK_SIZE) + 1
        elif g["kind"] == "chunked_local_attention":
            cap = _cdiv(min(g["attention_chunk_size"] + in_flight, cfg["max_model_len"]),
                        BLOCK_SIZE)
        else:
            cap = blocks
        need += min(blocks, cap)
    return need


MAIN = Workload(num_requests=300, seed=1, suffix_len=(8, 400), output_len=(1, 48),
                shared_prefix_lens=(48, 100, 200, 330), p_shared=0.4, p_follow_up=0.15,
                p_duplicate=0.05, arrivals_per_step=0.6, priority_levels=4, max_total=1000)
# Short prompts, long outputs: the full-sequence gate admits many requests whose decodes then
# outgrow the pool together, so running requests are preempted over and over.
STARVED = Workload(num_requests=200, seed=2, suffix_len=(8, 120), output_len=(32, 160),
                   shared_prefix_lens=(32, 64, 96), p_shared=0.5, p_follow_up=0.15,
                   p_duplicate=0.05, arrivals_per_step=1.0, priority_levels=3, max_total=400)


# Hybrid cases: fewer requests (each step records one block list per group).
HYBRID = Workload(num_requests=120, seed=3, suffix_len=(8, 400), output_len=(1, 64),
                  shared_prefix_lens=(48, 100, 200, 330), p_shared=0.4, p_follow_up=0.15,
                  p_duplicate=0.05, arrivals_per_step=0.6, priority_levels=1, max_total=1000)
HYBRID_STARVED = Workload(num_requests=100, seed=4, suffix_len=(8, 120), output_len=(32, 160),
                          shared_prefix_lens=(32, 64, 96), p_shared=0.5, p_follow_up=0.15,
                          p_duplicate=0.05, arrivals_per_step=1.0, priority_levels=1,
                          max_total=400)

# Admission at the edge (issue 23): shapes where a request is admitted only once the requests of
# the batch in flight have finished and freed their blocks or seats (async: one step after the
# schedule() that could not admit it).
# Each request needs 38..57 of 63 usable blocks: one at a time, always into an empty pool.
EMPTY_ONLY = Workload(num_requests=40, seed=5, suffix_len=(600, 900), output_len=(1, 8),
                      shared_prefix_lens=(48,), p_shared=0.0, p_follow_up=0.0, p_duplicate=0.0,
                      arrivals_per_step=1e9, priority_levels=1, max_total=1000)
SINGLE_SEAT = Workload(num_requests=80, seed=6, suffix_len=(8, 400), output_len=(1, 24),
                       shared_prefix_lens=(48, 100, 200), p_shared=0.4, p_follow_up=0.15,
                       p_duplicate=0.05, arrivals_per_step=0.3, priority_levels=1, max_total=1000)
# 300 tiny requests at once, one output token each, 256 seats.
TINY_AT_ONCE = Workload(num_requests=300, seed=7, suffix_len=(8, 8), output_len=(1, 1),
                        shared_prefix_lens=(48,), p_shared=0.0, p_follow_up=0.0, p_duplicate=0.0,
                        arrivals_per_step=1e9, priority_levels=1, max_total=64)


# Issue 26 (0.26 vs 0.33). A request mostly alone: arrivals ~50 steps apart, prompts of 100-700
# tokens against long_prefill_token_threshold 64 (0.33 ignores the threshold while running +
# waiting <= 1 at the start of the step).
LONE = Workload(num_requests=30, seed=8, suffix_len=(100, 700), output_len=(1, 16),
                shared_prefix_lens=(48, 200), p_shared=0.3, p_follow_up=0.1, p_duplicate=0.05,
                arrivals_per_step=0.02, priority_levels=1, max_total=1000)
# Sliding-window retention: multi-turn heavy (follow-ups and duplicates hit the window tails
# that sparse retention keeps or drops).
HYBRID_TURNS = Workload(num_requests=100, seed=9, suffix_len=(8, 300), output_len=(1, 48),
                        shared_prefix_lens=(100, 330), p_shared=0.3, p_follow_up=0.4,
                        p_duplicate=0.1, arrivals_per_step=0.5, priority_levels=1,
                        max_total=1000)


def _self_preempt_requests() -> tuple:
    """PRIORITY, 24 usable blocks. Request 0 (priority 2, the lowest) is admitted one step before
    requests 1-3 (priority 0), so it sits first in the running list and crosses each block
    boundary one step before them. After three rounds of growth the pool is empty exactly when
    request 0 needs its next block: the victim is request 0 itself, with requests 1-3 behind it
    in the running list. 0.26 ends the RUNNING loop there (1-3 get nothing that step); 0.33
    goes on and schedules them into the freed blocks. Requests 4-7 (priority 1) arrive later and
    repeat the pattern against 1-3 as they finish."""
    reqs = []

    def add(arrival, priority, prompt, max_tokens):
        i = len(reqs)
        reqs.append({"id": i, "arrival_step": arrival, "priority": priority,
                     "max_tokens": max_tokens, "prompt": [[UNIQUE_BASE + 1000 * i, prompt]]})

    add(0, 2, 40, 300)
    for _ in range(3):
        add(1, 0, 40, 120)
    for t in (60, 61, 62, 63):
        add(t, 1, 40, 150)
    return tuple(reqs)


def _victim_index_requests() -> tuple:
    """PRIORITY, 21 usable blocks, async: request 0 (priority 2, first in the running list) has
    its last token in flight, so the RUNNING loop skips it unscheduled; then request 1 needs a
    block from an empty pool and the victim is request 0, before the cursor. 0.26 moves the
    cursor back only for a victim scheduled in this step, so the list shifts under it and
    request 2 is passed over for the step; 0.33 moves it back for any victim before the cursor.
    (Sync mode never skips a running request: recorded for completeness.)"""
    reqs = []
    for i, (arrival, priority, prompt, max_tokens) in enumerate(
            [(0, 2, 42, 42), (1, 0, 40, 120), (1, 0, 40, 120), (1, 0, 40, 120)]):
        reqs.append({"id": i, "arrival_step": arrival, "priority": priority,
                     "max_tokens": max_tokens, "prompt": [[UNIQUE_BASE + 1000 * i, prompt]]})
    return tuple(reqs)


def _full() -> dict:
    return {"kind": "full_attention"}


def _sw(window: int) -> dict:
    return {"kind": "sliding_window", "sliding_window": window}


def _chunked(chunk: int) -> dict:
    return {"kind": "chunked_local_attention", "attention_chunk_size": chunk}


def _config(**overrides) -> dict:
    c = {
        "block_size": BLOCK_SIZE,
        "num_gpu_blocks": 200,
        "max_model_len": 2048,
        "max_num_batched_tokens": 512,
        "max_num_seqs": 32,
        "long_prefill_token_threshold": 0,
        "enable_chunked_prefill": True,
        "enable_prefix_caching": True,
        "policy": "fcfs",
        "watermark": 0.0,
        "scheduler_reserve_full_isl": True,
    }
    # Optional keys, written only when a case sets them: "kv_cache_groups" (hybrid) and
    # "prefix_cache_retention_interval" (int, or None = dense; absent = the release's default:
    # 0.26 None (the VLLM_PREFIX_CACHE_RETENTION_INTERVAL variable unset), 0.33 0).
    for k, v in overrides.items():
        assert k in c or k in ("kv_cache_groups", "prefix_cache_retention_interval"), k
        c[k] = v
    return c


STARVED_POOL = dict(num_gpu_blocks=40, max_model_len=1024, max_num_batched_tokens=256,
                    max_num_seqs=16)

_BASE_CASES = [
    ("fcfs_cache", "FCFS, prefix caching, chunked prefill; 199 usable blocks: shared prefixes, "
     "follow-ups, some preemptions", _config(), MAIN),
    ("fcfs_nocache", "as fcfs_cache with prefix caching off (LIFO reuse of freed blocks)",
     _config(enable_prefix_caching=False), MAIN),
    ("priority_cache", "PRIORITY (4 levels, ties by arrival then request id), prefix caching",
     _config(policy="priority"), MAIN),
    ("priority_nocache", "PRIORITY with prefix caching off",
     _config(policy="priority", enable_prefix_caching=False), MAIN),
    ("fcfs_cache_nochunk", "chunked prefill off (max_num_batched_tokens = max_model_len = 1024)",
     _config(enable_chunked_prefill=False, max_model_len=1024, max_num_batched_tokens=1024),
     MAIN),
    ("fcfs_cache_threshold", "long_prefill_token_threshold 64 with a 256-token budget",
     _config(long_prefill_token_threshold=64, max_num_batched_tokens=256), MAIN),
    ("fcfs_cache_maxseqs", "max_num_seqs 4 binding in a large pool (1023 usable blocks)",
     _config(max_num_seqs=4, num_gpu_blocks=1024), MAIN),
    ("fcfs_cache_watermark", "watermark 0.05 (10 blocks kept free at admission)",
     _config(watermark=0.05), MAIN),
    ("fcfs_starved_cache", "starved pool (39 usable blocks): hundreds of preemptions, "
     "preempted requests re-hit the cache", _config(**STARVED_POOL), STARVED),
    ("priority_starved_cache", "starved pool under PRIORITY: victims by (priority, arrival)",
     _config(policy="priority", **STARVED_POOL), STARVED),
    ("fcfs_starved_nocache", "starved pool without prefix caching",
     _config(enable_prefix_caching=False, **STARVED_POOL), STARVED),
    # Admission at the edge (issue 23).
    ("fcfs_empty_only", "every request needs more than half the pool (63 usable blocks): each is "
     "admitted only after the one before has finished",
     _config(num_gpu_blocks=64, max_model_len=1024, max_num_batched_tokens=1024,
             max_num_seqs=16), EMPTY_ONLY),
    ("fcfs_single_seat", "max_num_seqs 1: the next request takes the seat of one that finishes",
     _config(max_num_seqs=1, num_gpu_blocks=1024), SINGLE_SEAT),
    ("fcfs_tiny_at_once", "300 requests of 8 prompt tokens and 1 output token at once, 256 seats",
     _config(max_num_seqs=256, num_gpu_blocks=400, max_model_len=64,
             max_num_batched_tokens=2048, enable_prefix_caching=False), TINY_AT_ONCE),
    # Hybrid KV cache (issue 9).
    ("hybrid_swa_cache", "gpt-oss-like: full + sliding-window-128 groups (one page size), "
     "prefix caching: window frees, null-padded hits, the fixed point",
     _config(num_gpu_blocks=300, kv_cache_groups=[_full(), _sw(128)]), HYBRID),
    ("hybrid_swa_nocache", "gpt-oss-like without prefix caching",
     _config(num_gpu_blocks=300, enable_prefix_caching=False,
             kv_cache_groups=[_full(), _sw(128)]), HYBRID),
    ("hybrid_gemma_cache", "Gemma-3-like 5:1 at small scale: five sliding-window-256 groups then "
     "one full group, prefix caching (full attention looked up first)",
     _config(num_gpu_blocks=500, kv_cache_groups=[_sw(256)] * 5 + [_full()]), HYBRID),
    ("hybrid_chunked_cache", "Llama-4-like: full + chunked-local-128 groups, prefix caching",
     _config(num_gpu_blocks=300, kv_cache_groups=[_full(), _chunked(128)]), HYBRID),
    ("hybrid_swa_starved_cache", "full + sliding-window-64 in a starved pool (63 usable "
     "blocks): preemptions, admission cap, re-hits",
     _config(num_gpu_blocks=64, max_model_len=1024, max_num_batched_tokens=256, max_num_seqs=16,
             kv_cache_groups=[_full(), _sw(64)]), HYBRID_STARVED),
    # Issue 26: cases that separate vLLM 0.26 from 0.33 (recorded from both).
    ("fcfs_lone_threshold", "long_prefill_token_threshold 64, budget 256, requests mostly "
     "alone: 0.26 chunks a lone prompt at 64 tokens, 0.33 skips the threshold when running + "
     "waiting <= 1", _config(long_prefill_token_threshold=64, max_num_batched_tokens=256),
     LONE),
    ("priority_self_preempt", "PRIORITY, 24 usable blocks: the lowest-priority request, first "
     "in the running list, preempts itself with higher-priority requests behind it (0.26 ends "
     "the RUNNING loop, 0.33 goes on)",
     _config(policy="priority", num_gpu_blocks=25, max_model_len=1024,
             max_num_batched_tokens=256, max_num_seqs=8, enable_prefix_caching=False),
     _self_preempt_requests()),
    ("priority_victim_index", "PRIORITY, 21 usable blocks: async skips the lowest-priority "
     "request (its last token in flight), then picks it as the victim from before the cursor "
     "(0.26 passes over the next request for the step, 0.33 does not)",
     _config(policy="priority", num_gpu_blocks=22, max_model_len=1024,
             max_num_batched_tokens=256, max_num_seqs=8, enable_prefix_caching=False),
     _victim_index_requests()),
    ("hybrid_swa_retention_default", "full + sliding-window-128, prefix caching, multi-turn "
     "heavy, the release's default retention (0.26: dense; 0.33: 0 = sparse, only replay "
     "boundary and shared-prefix junction tails cached)",
     _config(num_gpu_blocks=300, kv_cache_groups=[_full(), _sw(128)]), HYBRID_TURNS),
    ("hybrid_swa_retention_256", "as hybrid_swa_retention_default with "
     "prefix_cache_retention_interval 256 (0.26: VLLM_PREFIX_CACHE_RETENTION_INTERVAL=256; "
     "0.33: the CacheConfig option): window tails every 256 tokens kept",
     _config(num_gpu_blocks=300, kv_cache_groups=[_full(), _sw(128)],
             prefix_cache_retention_interval=256), HYBRID_TURNS),
    ("hybrid_swa_retention_dense", "as hybrid_swa_retention_default with "
     "prefix_cache_retention_interval None (dense in both releases: 0.33's "
     "--prefix-cache-retention-interval None)",
     _config(num_gpu_blocks=300, kv_cache_groups=[_full(), _sw(128)],
             prefix_cache_retention_interval=None), HYBRID_TURNS),
]

CASES: list[Case] = [
    Case(name=f"{mode}_{name}", mode=mode, description=desc, config=cfg,
         workload=w if isinstance(w, Workload) else None,
         requests=() if isinstance(w, Workload) else w)
    for mode in ("sync", "async")
    for name, desc, cfg, w in _BASE_CASES
]
