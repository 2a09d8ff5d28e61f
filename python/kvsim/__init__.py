"""kvsim: vLLM 0.26's paged KV-cache allocator and v1 scheduler, simulated, from Python.

The same engine as the ``kvsim`` CLI, in process (docs/python.md)::

    import kvsim
    p = kvsim.plan(model="qwen2.5-7b", gpu="rtx4090", kv_cache_dtype="fp8", max_model_len=8192)
    p.max_concurrency, p.vllm_log_lines
    trace = kvsim.read_trace("traces/AzureLLMInferenceTrace_conv.csv")
    r = kvsim.replay(trace, model="qwen2.5-7b", gpu="rtx4090", timeline=True)
    r.peak_running, r.timeline.plot(x="time_s", y="running")
    kvsim.sweep(trace, model="qwen2.5-7b", block_sizes=[8, 16, 32])

Keyword arguments are named as the CLI flags without dashes (vLLM's engine arguments:
kv_cache_dtype, max_model_len, gpu_memory_utilization, max_num_seqs, ...); an argument left at
None keeps the CLI's default. Results carry the CLI's JSON keys as attributes; tables are pandas
DataFrames (dicts of NumPy arrays when pandas is not installed). Errors raise with the CLI's
one-line message: kvsim.TraceError (file:line: field ...), kvsim.DoesNotFitError, ValueError.
Replays run without the GIL, and Ctrl-C interrupts them (KeyboardInterrupt).
"""

from __future__ import annotations

import io
import os
import warnings
from typing import Any, Optional, Sequence

import numpy as np

from . import _frames
from . import _kvsim
from . import _options
from ._kvsim import BlockPool, DoesNotFitError, KVCacheManager, Request, TraceError
from ._results import Plan, ReplayResult, Summary, plan_from_json, requests_frame, timeline_frame
from ._trace import Trace, TraceRequest

__all__ = [
    "BlockPool", "DoesNotFitError", "GPU_PRESETS", "KVCacheManager", "MODEL_PRESETS", "Plan",
    "ReplayResult", "Request", "Summary", "Trace", "TraceError", "TraceRequest", "plan",
    "read_trace", "replay", "sweep",
]
__version__ = "0.1.0"

#: Model presets accepted by ``model=`` (the CLI's --model list).
MODEL_PRESETS: tuple = tuple(s.strip() for s in _kvsim.MODEL_PRESETS.split(","))
#: GPU presets accepted by ``gpu=``.
GPU_PRESETS: tuple = tuple(s.strip() for s in _kvsim.GPU_PRESETS.split(","))


def plan(
    *,
    model: Optional[str] = None,
    config: Optional[str | os.PathLike] = None,
    num_layers: Optional[int] = None,
    num_kv_heads: Optional[int] = None,
    head_dim: Optional[int] = None,
    num_params: Optional[float] = None,
    dtype: Optional[str] = None,
    gpu: Optional[str] = None,
    vram_gib: Optional[float] = None,
    gpu_memory_utilization: Optional[float] = None,
    overhead_gib: Optional[float] = None,
    weights_gib: Optional[float] = None,
    quantization: Optional[str] = None,
    kv_cache_dtype: Optional[str] = None,
    tensor_parallel_size: Optional[int] = None,
    max_model_len: Optional[int] = None,
    block_size: Optional[int] = None,
    num_gpu_blocks_override: Optional[int] = None,
    kv_cache_memory_bytes: Optional[int] = None,
    disable_hybrid_kv_cache_manager: Optional[bool] = None,
    max_num_batched_tokens: Optional[int] = None,
    max_num_seqs: Optional[int] = None,
    async_scheduling: bool = True,
    concurrency: Optional[int] = None,
) -> Plan:
    """The capacity plan of ``kvsim plan --json``: KV bytes per token (kappa_bytes), the KV
    budget, the lesson's max_concurrency, vLLM's num_gpu_blocks, gpu_kv_cache_tokens and
    vllm_max_concurrency, and ``vllm_log_lines``.

    The model is ``model`` (a preset, see MODEL_PRESETS), ``config`` (a Hugging Face
    config.json) or num_layers + num_kv_heads + head_dim; the card is ``gpu`` (GPU_PRESETS;
    default rtx4090) or ``vram_gib``. ``concurrency`` also asks for the longest context that
    many sequences can hold (max_context_tokens). Hybrid models (sliding-window or chunked-local
    layers, docs/hybrid-kv.md): ``max_num_batched_tokens`` (default: vLLM's for the card),
    ``max_num_seqs`` and ``async_scheduling`` (vLLM 0.26's default, two batches in flight) size
    the windowed groups' reservation; ``disable_hybrid_kv_cache_manager`` treats every layer as
    full attention; ``kv_cache_memory_bytes`` gives the KV budget directly. Raises
    DoesNotFitError when vLLM would refuse to start, ValueError for invalid values.
    """
    given = locals()
    kw = _options.group("plan", given, _options.PLAN_KEYS)
    sched = _options.group("plan", given, ("max_num_batched_tokens", "max_num_seqs"))
    conc = None if concurrency is None else _options._check("plan", "concurrency", concurrency)
    async_on = _options._check("plan", "async_scheduling", async_scheduling)
    return plan_from_json(_kvsim.plan(kw, conc, sched.get("max_num_batched_tokens"),
                                      sched.get("max_num_seqs"), async_on))


