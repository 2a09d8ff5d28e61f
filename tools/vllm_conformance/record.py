#!/usr/bin/env python3
"""Records kvsim's conformance goldens from vLLM 0.26.0's or 0.33.0's real v1 scheduler.

Runs vLLM's own `Scheduler` (sync) and `AsyncScheduler` (async) on CPU, with no model: a
KVCacheConfig with one full-attention group stands in for the GPU pool and this script plays the
model runner. The engine loop is emulated exactly as `EngineCore.step` (sync) and
`EngineCore.step_with_batch_queue` (async, batch queue of 2) order schedule() and
update_from_output(). Each case's input (config + requests) and vLLM's per-step results go to one
gzip'd JSON file that kvsim's tests/sim/sched/test_vllm_goldens.cpp replays without vLLM.
The release comes from the venv's wheel (versions.py: 0.26.0 or 0.33.0, nothing else); the files
go to <out>/<release>/ ("0.26" or "0.33"). Both releases' EngineCore.step and
step_with_batch_queue call schedule() and update_from_output() in the same order (checked line for
line in vllm/v1/engine/core.py), so one emulation serves both.

Usage (needs a venv with `pip install vllm==0.26.0` or `vllm==0.33.0`; see README.md):
    python record.py --out tests/data/vllm_goldens [--only CASE ...] [--list]

The format is described in docs/conformance.md. Output bytes are deterministic (gzip mtime 0,
seeded generators, compact JSON).
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import sys
import tempfile
from collections import deque
from pathlib import Path

from cases import CASES, Case, gen_requests
from versions import installed_release

FORMAT = "kvsim-vllm-golden/1"
BLOCK_SIZE = 16
# Generated token ids: unique per request and output index, disjoint from every prompt token
# (cases.py keeps prompt ids below 100,000,000), so a block holding a generated token is unique
# to its request in vLLM, as kvsim makes it with the request's salt.
GEN_TOKEN_BASE = 100_000_000
GEN_TOKENS_PER_REQUEST = 10_000
MAX_ENGINE_ITERATIONS = 1_000_000  # a case that spins this long is a generator bug

# Just enough of an HF config for ModelConfig to resolve a dense decoder offline. The scheduler
# only reads max_model_len and generic flags from it; no weights are ever loaded.
HF_CONFIG = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_attention_heads": 4,
    "num_key_value_heads": 4,
    "num_hidden_layers": 1,
    "vocab_size": 1000,
    "max_position_embeddings": 65536,
    "rms_norm_eps": 1e-5,
    "torch_dtype": "float32",
    "tie_word_embeddings": False,
}


def req_id_str(i: int) -> str:
    # Zero-padded so vLLM's string comparison of request ids (PRIORITY heap ties) orders them
    # exactly as kvsim's integer ids.
    return f"{i:06d}"


def expand_prompt(runs: list[list[int]]) -> list[int]:
    out: list[int] = []
    for first, count in runs:
        out.extend(range(first, first + count))
    return out


RETENTION_ENV = "VLLM_PREFIX_CACHE_RETENTION_INTERVAL"  # 0.26's form of the 0.33 option


class VllmHarness:
    """vLLM's scheduler for one case, built as that release's EngineCore builds it."""

    def __init__(self, case: Case, model_dir: str, release: str):
        import torch
        from vllm.config import (
            CacheConfig,
            DeviceConfig,
            ModelConfig,
            SchedulerConfig,
            VllmConfig,
        )
        from vllm.utils.hashing import get_hash_fn_by_name
        from vllm.v1.core.kv_cache_utils import get_request_block_hasher, init_none_hash
        from vllm.v1.core.sched.async_scheduler import AsyncScheduler
        from vllm.v1.core.sched.scheduler import Scheduler
        from vllm.v1.kv_cache_interface import (
            ChunkedLocalAttentionSpec,
            FullAttentionSpec,
            KVCacheConfig,
            KVCacheGroupSpec,
            SlidingWindowSpec,
        )
        from vllm.v1.structured_output import StructuredOutputManager

        c = case.config
        model_config = ModelConfig(
            model=model_dir,
            skip_tokenizer_init=True,
            dtype="float32",
            seed=0,
            max_model_len=c["max_model_len"],
        )
        scheduler_config = SchedulerConfig(
            max_num_seqs=c["max_num_seqs"],
            max_num_batched_tokens=c["max_num_batched_tokens"],
            max_model_len=c["max_model_len"],
            long_prefill_token_threshold=c["long_prefill_token_threshold"],
            enable_chunked_prefill=c["enable_chunked_prefill"],
            policy=c["policy"],
            watermark=c["watermark"],
            scheduler_reserve_full_isl=c["scheduler_reserve_full_isl"],
            async_scheduling=case.mode == "async",
            is_encoder_decoder=False,
        )
        # prefix_cache_retention_interval (sparse sliding-window caching): a case that sets it
        # gives it as 0.33's CacheConfig option or 0.26's environment variable (read by the
        # coordinator's constructor); a case that does not gets the release's default (0.26: the
        # variable unset = None = dense; 0.33: 0 = sparse).
        cache_kw = {}
        os.environ.pop(RETENTION_ENV, None)
        if "prefix_cache_retention_interval" in c:
            interval = c["prefix_cache_retention_interval"]
            if release == "0.26":
                if interval is not None:
                    os.environ[RETENTION_ENV] = str(interval)
            else:
                cache_kw["prefix_cache_retention_interval"] = interval
        cache_config = CacheConfig(
            block_size=BLOCK_SIZE,
            enable_prefix_caching=c["enable_prefix_caching"],
            **cache_kw,
        )
        vllm_config = VllmConfig(
            model_config=model_config,
            scheduler_config=scheduler_config,
            cache_config=cache_config,
            device_config=DeviceConfig(device="cpu"),
        )
        # The CPU platform turns async scheduling off ("not required on CPU") and may change the
        # block size; the GPU path the goldens stand for keeps what the case asks for.
        sc = vllm_config.scheduler_config
        sc.async_scheduling = case.mode == "async"
        vllm_config.cache_config.block_size = BLOCK_SIZE
        checks = {
            "max_num_seqs": sc.max_num_seqs,
            "max_num_batched_tokens": sc.max_num_batched_tokens,
            "max_model_len": vllm_config.model_config.max_model_len,
            "long_prefill_token_threshold": sc.long_prefill_token_threshold,
            "enable_chunked_prefill": sc.enable_chunked_prefill,
            "policy": sc.policy,
            "watermark": sc.watermark,
            "scheduler_reserve_full_isl": sc.scheduler_reserve_full_isl,
            "enable_prefix_caching": vllm_config.cache_config.enable_prefix_caching,
        }
        for key, got in checks.items():
            if got != c[key]:
                raise SystemExit(f"{case.name}: VllmConfig changed {key}: {c[key]!r} -> {got!r}")
        if release == "0.33":
            # Options new in 0.33 that the cases leave at their defaults (no change to 0.26).
            new_defaults = {
                "long_prefill_token_threshold_adaptive": False,
                "max_num_active_seqs": None,
                "prefill_schedule_interval": 1,
            }
            for key, want in new_defaults.items():
                if getattr(sc, key) != want:
                    raise SystemExit(f"{case.name}: 0.33 {key} is {getattr(sc, key)!r}")
        if vllm_config.parallel_config.pipeline_parallel_size != 1:
            raise SystemExit(f"{case.name}: pipeline parallel size is not 1")
        self.batch_queue_size = vllm_config.max_concurrent_batches if case.mode == "async" else 1
        if case.mode == "async" and self.batch_queue_size != 2:
            raise SystemExit(f"{case.name}: max_concurrent_batches {self.batch_queue_size} != 2")
        self.use_v2_model_runner = bool(vllm_config.use_v2_model_runner)

        def make_spec(g: dict):
            kw = dict(block_size=BLOCK_SIZE, num_kv_heads=1, head_size=1, dtype=torch.float32)
            if g["kind"] == "full_attention":
                return FullAttentionSpec(**kw)
            if g["kind"] == "sliding_window":
                return SlidingWindowSpec(sliding_window=g["sliding_window"], **kw)
            if g["kind"] == "chunked_local_attention":
                return ChunkedLocalAttentionSpec(
                    attention_chunk_size=g["attention_chunk_size"], **kw)
            raise SystemExit(f"{case.name}: unknown group kind {g['kind']!r}")

        # Hybrid cases: one group per entry (equal page sizes: vLLM's one-pool layout).
        self.hybrid = "kv_cache_groups" in c
        groups = c.get("kv_cache_groups") or [{"kind": "full_attention"}]
        kv_cache_groups = [
            KVCacheGroupSpec([f"layer{i}"], make_spec(g)) for i, g in enumerate(groups)
        ]
        hash_block_size = BLOCK_SIZE
        if release == "0.26":
            kv_cache_config = KVCacheConfig(
                num_blocks=c["num_gpu_blocks"],
                kv_cache_tensors=[],
                kv_cache_groups=kv_cache_groups,
            )
        else:
            from vllm.v1.core.kv_cache_utils import (
                resolve_cache_hit_alignment_tokens,
                resolve_kv_cache_block_sizes,
            )

            # EngineCore._initialize_kv_caches (0.33): the planner copies the retention interval
            # from CacheConfig into the KVCacheConfig (the dataclass default None would be dense),
            # then the engine resolves the block sizes and the hit alignment on it.
            kv_cache_config = KVCacheConfig(
                num_blocks=c["num_gpu_blocks"],
                kv_cache_tensors=[],
                kv_cache_groups=kv_cache_groups,
                prefix_cache_retention_interval=(
                    vllm_config.cache_config.prefix_cache_retention_interval),
            )
            sched_bs, hash_block_size = resolve_kv_cache_block_sizes(kv_cache_config, vllm_config)
            kv_cache_config.hash_block_size = hash_block_size
            kv_cache_config.cache_hit_alignment_tokens = resolve_cache_hit_alignment_tokens(
                kv_cache_config, vllm_config, sched_bs, hash_block_size)
            if (sched_bs, hash_block_size) != (BLOCK_SIZE, BLOCK_SIZE):
                raise SystemExit(f"{case.name}: block sizes {sched_bs}/{hash_block_size}")
        vllm_config.cache_config.num_gpu_blocks = c["num_gpu_blocks"]
        cls = AsyncScheduler if case.mode == "async" else Scheduler
        self.scheduler = cls(
            vllm_config=vllm_config,
            kv_cache_config=kv_cache_config,
            structured_output_manager=StructuredOutputManager(vllm_config),
            block_size=BLOCK_SIZE,
            hash_block_size=BLOCK_SIZE,
            include_finished_set=False,
            log_stats=True,  # EngineCore's default (stats logging on): PrefixCacheStats recorded
        )
        if self.scheduler.max_num_scheduled_tokens != c["max_num_batched_tokens"]:
            raise SystemExit(f"{case.name}: token budget {self.scheduler.max_num_scheduled_tokens}")
        # The interval the coordinator resolved (None = dense); recorded when not None.
        self.retention_interval = self.scheduler.kv_cache_manager.coordinator.retention_interval
        os.environ.pop(RETENTION_ENV, None)
        # EngineCore installs the hasher only when prefix caching is on (sha256 by default).
        self.block_hasher = None
        if c["enable_prefix_caching"]:
            hash_fn = get_hash_fn_by_name(vllm_config.cache_config.prefix_caching_hash_algo)
            init_none_hash(hash_fn)
            if release == "0.26":
                self.block_hasher = get_request_block_hasher(BLOCK_SIZE, hash_fn)
            else:
                self.block_hasher = get_request_block_hasher(
                    hash_block_size, hash_fn, vllm_config.num_hash_lookahead_tokens)

    def make_request(self, r: dict):
        from vllm.sampling_params import SamplingParams
        from vllm.v1.request import Request

        params = SamplingParams(max_tokens=r["max_tokens"], ignore_eos=True)
        return Request(
            request_id=req_id_str(r["id"]),
            prompt_token_ids=expand_prompt(r["prompt"]),
            sampling_params=params,
            pooling_params=None,
            arrival_time=float(r["arrival_step"]),
            priority=r["priority"],
            block_hasher=self.block_hasher,
        )


class StatsTotals:
    """Cumulative PrefixCacheStats. update_from_output's make_stats() swaps in a fresh object
    every step; reading after every schedule() and update sees each object's final values."""

    FIELDS = ("requests", "queries", "hits", "preempted_requests", "preempted_queries",
              "preempted_hits")

    def __init__(self, kv_cache_manager):
        self.kvm = kv_cache_manager
        self.base = [0] * 6
        self.obj = kv_cache_manager.prefix_cache_stats

    def totals(self) -> list[int]:
        cur = self.kvm.prefix_cache_stats
        if cur is not self.obj:
            self.base = [b + getattr(self.obj, f) for b, f in zip(self.base, self.FIELDS)]
            self.obj = cur
        return [b + getattr(cur, f) for b, f in zip(self.base, self.FIELDS)]


