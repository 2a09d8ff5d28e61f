"""Result objects: the CLI's JSON objects with their keys as attributes."""

from __future__ import annotations

import json
import os
from typing import Any, Iterator, Mapping, Optional

import numpy as np

from . import _frames
from . import _kvsim


class Summary(Mapping[str, Any]):
    """A JSON object of the CLI (``--json``) with its keys as attributes.

    ``result.kappa_bytes`` and ``result["kappa_bytes"]`` are the same value; nested objects are
    Summary objects too; ``to_dict()`` gives the plain JSON dict. Keys and values are exactly the
    CLI's, because the C++ code that writes ``--json`` builds them.
    """

    __slots__ = ("_data",)

    def __init__(self, data: Mapping[str, Any]) -> None:
        """Wraps a parsed JSON object."""
        object.__setattr__(self, "_data", dict(data))

    def __getattr__(self, name: str) -> Any:
        try:
            value = self._data[name]
        except KeyError:
            raise AttributeError(f"{type(self).__name__} has no key {name!r}") from None
        return Summary(value) if isinstance(value, dict) else value

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"{type(self).__name__} is read-only")

    def __getitem__(self, key: str) -> Any:
        value = self._data[key]
        return Summary(value) if isinstance(value, dict) else value

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def __dir__(self) -> list:
        return sorted(set(super().__dir__()) | set(self._data))

    def __repr__(self) -> str:
        shown = ", ".join(f"{k}={v!r}" for k, v in list(self._data.items())[:6])
        more = ", ..." if len(self._data) > 6 else ""
        return f"{type(self).__name__}({shown}{more})"

    def to_dict(self) -> dict:
        """The JSON object as a plain dict (a deep copy)."""
        return json.loads(json.dumps(self._data))


class Plan(Summary):
    """``kvsim plan --json`` as an object: kappa_bytes, kv_budget_bytes, max_concurrency,
    num_gpu_blocks, gpu_kv_cache_tokens, vllm_max_concurrency, ... and ``vllm_log_lines``
    (vLLM's two start-up lines, byte for byte)."""

    __slots__ = ()


class ReplayResult(Summary):
    """``kvsim replay --json`` as an object (requests, finished, peak_running, mean_running,
    preemptions, padding_fraction_mean, latency, ...), plus:

    * ``timeline``: one row per logged step (pandas DataFrame; dict of NumPy arrays without
      pandas), the columns of ``--timeline``; None unless ``replay(..., timeline=True)``;
    * ``requests``: one row per request, the columns of ``--requests``; None unless
      ``replay(..., requests=True)``;
    * ``report``: the human report ``kvsim replay`` prints (also ``str(result)``);
    * ``plot()``: the figure of ``kvsim replay --plot`` (needs ``timeline=True``).
    """

    __slots__ = ("_extra",)

    def __init__(self, data: Mapping[str, Any], report: str, timeline: Any, requests: Any) -> None:
        """Built by kvsim.replay()."""
        super().__init__(data)
        object.__setattr__(self, "_extra", {"report": report, "timeline": timeline,
                                            "requests": requests})

    @property
    def timeline(self) -> Any:
        """Per-step table (see the class doc), or None."""
        return self._extra["timeline"]

    @property
    def requests(self) -> Any:
        """Per-request table (see the class doc), or None."""
        return self._extra["requests"]

    @property
    def report(self) -> str:
        """The human-readable report of ``kvsim replay``."""
        return self._extra["report"]

    def __str__(self) -> str:
        return self.report

    def plot(self, path: Optional[str | os.PathLike] = None, *, title: str = "",
             dpi: int = 110, format: Optional[str] = None) -> Any:
        """The figure of ``kvsim replay --plot`` (tools/plot_replay.py), drawn in process with
        matplotlib: running and waiting requests against the capacity formula, KV usage and
        padding over time, and, with ``requests=True``, TTFT/TPOT/end-to-end CDFs. A cluster
        replay with replicas > 1 draws ``kvsim replay --replicas N --plot``'s per-replica
        figure (tools/plot_cluster.py) with the SLO thresholds. Needs ``replay(...,
        timeline=True)``. Returns the matplotlib Figure; also saves it to ``path`` (PNG, SVG,
        PDF, ... by extension, or ``format``) when one is given.
        """
        if self.timeline is None:
            raise ValueError("plot() needs the per-step table: replay(..., timeline=True) (and "
                             "requests=True for the latency CDFs)")
        plots = _plots_module()
        make = plots.cluster_figure if "replica" in self.timeline else plots.replay_figure
        fig = make(self.timeline, self._data, self.requests, title=title)
        return _saved(plots, fig, path, dpi, format)


