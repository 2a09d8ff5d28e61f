"""The conformance cases: scheduler configs and seeded request workloads (no vLLM import here).

Each case is recorded in sync and async mode with the same requests. Prompts are runs of
consecutive token ids so the golden files stay small and both sides see identical contents:
  * shared "system prompts": run [1,000,000 * (j + 1), length] for prefix j;
  * unique text: runs drawn from a counter starting at 50,000,000;
  * follow-ups: an earlier request's whole prompt plus a unique suffix (multi-turn);
  * duplicates: an earlier request's exact prompt (the hit is capped one token short).
Every request satisfies cdiv(prompt + max_tokens, 16) <= num_gpu_blocks - 1 and
prompt + max_tokens < max_model_len, so neither vLLM nor kvsim ever rejects or spins on one.
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
    workload: Workload


def gen_requests(case: Case) -> list[dict]:
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
    cfg = case.config
    for r in reqs:
        n = sum(c for _, c in r["prompt"])
        total = n + r["max_tokens"]
        assert 0 < n and total < cfg["max_model_len"], (case.name, r["id"])
        assert -(-total // BLOCK_SIZE) <= cfg["num_gpu_blocks"] - 1, (case.name, r["id"])
    return reqs


MAIN = Workload(num_requests=300, seed=1, suffix_len=(8, 400), output_len=(1, 48),
                shared_prefix_lens=(48, 100, 200, 330), p_shared=0.4, p_follow_up=0.15,
                p_duplicate=0.05, arrivals_per_step=0.6, priority_levels=4, max_total=1000)
# Short prompts, long outputs: the full-sequence gate admits many requests whose decodes then
# outgrow the pool together, so running requests are preempted over and over.
STARVED = Workload(num_requests=200, seed=2, suffix_len=(8, 120), output_len=(32, 160),
                   shared_prefix_lens=(32, 64, 96), p_shared=0.5, p_follow_up=0.15,
                   p_duplicate=0.05, arrivals_per_step=1.0, priority_levels=3, max_total=400)


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
    for k, v in overrides.items():
        assert k in c, k
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
]

CASES: list[Case] = [
    Case(name=f"{mode}_{name}", mode=mode, description=desc, config=cfg, workload=w)
    for mode in ("sync", "async")
    for name, desc, cfg, w in _BASE_CASES
]