def run_case(case: Case, model_dir: str, release: str) -> dict:
    from vllm.v1.outputs import ModelRunnerOutput

    h = VllmHarness(case, model_dir, release)
    sched = h.scheduler
    kvm = sched.kv_cache_manager
    pool = kvm.block_pool
    stats = StatsTotals(kvm)
    reqs = gen_requests(case)
    vreqs = [h.make_request(r) for r in reqs]
    sampled_count = [0] * len(reqs)

    steps: list[dict] = []
    queue: deque = deque()  # (step record, sample decisions); appendleft new, pop oldest
    next_req = 0
    k = 0  # index of the next schedule() call

    def model_output(batch_out, samples: list[tuple[str, bool]]):
        # The GPU model runner: one sampled token for every request whose prefill completes in
        # this batch or that decodes; none for a partial prefill chunk.
        req_ids = [rid for rid, _ in samples]
        sampled = []
        for rid, sample in samples:
            if sample:
                i = int(rid)
                sampled.append([GEN_TOKEN_BASE + i * GEN_TOKENS_PER_REQUEST + sampled_count[i]])
                sampled_count[i] += 1
            else:
                sampled.append([])
        return ModelRunnerOutput(
            req_ids=req_ids,
            req_id_to_index={rid: j for j, rid in enumerate(req_ids)},
            sampled_token_ids=sampled,
            logprobs=None,
            prompt_logprobs_dict={},
            pooler_output=[],
        )

    def do_schedule() -> tuple:
        nonlocal k
        out = sched.schedule()
        new_ids = {nr.req_id: nr for nr in out.scheduled_new_reqs}
        cached = out.scheduled_cached_reqs
        cached_idx = {rid: j for j, rid in enumerate(cached.req_ids)}
        s = []
        samples = []
        for rid, n in out.num_scheduled_tokens.items():
            req = sched.requests[rid]
            # _update_after_schedule already added n.
            computed_before = req.num_computed_tokens - n
            # Single group: a flat id list; hybrid: one list per group.
            if rid in new_ids:
                kind = 1
                per_group = [list(g) for g in new_ids[rid].block_ids]
            else:
                j = cached_idx[rid]
                kind = 2 if rid in cached.resumed_req_ids else 0
                nb = cached.new_block_ids[j]
                ngroups = len(kvm.kv_cache_config.kv_cache_groups)
                per_group = [list(g) for g in nb] if nb is not None else [[]] * ngroups
            blocks = per_group if h.hybrid else per_group[0]
            s.append([int(rid), n, computed_before, blocks, kind])
            samples.append((rid, not req.is_prefill_chunk))
        rec = {
            "k": k,
            "s": s,
            "p": sorted(int(x) for x in (out.preempted_req_ids or ())),
            "f": sorted(int(x) for x in out.finished_req_ids),
            "r": len(sched.running),
            # 0.26: waiting + skipped_waiting; 0.33: waiting + kv_holding_waiting.
            "w": sched.get_request_counts()[1],
            "free": pool.get_num_free_blocks(),
            "pc": stats.totals(),
            "u": [],
            "free_u": pool.get_num_free_blocks(),
        }
        steps.append(rec)
        k += 1
        return out, samples, rec

    def do_update(entry) -> None:
        out, samples, rec = entry
        sched.update_from_output(out, model_output(out, samples))
        stats.totals()
        last = steps[-1]  # the update belongs to the latest schedule() call's iteration
        last["u"].append(rec["k"])
        last["free_u"] = pool.get_num_free_blocks()

    for _ in range(MAX_ENGINE_ITERATIONS):
        # EngineCore._process_input_queue: arrivals are added before the engine step.
        while next_req < len(reqs) and reqs[next_req]["arrival_step"] <= k:
            sched.add_request(vreqs[next_req])
            next_req += 1
        if case.mode == "sync":
            # EngineCore.step
            if not sched.has_requests():
                if next_req == len(reqs):
                    break
                k = reqs[next_req]["arrival_step"]  # idle until the next arrival
                continue
            do_update(do_schedule())
            continue
        # EngineCore.step_with_batch_queue (0.26.0 and 0.33.0): fill the queue first; process the oldest
        # batch only when the queue is full or nothing more can be scheduled.
        if sched.has_requests():
            entry = do_schedule()
            queue.appendleft(entry)
            model_executed = entry[0].total_num_scheduled_tokens > 0
            if len(queue) < h.batch_queue_size and (model_executed or sched.has_requests()):
                continue
        elif not queue:
            if next_req == len(reqs):
                break
            k = reqs[next_req]["arrival_step"]
            continue
        do_update(queue.pop())
    else:
        raise SystemExit(f"{case.name}: no end after {MAX_ENGINE_ITERATIONS} engine iterations")

    for i, vr in enumerate(vreqs):
        if not vr.is_finished():
            raise SystemExit(f"{case.name}: request {i} never finished")
    final = [[vr.num_output_tokens, vr.num_preemptions] for vr in vreqs]
    if case.mode == "sync":
        for rec in steps:
            assert rec["u"] == [rec["k"]], rec
    doc = {
        "format": FORMAT,
        "vllm_version": __import__("vllm").__version__,
        "case": case.name,
        "description": case.description,
        "mode": case.mode,
        "config": case.config,
        "use_v2_model_runner": h.use_v2_model_runner,
    }
    if h.retention_interval is not None:
        # Absent = None (dense, every full sliding-window block cached: 0.26's default).
        doc["prefix_cache_retention_interval"] = h.retention_interval
    doc.update({"requests": reqs, "steps": steps, "final": final})
    return doc