class ClusterReplayResult(ReplayResult):
    """``kvsim replay --replicas N --router R ... --json`` as an object: every key of a
    ReplayResult with the cluster-wide values (counts summed, latencies over all requests,
    mean_running per replica-step: docs/cluster.md), then replicas, router,
    router_staleness_ms, router_seed, admission_max_waiting_requests/_tokens,
    admission_rejected(_by_reason), stopped_early, slo (when an objective is set: thresholds,
    met, attainment, goodput_rps, p99_verdict, violations) and per_replica. Also:

    * ``per_replica``: one Summary per replica (``replica`` and the replay keys);
    * ``replica_frame``: the same as a table, one row per replica (nested objects flattened
      as ``ttft.p99_s``);
    * ``timeline`` / ``requests``: the columns of the CLI's cluster CSVs: with replicas > 1 a
      first column ``replica`` (the replica that stepped / the request went to; -1 refused by
      admission control, -2 never routed after an early stop), in ``requests`` also when
      admission control refused a request; ``reject_reason`` then names admission refusals
      (admission_queue_full, admission_token_limit);
    * ``report`` / ``str()``: the CLI's cluster report;
    * ``plot()``: the figure of ``kvsim replay --replicas N --plot`` (per replica when
      replicas > 1; needs ``timeline=True``).
    """

    __slots__ = ()

    @property
    def per_replica(self) -> list:
        """One Summary per replica, in replica order."""
        return [Summary(d) for d in self._data["per_replica"]]

    @property
    def replica_frame(self) -> Any:
        """The per-replica summaries as a table (DataFrame; dict of NumPy arrays without
        pandas), nested objects flattened with dotted names."""
        rows = [_flatten(d) for d in self._data["per_replica"]]
        names: list = []
        for r in rows:
            names += [k for k in r if k not in names]
        return _frames.frame({k: _column([r.get(k) for r in rows]) for k in names})


def _flatten(d: Mapping[str, Any], prefix: str = "") -> dict:
    out: dict = {}
    for k, v in d.items():
        if isinstance(v, dict):
            out.update(_flatten(v, f"{prefix}{k}."))
        else:
            out[prefix + k] = v
    return out


def _column(values: list) -> np.ndarray:
    """JSON values as one NumPy column: bool, int64, float64 (None -> NaN) or object."""
    present = [v for v in values if v is not None]
    if present and all(isinstance(v, bool) for v in present) and len(present) == len(values):
        return np.array(values, dtype=bool)
    if present and all(isinstance(v, int) and not isinstance(v, bool) for v in present):
        if len(present) == len(values):
            return np.array(values, dtype=np.int64)
    if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in present):
        return np.array([np.nan if v is None else float(v) for v in values], dtype=np.float64)
    return np.array(values, dtype=object)


