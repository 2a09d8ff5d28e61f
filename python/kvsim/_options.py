"""Keyword-argument checks shared by plan, read_trace, replay and sweep.

Each public function takes keyword arguments named as the CLI flags without dashes (vLLM's
engine-argument names). Arguments left at ``None`` keep the CLI's default and are not passed on;
the given ones are type- and range-checked here (the CLI's flag validators), grouped, and handed
to the extension, which resolves them with the CLI's own C++ code.
"""

from __future__ import annotations

import math
import numbers
import os
from typing import Any, Mapping

from . import _kvsim

# Which group each argument belongs to (the extension consumes exactly these keys).
PLAN_KEYS = (
    "model", "config", "num_layers", "num_kv_heads", "head_dim", "num_params", "dtype", "gpu",
    "vram_gib", "gpu_spec", "gpu_memory_utilization", "overhead_gib", "weights_gib", "quantization",
    "kv_cache_dtype", "tensor_parallel_size", "max_model_len", "block_size",
    "num_gpu_blocks_override", "kv_cache_memory_bytes", "disable_hybrid_kv_cache_manager",
)
SCHEDULER_KEYS = (
    "long_prefill_token_threshold", "enable_chunked_prefill", "enable_prefix_caching",
    "scheduling_policy", "watermark", "scheduler_reserve_full_isl", "num_lookahead_tokens",
    "async_scheduling", "step_time",
)
REPLAY_KEYS = (
    "max_num_batched_tokens", "max_num_seqs", "backend", "backend_max_layers", "preemption_mode",
    "swap_space_gib", "swap_bandwidth_gbps", "check_invariants", "timeline", "requests",
)
# The cluster mode of replay (`kvsim replay --replicas N --router R ...`, docs/cluster.md); size
# takes them all but replicas and slo_stop_early.
CLUSTER_KEYS = (
    "replicas", "router", "router_staleness_ms", "router_seed", "affinity_prefix_blocks",
    "affinity_load_factor", "kv_aware_load_weight", "admission_max_waiting_requests",
    "admission_max_waiting_tokens", "slo_ttft_p99", "slo_tpot_p99", "slo_e2e_p99",
    "slo_stop_early",
)
TRACE_KEYS = (
    "format", "max_requests", "start", "duration", "time_scale", "arrival", "rate", "seed",
    "skip_bad_rows", "max_input_bytes", "max_line_bytes", "hash_block_size",
)

_STR = ("model", "dtype", "gpu", "quantization", "kv_cache_dtype", "step_time", "router")
_PATH = ("config", "gpu_spec")
_BOOL = ("enable_chunked_prefill", "enable_prefix_caching", "scheduler_reserve_full_isl",
         "async_scheduling", "check_invariants", "timeline", "requests", "skip_bad_rows",
         "disable_hybrid_kv_cache_manager", "slo_stop_early", "early_stop")
_INT_POSITIVE = ("num_layers", "num_kv_heads", "head_dim", "max_num_batched_tokens",
                 "max_num_seqs", "max_input_bytes", "max_line_bytes", "hash_block_size",
                 "max_model_len", "concurrency", "jobs", "kv_cache_memory_bytes", "replicas",
                 "affinity_prefix_blocks", "max_replicas")
_INT_NON_NEGATIVE = ("long_prefill_token_threshold", "num_lookahead_tokens",
                     "backend_max_layers", "max_requests", "seed", "router_seed",
                     "admission_max_waiting_requests", "admission_max_waiting_tokens")
_INT_ANY = ("tensor_parallel_size", "block_size", "num_gpu_blocks_override")
_FLOAT_POSITIVE = ("time_scale", "rate", "swap_bandwidth_gbps", "num_params", "vram_gib",
                   "slo_ttft_p99", "slo_tpot_p99", "slo_e2e_p99")
_FLOAT_NON_NEGATIVE = ("start", "duration", "swap_space_gib", "router_staleness_ms",
                       "kv_aware_load_weight")
