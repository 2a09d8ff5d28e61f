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
from typing import Any, Mapping, Optional, Sequence

import numpy as np

from . import _executors
from . import _frames
from . import _kvsim
from . import _options
from ._kvsim import BlockPool, DoesNotFitError, KVCacheManager, Request, TraceError
from ._calibrate import calibrate
from ._results import (ClusterReplayResult, Plan, ReplayResult, SizeReport, Summary,
                       plan_from_json, plot_sweep, requests_frame, timeline_frame)
from ._trace import Trace, TraceRequest

__all__ = [
    "BlockPool", "ClusterReplayResult", "DoesNotFitError", "GPU_PRESETS", "KVCacheManager",
    "MODEL_PRESETS", "Plan", "ROUTER_POLICIES", "ReplayResult", "Request", "SizeReport",
    "Summary", "Trace", "TraceError", "TraceRequest", "calibrate", "plan", "read_trace",
    "plot_sweep", "replay", "size", "sweep",
]
__version__ = "0.1.0"

#: Model presets accepted by ``model=`` (the CLI's --model list).
MODEL_PRESETS: tuple = tuple(s.strip() for s in _kvsim.MODEL_PRESETS.split(","))
#: GPU presets accepted by ``gpu=``.
GPU_PRESETS: tuple = tuple(s.strip() for s in _kvsim.GPU_PRESETS.split(","))
#: Routing policies accepted by ``router=`` (the CLI's --router names, docs/cluster.md).
ROUTER_POLICIES: tuple = tuple(_kvsim.ROUTER_POLICIES)


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
    gpu_spec: Optional[str | os.PathLike] = None,
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
    vllm_version: Optional[str] = None,
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
    default rtx4090), ``vram_gib``, or ``gpu_spec`` (a JSON file describing any other card, as
    ``kvsim --gpu-spec``: docs/planner.md). ``concurrency`` also asks for the longest context that
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
    kw = _options.group("read_trace", given, _options.TRACE_KEYS)
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"read_trace(): path must be a path (got {path!r})")
    trace = Trace(_kvsim.read_trace(os.fspath(path), kw))
    trace._read_kw = kw
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


def _output_path(fn: str, name: str, value: Any) -> Optional[str]:
    """A file keyword (metrics=, vllm_log=): None or a path."""
    if value is None:
        return None
    if not isinstance(value, (str, os.PathLike)) or not os.fspath(value):
        raise TypeError(f"{fn}(): {name} must be a path (got {value!r})")
    return os.fspath(value)