class SizeReport(Summary):
    """``kvsim size --json`` as an object: num_candidates, trace, requests, model, router,
    max_replicas, slo, feasible (the count) and, cheapest first, the candidates. Also:

    * ``candidates``: one row per candidate in rank order, the columns of ``kvsim size --csv``
      (rank, candidate_index, gpu, tp, kv_cache_dtype, block_size, max_num_seqs, ...,
      replicas, gpus, cost_per_hour, feasible, verdict, ttft_p99_s, ..., trials (the count),
      reason, replay_command); NaN latencies for candidates never replayed;
    * ``recommended``: the first candidate (a Summary of its JSON object: ``replay_command``,
      ``trials``, ...) when it is feasible, else None;
    * ``trials``: every replay the search ran, one row per trial (candidate_index, rank, then
      the trial's replicas, meets_slo, stopped_early, p99s, ...);
    * ``table`` / ``str()``: the ranked table ``kvsim size`` prints;
    * ``plot()``: the figure of ``kvsim size --plot`` (cost against SLO attainment).

    ``to_dict()`` is the CLI's JSON without ``size_id`` (a fingerprint of the CLI command line,
    used only by ``kvsim size --merge``).
    """

    __slots__ = ("_table",)

    def __init__(self, data: Mapping[str, Any], table: str) -> None:
        """Built by kvsim.size()."""
        super().__init__(data)
        object.__setattr__(self, "_table", table)

    @property
    def candidates(self) -> Any:
        """All candidates in rank order (see the class doc)."""
        rows = []
        for rank, c in enumerate(self._data["candidates"], start=1):
            row = {"rank": rank}
            for k in _SIZE_CSV_COLUMNS[1:]:
                row[k] = len(c["trials"]) if k == "trials" else c[k]
            rows.append(row)
        cols = {k: _column([r[k] for r in rows]) for k in _SIZE_CSV_COLUMNS}
        for k in ("ttft_p99_s", "tpot_p99_s", "e2e_p99_s", "slo_attainment",
                  "mean_running_per_replica", "price_per_gpu_hour", "cost_per_hour",
                  "vllm_max_concurrency"):
            cols[k] = np.array([np.nan if r[k] is None else float(r[k]) for r in rows],
                               dtype=np.float64)
        return _frames.frame(cols)

    @property
    def recommended(self) -> Any:
        """The cheapest candidate that meets the SLO (a Summary), or None."""
        first = self._data["candidates"][:1]
        return Summary(first[0]) if first and first[0]["feasible"] else None

    @property
    def trials(self) -> Any:
        """Every replay of the search, one row per trial (see the class doc)."""
        rows = []
        for rank, c in enumerate(self._data["candidates"], start=1):
            for t in c["trials"]:
                rows.append({"candidate_index": c["candidate_index"], "rank": rank, **t})
        names = ["candidate_index", "rank", *_TRIAL_KEYS]
        return _frames.frame({k: _column([r[k] for r in rows]) if rows else
                              np.array([], dtype=np.float64) for k in names})

    @property
    def table(self) -> str:
        """The ranked table ``kvsim size`` prints."""
        return self._table

    def __str__(self) -> str:
        return self._table

    def plot(self, path: Optional[str | os.PathLike] = None, *, title: str = "",
             dpi: int = 110, format: Optional[str] = None) -> Any:
        """The figure of ``kvsim size --plot`` (tools/plot_size.py), drawn in process with
        matplotlib: each replayed candidate's cost per hour against its SLO attainment (colour
        = GPU, marker = TP, filled = feasible) and its p99 TTFT/TPOT over the thresholds.
        Returns the matplotlib Figure; also saves it to ``path`` when one is given.
        """
        plots = _plots_module()
        return _saved(plots, plots.size_figure(self._data, title=title), path, dpi, format)


def plot_sweep(table: Any, path: Optional[str | os.PathLike] = None, *, title: str = "",
               dpi: int = 110, format: Optional[str] = None) -> Any:
    """The figure of ``kvsim sweep --plot`` (tools/plot_sweep.py) for a table kvsim.sweep()
    returned (or a ``kvsim sweep --csv`` file read with pandas): padding share and padding per
    sequence, measured and expected, and concurrency against block size, one line per
    combination of the other swept axes. Returns the matplotlib Figure; also saves it to
    ``path`` when one is given.
    """
    plots = _plots_module()
    return _saved(plots, plots.sweep_figure(table, title=title), path, dpi, format)


def _plots_module() -> Any:
    """kvsim._plots (the figure code the tools/plot_*.py scripts share); needs matplotlib."""
    try:
        from . import _plots
    except ImportError as e:
        raise ImportError(f"plot() needs matplotlib ({e}): pip install matplotlib, or "
                          "pip install kvsim[plot]") from e
    return _plots


def _saved(plots: Any, fig: Any, path: Any, dpi: int, format: Optional[str]) -> Any:
    if path is not None:
        plots.save(fig, os.fspath(path), dpi, format)
    return fig