def read_trace(
    path: str | os.PathLike,
    format: Optional[str] = None,
    *,
    max_requests: Optional[int] = None,
    start: Optional[float] = None,
    duration: Optional[float] = None,
    time_scale: Optional[float] = None,
    arrival: Optional[str] = None,
    rate: Optional[float] = None,
    seed: Optional[int] = None,
    skip_bad_rows: bool = False,
    max_input_bytes: Optional[int] = None,
    max_line_bytes: Optional[int] = None,
    hash_block_size: Optional[int] = None,
) -> Trace:
    """Reads a trace file as ``kvsim replay`` does (Azure, Vidur, BurstGPT, Mooncake, Bailian,
    ShareGPT, kvsim JSONL; gzip too). ``format=None`` detects the layout.

    The keywords are the CLI's trace flags: a window (start, duration in seconds after the
    first arrival; max_requests), time_scale, arrival ('trace', 'all-at-once', or 'poisson'
    with rate and seed), skip_bad_rows (count malformed rows by reason instead of raising),
    input limits and hash_block_size. A malformed row raises kvsim.TraceError whose message is
    the CLI's one line "FILE:LINE: field 'NAME': problem (got 'VALUE')".
    """
    given = dict(locals())
    given.pop("path")
    _options.check_trace_combinations("read_trace", given)
    kw = _options.group("read_trace", given, _options.TRACE_KEYS)
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"read_trace(): path must be a path (got {path!r})")
    trace = Trace(_kvsim.read_trace(os.fspath(path), kw))
    if trace._handle.bad_row_examples:
        warnings.warn(f"{trace.path}: rows dropped: {trace.dropped}; first bad rows: "
                      + " | ".join(trace._handle.bad_row_examples), stacklevel=2)
    return trace


def _as_trace(fn: str, trace: Any) -> Trace:
    if isinstance(trace, Trace):
        return trace
    if isinstance(trace, (str, os.PathLike)):
        return read_trace(trace)
    raise TypeError(f"{fn}(): trace must be a kvsim.Trace or a path (got {type(trace).__name__})")


