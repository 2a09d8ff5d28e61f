"""Where kvsim.size() and kvsim.sweep() run: in this process (executor=None), or as shards on a
Ray cluster (executor="ray", docs/size.md and docs/sweep.md).

A Ray search is the CLI's `--shard I/N` and `--merge` in one call: every shard is a Ray task
that runs the same C++ search as the unsharded call on its slice of the grid (the (card, TP)
groups with index % N == I for size, the configurations with index % N == I for sweep), and the
shard reports are joined by the CLI's own merge code (merge_size_reports, merge_sweep_csvs),
which checks them and ranks them, so the result is byte for byte the unsharded one.

The trace travels as what it was made from: a trace read from a file is read again by each
worker from the same path with the same read_trace keywords (so on a multi-node cluster the
file must be at that path on every node, as for Slurm); a trace built from columns is sent once
(ray.put) as its columns. Each worker process keeps the last traces it read.
"""

from __future__ import annotations

import math
import os
from typing import Any, Optional, Sequence

from . import _kvsim

#: The executors size() and sweep() take besides None (in this process).
EXECUTORS = ("ray",)

# Ray tasks per CPU of the cluster at most (more, smaller shards balance uneven candidates; each
# task reads the trace once per worker process).
_TASKS_PER_CPU = 4


def _ray(fn: str) -> Any:
    try:
        import ray
    except ImportError as e:
        raise ImportError(f"{fn}(executor='ray') needs Ray, which is not installed: "
                          "pip install kvsim[ray] (or pip install ray)") from e
    return ray


def _check(fn: str, executor: Any) -> None:
    if executor is not None and (not isinstance(executor, str) or executor not in EXECUTORS):
        raise ValueError(f"{fn}(): executor must be None or one of {', '.join(map(repr, EXECUTORS))} "
                         f"(got {executor!r})")


# ---- the trace, as a worker gets it ----

def _trace_recipe(fn: str, trace: Any, ray: Any) -> tuple:
    """What a worker rebuilds the trace from: (("file", path, read_trace keywords), None) or
    (("columns", key), ObjectRef of the columns)."""
    if trace._read_kw is not None:
        # The path as given (the reports name it), read from this process's working directory.
        return ("file", trace.path, dict(trace._read_kw), os.getcwd()), None
    cols = _columns_of(trace)
    # Refuse a trace the columns would not rebuild exactly (rather than a result that differs).
    rebuilt = _trace_from_columns(cols)
    a, b = trace._handle.columns(), rebuilt._handle.columns()
    for k in ("arrival_ns", "input_tokens", "output_tokens", "priority", "hash_block_size"):
        if not (a[k] == b[k]).all():
            raise ValueError(f"{fn}(executor='ray'): the trace's column {k} does not survive a "
                             "round trip through its columns; write it to a file and pass "
                             "kvsim.read_trace(path)")
    return ("columns", os.urandom(8).hex()), ray.put(cols)


def _columns_of(trace: Any) -> dict:
    h = trace._handle
    c = h.columns()
    hbs = c["hash_block_size"]
    cols = {
        "name": h.path,
        "arrival_s": c["arrival_ns"].astype("float64") * 1e-9,
        "input_tokens": c["input_tokens"],
        "output_tokens": c["output_tokens"],
        "priority": c["priority"],
        "session_id": h.session_ids(),
        "hash_ids": None,
        "hash_block_size": None,
    }
    if h.has_hash_ids():
        cols["hash_ids"] = [h.hash_ids(i) for i in range(len(h))]
        sizes = {int(s) for s in hbs if s}
        cols["hash_block_size"] = sizes.pop() if len(sizes) == 1 else None
    return cols


def _trace_from_columns(cols: dict) -> Any:
    from ._trace import Trace

    c = dict(cols)
    name = c.pop("name")
    return Trace.from_arrays(c.pop("arrival_s"), c.pop("input_tokens"), c.pop("output_tokens"),
                             name=name, **c)


_worker_traces: dict = {}  # recipe key -> Trace, in each worker process


