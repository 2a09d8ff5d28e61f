"""kvsim.Trace: a request trace held by the C++ engine."""

from __future__ import annotations

import os
from typing import Any, Iterator, NamedTuple, Optional, Sequence, Union

import numpy as np

from . import _frames
from . import _kvsim


class TraceRequest(NamedTuple):
    """One request of a trace, as iteration yields it."""

    arrival_s: float
    input_tokens: int
    output_tokens: int
    priority: int
    source_line: int
    hash_ids: Optional[list]


class Trace:
    """A request trace: arrivals (seconds from the first request) and token lengths.

    Get one from :func:`kvsim.read_trace` (every format ``kvsim replay`` reads) or build one
    from columns with :meth:`Trace.from_arrays` / :meth:`Trace.from_pandas`. A trace is
    immutable and sorted by arrival; ``len()``, iteration and indexing give
    :class:`TraceRequest` rows; :meth:`to_pandas` gives a DataFrame.
    """

    # _read_kw: the read_trace keywords a trace file was read with (None for a trace built from
    # columns), so that kvsim.size can write the `kvsim replay` command reproducing a result.
    __slots__ = ("_handle", "_columns", "_read_kw")

    def __init__(self, handle: "_kvsim._Trace") -> None:
        """Wraps an extension handle; use read_trace, from_arrays or from_pandas instead."""
        if not isinstance(handle, _kvsim._Trace):
            raise TypeError("use kvsim.read_trace(), Trace.from_arrays() or Trace.from_pandas()")
        self._handle = handle
        self._columns: Optional[dict] = None
        self._read_kw: Optional[dict] = None

    @classmethod
    def from_arrays(
        cls,
        arrival_s: Any,
        input_tokens: Any,
        output_tokens: Any,
        *,
        priority: Any = None,
        session_id: Optional[Sequence[str]] = None,
        hash_ids: Optional[Sequence[Optional[Sequence[int]]]] = None,
        hash_block_size: Optional[int] = None,
        name: str = "<arrays>",
    ) -> "Trace":
        """Builds a trace from equal-length columns.

        arrival_s: arrival times in seconds (any origin; rebased to the first arrival);
        input_tokens, output_tokens: token counts (integers >= 0); priority: optional integers
        (lower is served first with scheduling_policy='priority'); session_id: optional
        strings; hash_ids: optional per-request lists of prefix block ids (None for a request
        without), each covering the prompt in blocks of hash_block_size tokens. Rows are
        sorted by arrival (stable). A bad value raises kvsim.TraceError naming ``name``, the
        1-based row and the column.
        """

        def ints(values: Any, column: str) -> np.ndarray:
            a = np.asarray(values)
            if a.ndim != 1:
                raise ValueError(f"{name}: column '{column}' must be one-dimensional")
            if a.size and not np.issubdtype(a.dtype, np.integer):
                if np.issubdtype(a.dtype, np.floating) and np.all(np.isfinite(a)) and np.all(a == np.round(a)):
                    a = a.astype(np.int64)
                else:
                    raise TypeError(f"{name}: column '{column}' must hold integers (dtype {a.dtype})")
            return np.ascontiguousarray(a, dtype=np.int64)

        arrival = np.asarray(arrival_s)
        if arrival.ndim != 1:
            raise ValueError(f"{name}: column 'arrival_s' must be one-dimensional")
        if arrival.size and not (np.issubdtype(arrival.dtype, np.number) and not np.issubdtype(arrival.dtype, np.complexfloating)):
            raise TypeError(f"{name}: column 'arrival_s' must hold numbers (dtype {arrival.dtype})")
        arrival = np.ascontiguousarray(arrival, dtype=np.float64)
        ids = None
        if hash_ids is not None:
            ids = [None if h is None else [int(x) for x in h] for h in hash_ids]
        handle = _kvsim.trace_from_arrays(
            name,
            arrival,
            ints(input_tokens, "input_tokens"),
            ints(output_tokens, "output_tokens"),
            None if priority is None else ints(priority, "priority"),
            None if session_id is None else [str(s) for s in session_id],
            ids,
            0 if hash_block_size is None else int(hash_block_size),
        )
        return cls(handle)

    @classmethod
    def from_pandas(cls, df: Any, *, hash_block_size: Optional[int] = None,
                    name: str = "<DataFrame>") -> "Trace":
        """Builds a trace from a DataFrame with columns arrival_s, input_tokens, output_tokens
        and optionally priority, session_id, hash_ids (see from_arrays). Errors name the
        DataFrame's 1-based row."""
        missing = [c for c in ("arrival_s", "input_tokens", "output_tokens") if c not in df]
        if missing:
            raise ValueError(f"{name}: missing column(s) {', '.join(missing)}")
        opt = {c: (df[c].tolist() if c in ("session_id", "hash_ids") else df[c].to_numpy())
               for c in ("priority", "session_id", "hash_ids") if c in df}
        return cls.from_arrays(df["arrival_s"].to_numpy(), df["input_tokens"].to_numpy(),
                               df["output_tokens"].to_numpy(), hash_block_size=hash_block_size,
                               name=name, **opt)

    # --- what it is ---
    @property
    def path(self) -> str:
        """The file read (or the name given to a trace built from columns)."""
        return self._handle.path

    @property
    def format(self) -> str:
        """The layout read: azure, vidur, burstgpt, mooncake, bailian, sharegpt or kvsim."""
        return self._handle.format

    @property
    def arrival_mode(self) -> str:
        """How arrivals were assigned: trace, all-at-once or poisson."""
        return self._handle.arrival_mode

    @property
    def rows_read(self) -> int:
        """Data rows seen in the file (header excluded)."""
        return self._handle.rows_read

    @property
    def dropped(self) -> dict:
        """Rows not turned into requests, by reason."""
        return self._handle.dropped

    def __len__(self) -> int:
        """The number of requests."""
        return len(self._handle)

    def __repr__(self) -> str:
        return f"<kvsim.Trace {self.path!r} ({self.format}): {len(self)} requests>"

    # --- rows and columns ---
    def columns(self) -> dict:
        """The requests as NumPy arrays: arrival_s (float64 seconds), arrival_ns (int64),
        input_tokens, output_tokens, priority (int32), source_line (int64)."""
        if self._columns is None:
            c = self._handle.columns()
            cols = {"arrival_s": c["arrival_ns"].astype(np.float64) * 1e-9}
            for k in ("arrival_ns", "input_tokens", "output_tokens", "priority", "source_line"):
                cols[k] = c[k]
            self._columns = cols
        return self._columns

    def __getitem__(self, index: int) -> TraceRequest:
        """Request `index` (negative indexes count from the end)."""
        n = len(self)
        i = index + n if index < 0 else index
        if not 0 <= i < n:
            raise IndexError(f"request {index} of {n}")
        c = self.columns()
        return TraceRequest(float(c["arrival_s"][i]), int(c["input_tokens"][i]),
                            int(c["output_tokens"][i]), int(c["priority"][i]),
                            int(c["source_line"][i]), self._handle.hash_ids(i))

    def __iter__(self) -> Iterator[TraceRequest]:
        """The requests in arrival order."""
        for i in range(len(self)):
            yield self[i]

    def to_pandas(self) -> Any:
        """The requests as a DataFrame (arrival_s, input_tokens, output_tokens, priority,
        source_line; session_id and hash_ids when the trace has them). Without pandas: a dict
        of NumPy arrays."""
        c = self.columns()
        cols = {k: c[k] for k in ("arrival_s", "input_tokens", "output_tokens", "priority",
                                 "source_line")}
        sessions = self._handle.session_ids()
        if sessions is not None:
            cols["session_id"] = np.array(sessions, dtype=object)
        if self._handle.has_hash_ids():
            ids = np.empty(len(self), dtype=object)
            for i in range(len(self)):
                ids[i] = self._handle.hash_ids(i)
            cols["hash_ids"] = ids
        return _frames.frame(cols)


TraceLike = Union[Trace, str, "os.PathLike[str]"]