def replay(
    trace: Trace | str | os.PathLike,
    *,
    model: Optional[str] = None,
    config: Optional[str | os.PathLike] = None,
    num_layers: Optional[int] = None,
    num_kv_heads: Optional[int] = None,
    head_dim: Optional[int] = None,
    num_params: Optional[float] = None,
    dtype: Optional[str] = None,
    gpu: Optional[str] = None,
    vram_gib: Optional[float] = None,
    gpu_memory_utilization: Optional[float] = None,
    overhead_gib: Optional[float] = None,
    weights_gib: Optional[float] = None,
    quantization: Optional[str] = None,
    kv_cache_dtype: Optional[str] = None,
    tensor_parallel_size: Optional[int] = None,
    max_model_len: Optional[int] = None,
    block_size: Optional[int] = None,
    num_gpu_blocks_override: Optional[int] = None,
    kv_cache_memory_bytes: Optional[int] = None,
    disable_hybrid_kv_cache_manager: Optional[bool] = None,
    max_num_batched_tokens: Optional[int] = None,
    max_num_seqs: Optional[int] = None,
    long_prefill_token_threshold: Optional[int] = None,
    enable_chunked_prefill: Optional[bool] = None,
    enable_prefix_caching: Optional[bool] = None,
    scheduling_policy: Optional[str] = None,
    watermark: Optional[float] = None,
    scheduler_reserve_full_isl: Optional[bool] = None,
    num_lookahead_tokens: Optional[int] = None,
    async_scheduling: Optional[bool] = None,
    step_time: Optional[str] = None,
    preemption_mode: Optional[str] = None,
    swap_space_gib: Optional[float] = None,
    swap_bandwidth_gbps: Optional[float] = None,
    backend: Optional[str] = None,
    backend_max_layers: Optional[int] = None,
    check_invariants: bool = False,
    timeline: bool = False,
    requests: bool = False,
) -> ReplayResult:
    """Replays a trace through the vLLM 0.26 scheduler and allocator clone: the numbers of
    ``kvsim replay --json`` (observed vs formula concurrency, padding, preemptions, prefix
    hits, latency) as a ReplayResult.

    ``trace`` is a Trace or a path (read with read_trace's defaults). Model and card as in
    plan() (default model: qwen2.5-7b, with max_model_len from the trace); the scheduler
    keywords are vLLM's engine arguments (max_num_seqs, max_num_batched_tokens,
    enable_chunked_prefill, enable_prefix_caching, scheduling_policy, async_scheduling, ...);
    step_time is the CLI's --step-time spec ('roofline', 'fixed:MS'). ``timeline=True`` /
    ``requests=True`` keep the per-step / per-request tables (result.timeline,
    result.requests). Runs without the GIL; Ctrl-C raises KeyboardInterrupt within a few
    milliseconds of replay.
    """
    given = dict(locals())
    t = _as_trace("replay", given.pop("trace"))
    _options.check_replay_combinations("replay", given)
    plan_kw = _options.group("replay", given, _options.PLAN_KEYS)
    sched_kw = _options.group("replay", given, _options.SCHEDULER_KEYS)
    replay_kw = _options.group("replay", given, _options.REPLAY_KEYS)
    text, report, raw_timeline, raw_requests = _kvsim.replay(t._handle, plan_kw, sched_kw,
                                                             replay_kw)
    import json

    result = ReplayResult(
        json.loads(text), report,
        None if raw_timeline is None else timeline_frame(raw_timeline),
        None if raw_requests is None else requests_frame(raw_requests))
    if result["requests"] > 0 and result["rejected"] == result["requests"]:
        warnings.warn(f"all {result['requests']} requests were rejected "
                      f"({result['rejected_by_reason']}); this configuration cannot serve the "
                      "trace", RuntimeWarning, stacklevel=2)
    return result