def _worker_trace(recipe: tuple, columns: Optional[dict]) -> Any:
    if recipe[0] == "file":
        _, path, kw, cwd = recipe
        st = os.stat(os.path.join(cwd, path))  # a file rewritten since is read again
        key = ("file", path, cwd, tuple(sorted(kw.items())), st.st_mtime_ns, st.st_size)
    else:
        key = ("columns", recipe[1])
    t = _worker_traces.get(key)
    if t is None:
        if recipe[0] == "file":
            from ._trace import Trace

            # A worker runs one task at a time: read the relative path from the caller's
            # directory, so the trace keeps the path as given.
            here = os.getcwd()
            os.chdir(cwd)
            try:
                t = Trace(_kvsim.read_trace(path, kw))
            finally:
                os.chdir(here)
            t._read_kw = kw
        else:
            t = _trace_from_columns(columns)
        while len(_worker_traces) >= 4:
            _worker_traces.pop(next(iter(_worker_traces)))
        _worker_traces[key] = t
    return t


# ---- the shards ----

def _shard_task(kind: str, recipe: tuple, columns: Optional[dict], args: tuple,
                shard: str) -> Any:
    """One shard, in a Ray worker: the C++ search (the same call as executor=None) on it."""
    t = _worker_trace(recipe, columns)
    if kind == "size":
        return _kvsim.size(t._handle, *args, shard=shard)
    return _kvsim.sweep(t._handle, *args, shard=shard)


def _run_ray(fn: str, kind: str, trace: Any, args: tuple, units: int, jobs: int) -> list:
    """The shard results, in shard order: `units` (groups or configurations) split over at most
    _TASKS_PER_CPU tasks per cluster CPU, each task asking Ray for `jobs` CPUs."""
    ray = _ray(fn)
    if not ray.is_initialized():
        ray.init()  # a local cluster, or the one RAY_ADDRESS names
    cpus = int(ray.cluster_resources().get("CPU", 1))
    shards = max(1, min(units, _TASKS_PER_CPU * max(1, cpus // jobs)))
    recipe, columns = _trace_recipe(fn, trace, ray)
    task = ray.remote(num_cpus=jobs, max_retries=0)(_shard_task)
    refs = [task.remote(kind, recipe, columns, args, f"{i}/{shards}") for i in range(shards)]
    try:
        return ray.get(refs)
    except ray.exceptions.RayTaskError as e:
        # The shard's own exception (ValueError, kvsim.DoesNotFitError, ...), as in-process. The
        # other shards finish rather than being cancelled: cancelling a task whose reply is on
        # its way aborts the driver in Ray 2.60 (task_manager.cc, "Check failed: it !=
        # submissible_tasks_.end()", seen in this project's CI), and a shard is a bounded search.
        ray.wait(refs, num_returns=len(refs))
        cause = getattr(e, "cause", None)
        if isinstance(cause, BaseException):
            raise cause from None
        raise
    except BaseException:  # KeyboardInterrupt: stop the other shards
        _cancel(ray, refs)
        raise


def _cancel(ray: Any, refs: list) -> None:
    for r in refs:
        try:
            ray.cancel(r)
        except Exception:  # already finished, or the cluster is gone
            pass


def size(executor: Optional[str], trace: Any, *args: Any) -> tuple:
    """kvsim size: (JSON report text, table text), in process or merged from Ray shards.
    `args`: _kvsim.size's arguments after the trace."""
    _check("size", executor)
    if executor is None:
        return _kvsim.size(trace._handle, *args)
    gpus, tp, jobs = args[4], args[5], args[12]
    units = len(gpus) * len(tp)  # (card, TP) groups; a duplicate is refused by the search
    texts = _run_ray("size", "size", trace, args, units, jobs)
    return _kvsim.merge_size_reports(
        [(f"ray shard {i}/{len(texts)}", json_text) for i, (json_text, _) in enumerate(texts)])


def sweep(executor: Optional[str], trace: Any, *args: Any) -> str:
    """kvsim sweep: the CSV text, in process or merged from Ray shards. `args`: _kvsim.sweep's
    arguments after the trace."""
    _check("sweep", executor)
    if executor is None:
        return _kvsim.sweep(trace._handle, *args)
    axes: Sequence[list] = args[2:8]
    jobs = args[8]
    units = math.prod(max(1, len(a)) for a in axes)  # both pool axes at once is refused anyway
    texts = _run_ray("sweep", "sweep", trace, args, units, jobs)
    return _kvsim.merge_sweep_csvs(
        [(f"ray shard {i}/{len(texts)}", csv_text) for i, csv_text in enumerate(texts)])