def _write_atomically(path: str, text: str) -> None:
    """Writes `text` to a temporary file beside `path`, then renames it over `path` (the CLI's
    rule: the destination is replaced whole or left as it was)."""
    import tempfile

    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(path)}.kvsim-", dir=directory)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


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
    gpu_spec: Optional[str | os.PathLike] = None,
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
    vllm_version: Optional[str] = None,
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
    max_num_active_seqs: Optional[int] = None,
    long_prefill_token_threshold_adaptive: Optional[bool] = None,
    prefix_cache_retention_interval: Optional[int] = None,
    preemption_mode: Optional[str] = None,
    swap_space_gib: Optional[float] = None,
    swap_bandwidth_gbps: Optional[float] = None,
    backend: Optional[str] = None,
    backend_max_layers: Optional[int] = None,
    replicas: Optional[int] = None,
    router: Optional[str] = None,
    router_staleness_ms: Optional[float] = None,
    router_seed: Optional[int] = None,
    affinity_prefix_blocks: Optional[int] = None,
    affinity_load_factor: Optional[float] = None,
    kv_aware_load_weight: Optional[float] = None,
    admission_max_waiting_requests: Optional[int] = None,
    admission_max_waiting_tokens: Optional[int] = None,
    slo_ttft_p99: Optional[float] = None,
    slo_tpot_p99: Optional[float] = None,
    slo_e2e_p99: Optional[float] = None,
    slo_stop_early: bool = False,
    check_invariants: bool = False,
    steady_decode: bool = True,
    timeline: bool = False,
    requests: bool = False,
    metrics: Optional[str | os.PathLike] = None,
    metrics_interval: Optional[float] = None,
    metrics_start: Optional[float] = None,
    vllm_log: Optional[str | os.PathLike] = None,
    vllm_log_interval: Optional[float] = None,
) -> ReplayResult:
    """Replays a trace through the vLLM 0.26 scheduler and allocator clone: the numbers of
    ``kvsim replay --json`` (observed vs formula concurrency, padding, preemptions, prefix
    hits, latency) as a ReplayResult.

    ``trace`` is a Trace or a path (read with read_trace's defaults). Model and card as in
    plan() (default model: qwen2.5-7b, with max_model_len from the trace); the scheduler
    keywords are vLLM's engine arguments (max_num_seqs, max_num_batched_tokens,
    enable_chunked_prefill, enable_prefix_caching, scheduling_policy, async_scheduling, ...);
    step_time is the CLI's --step-time spec ('roofline', 'fixed:MS', 'physics:FILE'). ``timeline=True`` /
    ``requests=True`` keep the per-step / per-request tables (result.timeline,
    result.requests); ``steady_decode=False`` runs every step through the general scheduler
    path (``--no-steady-decode``: speed only, the results are identical). ``metrics=PATH``
    writes the run as vLLM's Prometheus metrics (``--metrics``: OpenMetrics text, a sample every
    ``metrics_interval`` simulated seconds, default 15, stamped from ``metrics_start``, Unix
    seconds, default the trace's clock (an Azure trace's first TIMESTAMP replayed), else
    2025-01-01T00:00:00Z; docs/metrics.md) and ``vllm_log=PATH`` vLLM's
    periodic engine log (``--vllm-log``, a line every ``vllm_log_interval`` s, default 10); each
    file is replaced atomically once the replay is done. Runs without the GIL;
    Ctrl-C raises KeyboardInterrupt within a few milliseconds of replay.

    Cluster mode (``kvsim replay --replicas N --router R``, docs/cluster.md): any of the cluster
    keywords runs the trace on ``replicas`` engine replicas (default 1) behind a ``router``
    (ROUTER_POLICIES; default round-robin) that sees replica load as scraped every
    ``router_staleness_ms`` (0 = live), with ``router_seed``, the prefix-affinity / kv-aware
    knobs (affinity_prefix_blocks, affinity_load_factor, kv_aware_load_weight), admission
    control (admission_max_waiting_requests / _tokens per replica, 0 = off) and latency
    objectives (slo_ttft_p99, slo_tpot_p99, slo_e2e_p99 in seconds; slo_stop_early stops once
    the p99 verdict is "fail"). The result is then a ClusterReplayResult: the cluster-wide
    numbers under the same keys, the cluster keys, ``per_replica`` summaries and a ``replica``
    column in the tables (as the CLI's cluster CSVs: when replicas > 1).
    """
    given = dict(locals())
    t = _as_trace("replay", given.pop("trace"))
    outputs = {k: _output_path("replay", k, given.pop(k)) for k in ("metrics", "vllm_log")}
    plan_kw = _options.group("replay", given, _options.PLAN_KEYS)
    sched_kw = _options.group("replay", given, _options.SCHEDULER_KEYS)
    replay_kw = _options.group("replay", given, _options.REPLAY_KEYS)
    clustered = _options.cluster_mode(given)
    cluster_kw = _options.group("replay", given, _options.CLUSTER_KEYS) if clustered else None
    text, report, raw_timeline, raw_requests, all_rejected, metrics_text, log_text = _kvsim.replay(
        t._handle, plan_kw, sched_kw, replay_kw, cluster_kw, outputs["metrics"] is not None,
        outputs["vllm_log"] is not None)
    for key, content in (("metrics", metrics_text), ("vllm_log", log_text)):
        if outputs[key] is not None:
            _write_atomically(outputs[key], content)
    import json

    result_type = ClusterReplayResult if clustered else ReplayResult
    result = result_type(
        json.loads(text), report,
        None if raw_timeline is None else timeline_frame(raw_timeline),
        None if raw_requests is None else requests_frame(raw_requests))
    if all_rejected is not None:
        warnings.warn(f"{all_rejected}; this configuration cannot serve the trace",
                      RuntimeWarning, stacklevel=2)
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
    executor: Optional[str] = None,
    model: Optional[str] = None,
    config: Optional[str | os.PathLike] = None,
    num_layers: Optional[int] = None,
    num_kv_heads: Optional[int] = None,
    head_dim: Optional[int] = None,
    num_params: Optional[float] = None,
    dtype: Optional[str] = None,
    gpu: Optional[str] = None,
    vram_gib: Optional[float] = None,
    gpu_spec: Optional[str | os.PathLike] = None,
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
    vllm_version: Optional[str] = None,
    long_prefill_token_threshold: Optional[int] = None,
    enable_chunked_prefill: Optional[bool] = None,
    enable_prefix_caching: Optional[bool] = None,
    scheduling_policy: Optional[str] = None,
    watermark: Optional[float] = None,
    scheduler_reserve_full_isl: Optional[bool] = None,
    num_lookahead_tokens: Optional[int] = None,
    async_scheduling: Optional[bool] = None,
    step_time: Optional[str] = None,
    max_num_active_seqs: Optional[int] = None,
    long_prefill_token_threshold_adaptive: Optional[bool] = None,
    prefix_cache_retention_interval: Optional[int] = None,
) -> Any:
    """Replays one trace over the grid of the given axes (``kvsim sweep``): one row per
    configuration, the columns of ``kvsim sweep --csv`` (config, effective settings, replay
    results, analytic padding expectation), as a DataFrame (dict of NumPy arrays without
    pandas).

    Axes: block_sizes, gpu_memory_utilizations or num_gpu_blocks (pool size, one of the two),
    kv_cache_dtypes, max_num_seqs, max_num_batched_tokens; an empty axis keeps the base
    setting given by the other keywords (as in replay; a model is required). ``jobs`` replays
    configurations in parallel threads. Ctrl-C stops before the next configuration.
    ``executor="ray"`` runs shards of the grid as Ray tasks (``jobs`` threads each) and merges
    them as ``kvsim sweep --merge`` does: the same frame (pip install kvsim[ray]; docs/sweep.md).
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
            if kind is int:
                _options.check_int_range("sweep", name, int(v))
            if kind is float:
                _options.check_finite("sweep", name, float(v))
            out.append(kind(v))
        return out

    text = _executors.sweep(executor, t, plan_kw, sched_kw, axis("block_sizes", int),
                            axis("gpu_memory_utilizations", float), axis("num_gpu_blocks", int),
                            axis("kv_cache_dtypes", str), axis("max_num_seqs", int),
                            axis("max_num_batched_tokens", int), jobs)
    return _frames.frame(_csv_columns(text, drop=("sweep_id",)))


# `kvsim size`'s model/card flags (the card, TP, KV dtype, block size and pool sizes are
# searched or would be wrong for most candidates, so size does not take them).
_SIZE_PLAN_KEYS = (
    "model", "config", "num_layers", "num_kv_heads", "head_dim", "num_params", "dtype",
    "gpu_memory_utilization", "overhead_gib", "quantization", "max_model_len",
    "disable_hybrid_kv_cache_manager", "vllm_version",
)
_SIZE_CLUSTER_KEYS = tuple(k for k in _options.CLUSTER_KEYS
                           if k not in ("replicas", "slo_stop_early"))
def _flag_text(value: Any) -> str:
    """A keyword's value as a command-line value (1.0 -> '1', 0.25 -> '0.25')."""
    if isinstance(value, float):
        return str(int(value)) if value.is_integer() and abs(value) < 2**53 else repr(value)
    return str(value)


