"""kvsim.calibrate: the `kvsim calibrate` command from Python (docs/calibrate.md)."""

from __future__ import annotations

import json
import numbers
import os
import tempfile
from typing import Any, Optional, Sequence

from . import _kvsim, _options


def calibrate(
    measured: str | os.PathLike | Sequence[str | os.PathLike],
    *,
    output: Optional[str | os.PathLike] = None,
    fit: Optional[str | Sequence[str]] = None,
    start: Optional[str | os.PathLike] = None,
    max_evaluations: Optional[int] = None,
    cross_validation: bool = True,
    measured_vllm_version: Optional[str] = None,
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
    max_num_active_seqs: Optional[int] = None,
    long_prefill_token_threshold_adaptive: Optional[bool] = None,
    prefix_cache_retention_interval: Optional[int] = None,
) -> dict[str, Any]:
    """Fits the physics step-time model to measured vLLM latencies (``kvsim calibrate``).

    ``measured`` is one file or a list: ``vllm bench serve --save-detailed`` JSON, a
    per-request CSV/JSONL (``arrival_s``, ``prompt_tokens``, ``output_tokens``, ``ttft_s`` +
    ``e2e_s`` or ``first_token_s`` + ``last_token_s``), or a kvsim run file. Model, card and
    scheduler keywords describe the measured server, as for replay(). ``fit`` names the
    coefficients (a list or "beta1a,beta2b,..."; default as the CLI's), ``start`` the starting
    calibration (default the shipped H100 one). Returns ``{"calibration": dict, "fit_errors":
    DataFrame, "cv_errors": DataFrame}``; with ``output`` the calibration is also written there
    whole (a temporary file renamed into place), for ``step_time="physics:" + output``. Runs
    without the GIL; Ctrl-C raises KeyboardInterrupt.
    """
    given = dict(locals())
    fn = "calibrate"
    paths = [measured] if isinstance(measured, (str, os.PathLike)) else list(measured)
    if not paths:
        _options._fail(fn, "measured must name at least one file")
    for p in paths:
        if not isinstance(p, (str, os.PathLike)):
            _options._fail(fn, f"measured must be paths (got {p!r})", TypeError)
    paths = [os.fspath(p) for p in paths]
    plan_kw = _options.group(fn, given, _options.PLAN_KEYS)
    sched_kw = _options.group(fn, given, _options.SCHEDULER_KEYS)
    cal_kw: dict[str, Any] = {}
    for name in ("max_num_batched_tokens", "max_num_seqs"):
        if given[name] is not None:
            cal_kw[name] = _options._check(fn, name, given[name])
    if fit is not None:
        names = [fit] if isinstance(fit, str) else list(fit)
        if not names or not all(isinstance(n, str) and n for n in names):
            _options._fail(fn, f"fit must be coefficient names (got {fit!r})", TypeError)
        cal_kw["fit"] = ",".join(names)
    if start is not None:
        if not isinstance(start, (str, os.PathLike)):
            _options._fail(fn, f"start must be a path (got {start!r})", TypeError)
        cal_kw["start"] = os.fspath(start)
    if max_evaluations is not None:
        if isinstance(max_evaluations, bool) or not isinstance(max_evaluations, numbers.Integral):
            _options._fail(fn, f"max_evaluations must be an integer (got {max_evaluations!r})",
                           TypeError)
        value = _options.check_int_range(fn, "max_evaluations", int(max_evaluations))
        if not 0 < value < 2**31:
            _options._fail(fn, f"max_evaluations must be in [1, 2^31) (got {value})")
        cal_kw["max_evaluations"] = value
    if not isinstance(cross_validation, bool):
        _options._fail(fn, f"cross_validation must be True or False (got {cross_validation!r})",
                       TypeError)
    cal_kw["cross_validation"] = cross_validation
    if measured_vllm_version is not None:
        if not isinstance(measured_vllm_version, str):
            _options._fail(fn, "measured_vllm_version must be a string", TypeError)
        cal_kw["measured_vllm_version"] = measured_vllm_version
    if output is not None and not isinstance(output, (str, os.PathLike)):
        _options._fail(fn, f"output must be a path (got {output!r})", TypeError)
    out_path = None if output is None else os.fspath(output)
    if out_path is not None:
        for p in paths + [plan_kw.get("config"), plan_kw.get("gpu_spec"), cal_kw.get("start")]:
            if p is not None and os.path.exists(out_path) and os.path.samefile(p, out_path):
                _options._fail(fn, f"output {out_path} is the same file as an input {p}; "
                                   "refusing to overwrite an input")
    text, fit_text, cv_text = _kvsim.calibrate(paths, plan_kw, sched_kw, cal_kw)
    import pandas as pd

    result = {"calibration": json.loads(text),
              "fit_errors": pd.DataFrame(json.loads(fit_text)),
              "cv_errors": pd.DataFrame(json.loads(cv_text))}
    if out_path is not None:
        folder = os.path.dirname(os.path.abspath(out_path))
        fd, tmp = tempfile.mkstemp(prefix="." + os.path.basename(out_path) + ".kvsim-",
                                   dir=folder)
        try:
            with os.fdopen(fd, "w") as f:
                f.write(text + "\n")
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, out_path)
        except BaseException:
            if os.path.exists(tmp):
                os.unlink(tmp)
            raise
    return result
