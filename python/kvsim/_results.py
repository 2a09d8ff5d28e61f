"""Result objects: the CLI's JSON objects with their keys as attributes."""

from __future__ import annotations

import json
from typing import Any, Iterator, Mapping

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
    * ``report``: the human report ``kvsim replay`` prints (also ``str(result)``).
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


def plan_from_json(text: str) -> Plan:
    return Plan(json.loads(text))


def timeline_frame(raw: Mapping[str, np.ndarray]) -> Any:
    """The extension's timeline columns (zero-copy views) as ``--timeline``'s table."""
    cols: dict = {"step": raw["step"], "time_s": _frames.seconds(raw["time_ns"]),
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
    """The extension's request columns as ``--requests``' table."""
    arrival = raw["arrival_ns"]
    cols: dict = {"request_id": raw["request_id"], "source_line": raw["source_line"],
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
    cols["reject_reason"] = _frames.categorical(reason, _kvsim.REJECT_REASON_NAMES)
    cols["swap_outs"] = raw["swap_outs"]
    return _frames.frame(cols)