def size(
    trace: Trace | str | os.PathLike,
    *,
    gpus: str | Sequence[str],
    tp: int | Sequence[int],
    slo_ttft_p99: float,
    slo_tpot_p99: float,
    slo_e2e_p99: Optional[float] = None,
    kv_cache_dtype: str | Sequence[str] = (),
    block_sizes: int | Sequence[int] = (),
    max_num_seqs: int | Sequence[int] = (),
    max_replicas: int = 64,
    gpu_price: Optional[Mapping[str, float]] = None,
    early_stop: bool = True,
    jobs: int = 1,
    executor: Optional[str] = None,
    model: Optional[str] = None,
    config: Optional[str | os.PathLike] = None,
    num_layers: Optional[int] = None,
    num_kv_heads: Optional[int] = None,
    head_dim: Optional[int] = None,
    num_params: Optional[float] = None,
    dtype: Optional[str] = None,
    gpu_memory_utilization: Optional[float] = None,
    overhead_gib: Optional[float] = None,
    quantization: Optional[str] = None,
    max_model_len: Optional[int] = None,
    disable_hybrid_kv_cache_manager: Optional[bool] = None,
    vllm_version: Optional[str] = None,
    max_num_batched_tokens: Optional[int] = None,
    long_prefill_token_threshold: Optional[int] = None,
    enable_chunked_prefill: Optional[bool] = None,
    enable_prefix_caching: Optional[bool] = None,
    scheduling_policy: Optional[str] = None,
    watermark: Optional[float] = None,
    scheduler_reserve_full_isl: Optional[bool] = None,
    num_lookahead_tokens: Optional[int] = None,
    async_scheduling: Optional[bool] = None,
    step_time: Optional[str] = None,
    max_num_active_seqs: Optional[int] = None,
    long_prefill_token_threshold_adaptive: Optional[bool] = None,
    prefix_cache_retention_interval: Optional[int] = None,
    router: Optional[str] = None,
    router_staleness_ms: Optional[float] = None,
    router_seed: Optional[int] = None,
    affinity_prefix_blocks: Optional[int] = None,
    affinity_load_factor: Optional[float] = None,
    kv_aware_load_weight: Optional[float] = None,
    admission_max_waiting_requests: Optional[int] = None,
    admission_max_waiting_tokens: Optional[int] = None,
) -> SizeReport:
    """The cheapest deployment that serves a trace within a latency SLO (``kvsim size``,
    docs/size.md): for every candidate ``gpus`` x ``tp`` x ``kv_cache_dtype`` x
    ``block_sizes`` x ``max_num_seqs`` (each a value or a list, strings also comma-separated
    as on the command line; the last three default to auto, 16 and vLLM's default for the
    card), the fewest replicas (up to ``max_replicas``)
    whose cluster replay meets ``slo_ttft_p99`` and ``slo_tpot_p99`` (and ``slo_e2e_p99``;
    seconds, p99 over all requests), ranked by cost = replicas x TP x ``gpu_price`` per
    GPU-hour (``{"h100-80g": 2.5, ...}`` overrides the built-in table).

    A model is required (``model``, ``config`` or the three shape keywords); the other
    keywords are shared by every candidate and mean what they mean for replay(): model and
    memory, scheduler, router and admission control. ``early_stop=False`` replays failing
    probes to the end (``kvsim size --no-early-stop``). ``jobs`` searches that many (card, TP)
    groups in parallel threads; results do not depend on it. ``executor="ray"`` searches the
    groups as Ray tasks (``jobs`` threads each) and merges them as ``kvsim size --merge`` does:
    the same report (pip install kvsim[ray]; docs/size.md).

    Returns a SizeReport: ``candidates`` (a DataFrame in rank order, the columns of ``kvsim size
    --csv``, each with its ``replay_command``), ``recommended`` (the cheapest feasible
    candidate, or None), ``trials`` and the CLI's JSON keys. ``replay_command`` names the
    trace file and the keywords given (as ``kvsim replay`` flags); None for a trace built from
    columns. When no candidate meets the SLO (the CLI's exit status 3) the report comes with a
    RuntimeWarning. Runs without the GIL; Ctrl-C raises KeyboardInterrupt before the next
    replay.
    """
    given = dict(locals())
    t = _as_trace("size", given.pop("trace"))
    plan_kw = _options.group("size", given, _SIZE_PLAN_KEYS)
    sched_kw = _options.group("size", given, _options.SCHEDULER_KEYS)
    cluster_kw = _options.group("size", given, _SIZE_CLUSTER_KEYS)
    batched = _options.group("size", given, ("max_num_batched_tokens",))
    max_replicas = _options._check("size", "max_replicas", max_replicas)
    early = _options._check("size", "early_stop", early_stop)
    jobs = _options._check("size", "jobs", jobs)

    def axis(name: str, kind: type) -> list:
        values = given[name]
        if isinstance(values, str):
            values = values.split(",")  # "l40s,h100-80g" as on the command line
        elif isinstance(values, (int, np.integer)) and not isinstance(values, bool):
            values = [values]
        if not hasattr(values, "__iter__"):
            raise TypeError(f"size(): {name} must be a value or a list (got {values!r})")
        out = []
        for v in values:
            if kind is int and (isinstance(v, bool) or not isinstance(v, (int, np.integer))):
                raise TypeError(f"size(): {name} must hold integers (got {v!r})")
            if kind is str and not isinstance(v, str):
                raise TypeError(f"size(): {name} must hold strings (got {v!r})")
            if kind is int:
                _options.check_int_range("size", name, int(v))
            out.append(kind(v))
        return out

    gpu_list, tp_list = axis("gpus", str), axis("tp", int)
    prices = []
    for name, usd in (gpu_price or {}).items():
        if not isinstance(name, str):
            raise TypeError(f"size(): gpu_price keys must be GPU preset names (got {name!r})")
        if isinstance(usd, bool) or not isinstance(usd, (int, float, np.number)):
            raise TypeError(f"size(): gpu_price[{name!r}] must be a number (got {usd!r})")
        if not (np.isfinite(usd) and usd > 0):
            raise ValueError(f"size(): gpu_price[{name!r}] must be a finite number > 0 "
                             f"(got {usd!r})")
        prices.append(f"{name}={_flag_text(float(usd))}")

    from_file = t._read_kw is not None
    # The settings given, which each candidate's replay_command repeats (the run room writes it).
    settings = [*(t._read_kw or {}), *plan_kw, *sched_kw, *batched, *cluster_kw]
    text, table = _executors.size(executor, t, plan_kw, sched_kw,
                                  batched.get("max_num_batched_tokens"), cluster_kw, gpu_list,
                                  tp_list, axis("kv_cache_dtype", str), axis("block_sizes", int),
                                  axis("max_num_seqs", int), max_replicas, prices, early, jobs,
                                  settings)
    import json

    data = json.loads(text)
    data.pop("size_id", None)
    if not from_file:
        for c in data["candidates"]:
            if c["replay_command"]:
                c["replay_command"] = None
    if data["feasible"] == 0:
        # The CLI's exit status 3: the search ran, the report is complete, nothing passed.
        warnings.warn(f"no candidate meets the SLO ({data['num_candidates']} candidates, up to "
                      f"{data['max_replicas']} replicas each)", RuntimeWarning, stacklevel=2)
    return SizeReport(data, table)


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
