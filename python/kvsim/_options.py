"""Keyword-argument checks shared by plan, read_trace, replay, sweep, size and calibrate.

Each public function takes keyword arguments named as the CLI flags without dashes (vLLM's
engine-argument names). Arguments left at ``None`` keep the default and are not passed on; the
given ones are type-checked here, grouped, and handed to the extension, whose run room (run/)
resolves and checks them as it does for the CLI.

The settings of the run room's option structs, their groups, kinds and boundary rules come from
its parameter table (run/include/kvsim/run/parameters.h, exported as ``_kvsim.PARAMETERS``); each
function's own keywords (jobs, concurrency, ...) are declared below.
"""

from __future__ import annotations

import math
import numbers
import os
from typing import Any, Mapping

from . import _kvsim

# {id: (group, kind, rule, choices)} from the run room.
_PARAMETERS: dict[str, tuple[str, str, str, tuple]] = dict(_kvsim.PARAMETERS)


def _keys(group: str) -> tuple[str, ...]:
    return tuple(k for k, (g, *_) in _PARAMETERS.items() if g == group)


# Which group each argument belongs to (the extension consumes exactly these keys).
PLAN_KEYS = _keys("plan")
SCHEDULER_KEYS = _keys("scheduler")
REPLAY_KEYS = _keys("replay")
# The cluster mode of replay (`kvsim replay --replicas N --router R ...`, docs/cluster.md); size
# takes them all but replicas and slo_stop_early.
CLUSTER_KEYS = _keys("cluster")
TRACE_KEYS = _keys("trace")

# Kinds and rules of the functions' own keywords (outside the run room's option structs).
_LOCAL = {
    "concurrency": ("int", "positive", ()),
    "jobs": ("int", "positive", ()),
    "max_replicas": ("int", "positive", ()),
    "early_stop": ("bool", "any", ()),
}


def _spec(name: str) -> tuple[str, str, tuple]:
    if name in _PARAMETERS:
        return _PARAMETERS[name][1:]
    return _LOCAL[name]


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
    kind, rule, choices = _spec(name)
    if kind == "bool":
        if not isinstance(value, (bool,)) and not (hasattr(value, "dtype") and value.dtype == bool):
            _fail(fn, f"{name} must be True or False (got {value!r})", TypeError)
        return bool(value)
    if choices:
        if value not in choices:
            _fail(fn, f"{name} must be one of {', '.join(choices)} (got {value!r})")
        return value
    if kind == "path":
        if not isinstance(value, (str, os.PathLike)):
            _fail(fn, f"{name} must be a path (got {value!r})", TypeError)
        return os.fspath(value)
    if kind == "str":
        if not isinstance(value, str):
            _fail(fn, f"{name} must be a string (got {value!r})", TypeError)
        return value
    if kind in ("int", "uint64"):
        if isinstance(value, bool) or not isinstance(value, numbers.Integral):
            _fail(fn, f"{name} must be an integer (got {value!r})", TypeError)
        value = check_int_range(fn, name, int(value), uint64=kind == "uint64")
    else:
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            _fail(fn, f"{name} must be a number (got {value!r})", TypeError)
        value = float(value)
        if not math.isfinite(value):
            _fail(fn, f"{name} must be finite (got {value})")
    if rule == "positive" and value <= 0:
        _fail(fn, f"{name} must be > 0 (got {value})")
    if rule == "non_negative" and value < 0:
        _fail(fn, f"{name} must be >= 0 (got {value})")
    if rule == "fraction_below_one" and not 0 <= value < 1:
        _fail(fn, f"{name} must be in [0, 1) (got {value})")
    return value


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