# Range-checked by the CLI's code (affinity_load_factor >= 1: cli/cluster_options.cpp).
_FLOAT_ANY = ("gpu_memory_utilization", "overhead_gib", "weights_gib", "affinity_load_factor")
# Integers the CLI parses as unsigned 64-bit.
_UINT64 = ("seed", "router_seed")
_CHOICES = {
    "scheduling_policy": ("fcfs", "priority"),
    "backend": ("null", "host", "cuda"),
    "preemption_mode": ("recompute", "swap"),
    "format": ("auto", "azure", "vidur", "burstgpt", "mooncake", "bailian", "sharegpt", "kvsim"),
    "arrival": ("trace", "all-at-once", "poisson"),
    "router": tuple(_kvsim.ROUTER_POLICIES),
}


def _fail(fn: str, message: str, error: type = ValueError) -> None:
    raise error(f"{fn}(): {message}")


def check_int_range(fn: str, name: str, value: int, uint64: bool = False) -> int:
    """The CLI's integer rule: a 64-bit signed value (seeds: unsigned), never clamped."""
    lo, hi = (0, 2**64 - 1) if uint64 else (-2**63, 2**63 - 1)
    if not lo <= value <= hi:
        bound = "2**64 - 1" if uint64 else "2**63 - 1"
        _fail(fn, f"{name} is out of range (at most {bound}; got {value})")
    return value


def check_finite(fn: str, name: str, value: float) -> float:
    """The CLI's number rule: finite (no inf, no nan)."""
    if not math.isfinite(value):
        _fail(fn, f"{name} must be finite (got {value})")
    return value


def _check(fn: str, name: str, value: Any) -> Any:
    """Returns the value as the extension wants it, or raises TypeError/ValueError."""
    if name in _BOOL:
        if not isinstance(value, (bool,)) and not (hasattr(value, "dtype") and value.dtype == bool):
            _fail(fn, f"{name} must be True or False (got {value!r})", TypeError)
        return bool(value)
    if name in _CHOICES:
        if value not in _CHOICES[name]:
            _fail(fn, f"{name} must be one of {', '.join(_CHOICES[name])} (got {value!r})")
        return value
    if name in _STR:
        if not isinstance(value, str):
            _fail(fn, f"{name} must be a string (got {value!r})", TypeError)
        return value
    if name in _PATH:
        if not isinstance(value, (str, os.PathLike)):
            _fail(fn, f"{name} must be a path (got {value!r})", TypeError)
        return os.fspath(value)
    if name in _INT_POSITIVE + _INT_NON_NEGATIVE + _INT_ANY:
        if isinstance(value, bool) or not isinstance(value, numbers.Integral):
            _fail(fn, f"{name} must be an integer (got {value!r})", TypeError)
        value = check_int_range(fn, name, int(value), uint64=name in _UINT64)
        if name in _INT_POSITIVE and value <= 0:
            _fail(fn, f"{name} must be > 0 (got {value})")
        if name in _INT_NON_NEGATIVE and value < 0:
            _fail(fn, f"{name} must be >= 0 (got {value})")
        return value
    if name in _FLOAT_POSITIVE + _FLOAT_NON_NEGATIVE + _FLOAT_ANY + ("watermark",):
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            _fail(fn, f"{name} must be a number (got {value!r})", TypeError)
        value = float(value)
        if not math.isfinite(value):
            _fail(fn, f"{name} must be finite (got {value})")
        if name in _FLOAT_POSITIVE and value <= 0:
            _fail(fn, f"{name} must be > 0 (got {value})")
        if name in _FLOAT_NON_NEGATIVE and value < 0:
            _fail(fn, f"{name} must be >= 0 (got {value})")
        if name == "watermark" and not 0 <= value < 1:
            _fail(fn, f"watermark must be in [0, 1) (got {value})")
        return value
    raise AssertionError(f"no check for {name}")  # every public argument has one


def group(fn: str, given: Mapping[str, Any], keys: tuple[str, ...]) -> dict[str, Any]:
    """The checked, non-None arguments among `keys`."""
    return {k: _check(fn, k, given[k]) for k in keys if given.get(k) is not None}


def cluster_mode(given: Mapping[str, Any]) -> bool:
    """The CLI's rule: the cluster engine runs when any cluster or SLO flag is given (so
    replicas=1 gives the cluster JSON; no cluster keyword, the plain replay's)."""
    # slo_stop_early=False is the default; any other value given (even a wrong False) counts, so
    # that it is checked rather than dropped.
    return any(given.get(k) is not None and not (k == "slo_stop_early" and given[k] is False)
               for k in CLUSTER_KEYS)