def sweep(
    trace: Trace | str | os.PathLike,
    *,
    block_sizes: Sequence[int] = (),
    gpu_memory_utilizations: Sequence[float] = (),
    num_gpu_blocks: Sequence[int] = (),
    kv_cache_dtypes: Sequence[str] = (),
    max_num_seqs: Sequence[int] = (),
    max_num_batched_tokens: Sequence[int] = (),
    jobs: int = 1,
    model: Optional[str] = None,
    config: Optional[str | os.PathLike] = None,
    num_layers: Optional[int] = None,
    num_kv_heads: Optional[int] = None,
    head_dim: Optional[int] = None,
    num_params: Optional[float] = None,
    dtype: Optional[str] = None,
    gpu: Optional[str] = None,
    vram_gib: Optional[float] = None,
    gpu_memory_utilization: Optional[float] = None,
    overhead_gib: Optional[float] = None,
    weights_gib: Optional[float] = None,
    quantization: Optional[str] = None,
    kv_cache_dtype: Optional[str] = None,
    tensor_parallel_size: Optional[int] = None,
    max_model_len: Optional[int] = None,
    block_size: Optional[int] = None,
    num_gpu_blocks_override: Optional[int] = None,
    kv_cache_memory_bytes: Optional[int] = None,
    disable_hybrid_kv_cache_manager: Optional[bool] = None,
    long_prefill_token_threshold: Optional[int] = None,
    enable_chunked_prefill: Optional[bool] = None,
    enable_prefix_caching: Optional[bool] = None,
    scheduling_policy: Optional[str] = None,
    watermark: Optional[float] = None,
    scheduler_reserve_full_isl: Optional[bool] = None,
    num_lookahead_tokens: Optional[int] = None,
    async_scheduling: Optional[bool] = None,
    step_time: Optional[str] = None,
) -> Any:
    """Replays one trace over the grid of the given axes (``kvsim sweep``): one row per
    configuration, the columns of ``kvsim sweep --csv`` (config, effective settings, replay
    results, analytic padding expectation), as a DataFrame (dict of NumPy arrays without
    pandas).

    Axes: block_sizes, gpu_memory_utilizations or num_gpu_blocks (pool size, one of the two),
    kv_cache_dtypes, max_num_seqs, max_num_batched_tokens; an empty axis keeps the base
    setting given by the other keywords (as in replay; a model is required). ``jobs`` replays
    configurations in parallel threads. Ctrl-C stops before the next configuration.
    """
    given = dict(locals())
    t = _as_trace("sweep", given.pop("trace"))
    plan_kw = _options.group("sweep", given, _options.PLAN_KEYS)
    sched_kw = _options.group("sweep", given, _options.SCHEDULER_KEYS)
    jobs = _options._check("sweep", "jobs", jobs)

    def axis(name: str, kind: type) -> list:
        values = given[name]
        if isinstance(values, (str, bytes)) or not hasattr(values, "__iter__"):
            raise TypeError(f"sweep(): {name} must be a list (got {values!r})")
        out = []
        for v in values:
            if kind is int and (isinstance(v, bool) or not isinstance(v, (int, np.integer))):
                raise TypeError(f"sweep(): {name} must hold integers (got {v!r})")
            if kind is float and (isinstance(v, bool) or not isinstance(v, (int, float, np.number))):
                raise TypeError(f"sweep(): {name} must hold numbers (got {v!r})")
            if kind is str and not isinstance(v, str):
                raise TypeError(f"sweep(): {name} must hold strings (got {v!r})")
            out.append(kind(v))
        return out

    text = _kvsim.sweep(t._handle, plan_kw, sched_kw, axis("block_sizes", int),
                        axis("gpu_memory_utilizations", float), axis("num_gpu_blocks", int),
                        axis("kv_cache_dtypes", str), axis("max_num_seqs", int),
                        axis("max_num_batched_tokens", int), jobs)
    return _frames.frame(_csv_columns(text, drop=("sweep_id",)))


def _csv_columns(text: str, drop: Sequence[str] = ()) -> dict:
    """A CSV written by the C++ code as typed NumPy columns (int64 where every value is an
    integer, float64 where every value is a number or empty, else str)."""
    import csv

    rows = list(csv.reader(io.StringIO(text)))
    header, body = rows[0], rows[1:]
    cols = {}
    for j, name in enumerate(header):
        if name in drop:
            continue
        values = [r[j] for r in body]
        cols[name] = _typed(values)
    return cols


def _typed(values: list) -> np.ndarray:
    try:
        return np.array([int(v) for v in values], dtype=np.int64)
    except ValueError:
        pass
    try:
        return np.array([float(v) if v != "" else np.nan for v in values], dtype=np.float64)
    except ValueError:
        return np.array(values, dtype=object)
