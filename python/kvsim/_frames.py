"""Columns -> pandas DataFrame (or, without pandas, a dict of NumPy arrays)."""

from __future__ import annotations

from typing import Any, Dict, Sequence

import numpy as np

try:  # pandas is optional: without it, tables are dicts of NumPy arrays.
    import pandas as _pd
except ImportError:  # pragma: no cover - exercised by environments without pandas
    _pd = None

Columns = Dict[str, np.ndarray]


def has_pandas() -> bool:
    return _pd is not None


def categorical(codes: np.ndarray, names: Sequence[str]) -> Any:
    """Integer codes (-1 = missing) as a pandas Categorical, or an array of names (None)."""
    if _pd is not None:
        return _pd.Categorical.from_codes(codes, categories=list(names))
    labels = np.array(list(names) + [None], dtype=object)
    return labels[codes]


def frame(columns: Columns) -> Any:
    """A DataFrame without copying the columns where pandas allows, else the dict itself."""
    if _pd is None:
        return columns
    return _pd.DataFrame(columns, copy=False)


def seconds(ns: np.ndarray) -> np.ndarray:
    """Integer nanoseconds as float seconds; -1 ('never') becomes NaN."""
    s = ns.astype(np.float64) * 1e-9
    s[ns < 0] = np.nan
    return s


def seconds_between(later: np.ndarray, earlier: np.ndarray) -> np.ndarray:
    """later - earlier in float seconds; NaN where either never happened."""
    s = (later - earlier).astype(np.float64) * 1e-9
    s[(later < 0) | (earlier < 0)] = np.nan
    return s