def summary(doc: dict) -> str:
    steps = doc["steps"]
    preemptions = sum(len(s["p"]) for s in steps)
    pc = steps[-1]["pc"] if steps else [0] * 6
    hit_steps = sum(1 for s in steps for x in s["s"] if x[4] != 0 and x[2] > 0)
    return (f"{doc['case']}: {len(doc['requests'])} requests, {len(steps)} steps, "
            f"{preemptions} preemptions, {hit_steps} admissions with prefix hits, pc={pc}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default="tests/data/vllm_goldens",
                    help="output root; the files go to OUT/<release>/ (0.26 or 0.33)")
    ap.add_argument("--only", nargs="*", default=None, help="case names to record")
    ap.add_argument("--list", action="store_true", help="list the cases and exit")
    args = ap.parse_args()
    if args.list:
        for c in CASES:
            skips = "".join(f" [skipped for {r}: {why}]" for r, why in c.skip.items())
            print(f"{c.name}: {c.description}{skips}")
        return 0
    chosen = [c for c in CASES if args.only is None or c.name in args.only]
    if args.only and len(chosen) != len(args.only):
        unknown = set(args.only) - {c.name for c in chosen}
        print(f"unknown case(s): {sorted(unknown)}", file=sys.stderr)
        return 2
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    version, release = installed_release()
    out_dir = Path(args.out) / release
    out_dir.mkdir(parents=True, exist_ok=True)
    print(f"vLLM {version}: writing {out_dir}", flush=True)
    with tempfile.TemporaryDirectory() as model_dir:
        Path(model_dir, "config.json").write_text(json.dumps(HF_CONFIG))
        for case in chosen:
            if release in case.skip:
                print(f"{case.name}: skipped for vLLM {release}: {case.skip[release]}", flush=True)
                continue
            doc = run_case(case, model_dir, release)
            data = json.dumps(doc, separators=(",", ":")).encode()
            path = out_dir / f"{case.name}.json.gz"
            with open(path, "wb") as f:
                with gzip.GzipFile(filename="", mode="wb", fileobj=f, mtime=0, compresslevel=9) as gz:
                    gz.write(data)
            print(f"{summary(doc)} -> {path} ({path.stat().st_size} bytes)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