# `kvsim size --csv`'s header (sim/src/sweep/size_table.cpp size_csv_header).
_SIZE_CSV_COLUMNS = (
    "rank", "candidate_index", "gpu", "tp", "kv_cache_dtype", "block_size", "max_num_seqs",
    "max_num_batched_tokens", "num_gpu_blocks", "replicas", "gpus", "price_per_gpu_hour",
    "cost_per_hour", "feasible", "verdict", "ttft_p99_s", "tpot_p99_s", "e2e_p99_s",
    "slo_attainment", "mean_running_per_replica", "formula_max_concurrency",
    "vllm_max_concurrency", "trials", "reason", "replay_command",
)
# The keys of one trial in the JSON (size_json.cpp trial_json).
_TRIAL_KEYS = ("replicas", "meets_slo", "stopped_early", "ttft_p99_s", "tpot_p99_s", "e2e_p99_s",
               "slo_attainment", "mean_running_per_replica", "finished", "rejected")


def plan_from_json(text: str) -> Plan:
    return Plan(json.loads(text))


def timeline_frame(raw: Mapping[str, np.ndarray]) -> Any:
    """The extension's timeline columns (zero-copy views) as ``--timeline``'s table (with the
    cluster CSV's first column ``replica`` when the extension sends one)."""
    cols: dict = {"replica": raw["replica"]} if "replica" in raw else {}
    cols |= {"step": raw["step"], "time_s": _frames.seconds(raw["time_ns"]),
             "duration_s": _frames.seconds(raw["duration_ns"])}
    for k in ("running", "waiting", "scheduled_reqs", "scheduled_tokens", "prefill_tokens",
              "decode_tokens", "used_blocks", "free_blocks", "cached_blocks", "padding_tokens",
              "preemptions"):
        cols[k] = raw[k]
    cols["admission_stop"] = _frames.categorical(raw["admission_stop"].astype(np.int16),
                                                 _kvsim.ADMISSION_STOP_NAMES)
    for k in ("swap_out_blocks", "swap_in_blocks", "host_slots_used"):
        cols[k] = raw[k]
    return _frames.frame(cols)


def requests_frame(raw: Mapping[str, np.ndarray]) -> Any:
    """The extension's request columns as ``--requests``' table (with the cluster CSV's first
    column ``replica`` and admission refusals as reject reasons when the extension sends
    them)."""
    arrival = raw["arrival_ns"]
    cols: dict = {"replica": raw["replica"]} if "replica" in raw else {}
    cols |= {"request_id": raw["request_id"], "source_line": raw["source_line"],
             "arrival_s": _frames.seconds(arrival)}
    for k in ("prompt_tokens", "max_tokens", "output_tokens", "priority"):
        cols[k] = raw[k]
    for k in ("first_scheduled", "first_token", "finish"):
        cols[k + "_s"] = _frames.seconds(raw[k + "_ns"])
    cols["queueing_s"] = _frames.seconds_between(raw["first_scheduled_ns"], arrival)
    cols["ttft_s"] = _frames.seconds_between(raw["first_token_ns"], arrival)
    cols["e2e_s"] = _frames.seconds_between(raw["finish_ns"], arrival)
    for k in ("preemptions", "scheduled_tokens", "recomputed_tokens", "prefix_hit_tokens"):
        cols[k] = raw[k]
    finished, rejected = raw["finished"], raw["rejected"]
    status = np.where(finished, 0, np.where(rejected, 1, 2)).astype(np.int8)
    cols["status"] = _frames.categorical(status, ("finished", "rejected", "unfinished"))
    reason = np.where(rejected, raw["reject_reason"].astype(np.int16), -1).astype(np.int16)
    names = list(_kvsim.REJECT_REASON_NAMES)
    if "admission_reason" in raw:
        # Admission refusals (codes 1, 2; 0 = none) follow the engine's reasons, as the cluster
        # CSV names them instead of the record's reject_reason.
        admission = raw["admission_reason"].astype(np.int16)
        reason = np.where(admission > 0, len(names) - 1 + admission, reason).astype(np.int16)
        names += list(_kvsim.ADMISSION_REASON_NAMES)[1:]
    cols["reject_reason"] = _frames.categorical(reason, names)
    cols["swap_outs"] = raw["swap_outs"]
    return _frames.frame(cols)
