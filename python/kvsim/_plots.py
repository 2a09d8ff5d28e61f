"""The figures of kvsim's results, drawn with matplotlib: the one copy of the figure code.

Used in process by the Python results (``ReplayResult.plot()``, ``ClusterReplayResult.plot()``,
``SizeReport.plot()``, ``kvsim.plot_sweep()``) and, loaded from the source tree, by the plot
scripts ``tools/plot_replay.py``, ``plot_cluster.py``, ``plot_size.py`` and ``plot_sweep.py``
that ``kvsim replay|sweep|size --plot`` run. So this module imports nothing of kvsim's: only
the standard library and matplotlib (no pyplot: each figure is a ``matplotlib.figure.Figure``
of its own, so nothing accumulates in pyplot's state and no GUI backend is chosen).

Tables are column mappings: a pandas DataFrame, a dict of NumPy arrays or a dict of lists (the
tools parse their CSVs into the last), with the column names of the CLI's CSVs. Data that
cannot be drawn raises ValueError naming ``where`` (the tools pass the file's path).
"""

from __future__ import annotations

import math
from typing import Any, Callable, Mapping, Optional, Sequence

from matplotlib.figure import Figure

COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#17becf"]

# Columns each figure reads (the CLI's CSV headers).
REPLAY_TIMELINE = ["time_s", "running", "waiting", "used_blocks", "free_blocks", "padding_tokens"]
CLUSTER_TIMELINE = ["replica", "time_s", "running", "used_blocks", "free_blocks"]
REQUESTS = ["status", "arrival_s", "first_token_s", "finish_s", "output_tokens"]
SWEEP = [
    "block_size", "num_gpu_blocks", "kv_cache_dtype", "max_num_seqs", "max_num_batched_tokens",
    "padding_fraction_mean", "expected_padding_fraction", "padding_tokens_per_seq",
    "expected_padding_per_seq", "expected_padding_per_seq_uniform", "mean_running",
    "peak_running", "vllm_max_concurrency", "gpu_memory_utilization",
]
SIZE_MARKERS = {1: "o", 2: "s", 4: "^", 8: "D", 16: "P"}


# --- data helpers ------------------------------------------------------------------------------

def require(table: Mapping[str, Any], names: Sequence[str], where: str) -> None:
    """ValueError unless every column in `names` is present."""
    missing = [c for c in names if c not in table]
    if missing:
        raise ValueError(f"{where}: missing column(s) {', '.join(missing)} "
                         "(is this the right kvsim table?)")


def values(table: Mapping[str, Any], name: str, cast: Callable = float) -> list:
    """One column as a list of `cast` values."""
    return [cast(v) for v in table[name]]


def mean(xs: Sequence[float]) -> float:
    return sum(xs) / len(xs)


def bin_by_time(ts, ys, bins=400, reduce=max):
    """Groups steps into `bins` equal time bins (steps are not evenly spaced in time) and reduces
    each non-empty bin with `reduce`; returns bin centres and values."""
    if not ts:
        return [], []
    t0, t1 = ts[0], ts[-1]
    width = (t1 - t0) / bins or 1.0
    groups: dict = {}
    for t, y in zip(ts, ys):
        groups.setdefault(min(int((t - t0) / width), bins - 1), []).append(y)
    keys = sorted(groups)
    return [t0 + (k + 0.5) * width for k in keys], [reduce(groups[k]) for k in keys]


def cdf(xs):
    """Sorted values and their empirical CDF (i/n)."""
    v = sorted(xs)
    n = len(v)
    return v, [(i + 1) / n for i in range(n)]


def nearest_rank(sorted_values, q):
    """sorted[ceil(q*n)-1], the percentile kvsim reports (latency_stats.h)."""
    n = len(sorted_values)
    k = min(max(math.ceil(q * n - 1e-9 * max(1.0, q * n)), 1), n)
    return sorted_values[k - 1]


def _latencies(requests: Mapping[str, Any], where: str):
    """TTFT, TPOT and end-to-end latency of the finished requests."""
    require(requests, REQUESTS, where)
    status = [str(s) for s in requests["status"]]
    arrival = values(requests, "arrival_s")
    first = values(requests, "first_token_s")
    finish = values(requests, "finish_s")
    out_tokens = values(requests, "output_tokens")
    done = [i for i, s in enumerate(status) if s == "finished"]
    if not done:
        raise ValueError(f"{where}: no finished requests")
    ttft = [first[i] - arrival[i] for i in done]
    e2e = [finish[i] - arrival[i] for i in done]
    tpot = [(finish[i] - first[i]) / (int(out_tokens[i]) - 1)
            for i in done if int(out_tokens[i]) >= 2]
    return ttft, tpot, e2e


def _latency_label(q: float, v: float) -> str:
    return f"p{int(q * 100)} = {v * 1e3:.1f} ms" if v < 1 else f"p{int(q * 100)} = {v:.2f} s"


def _finish_cdf_axis(ax, name, x, count):
    """Axes, title, grid and legend of a latency CDF panel (x: the sorted, floored values)."""
    if x[-1] / x[0] > 20:  # log only when the values span decades
        ax.set_xscale("log")
    ax.set_xlabel(f"{name} (s)")
    ax.set_ylabel("fraction of requests")
    ax.set_title(f"{name} CDF ({count} requests)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="lower right")


def _colormap(name: str):
    import matplotlib

    try:
        return matplotlib.colormaps[name]
    except AttributeError:  # matplotlib < 3.5
        from matplotlib import cm

        return cm.get_cmap(name)


# --- kvsim replay ------------------------------------------------------------------------------

def replay_figure(timeline: Mapping[str, Any], summary: Optional[Mapping[str, Any]] = None,
                  requests: Optional[Mapping[str, Any]] = None, *, block_size: Optional[int] = None,
                  bins: int = 360, title: str = "", where: str = "timeline",
                  requests_where: str = "requests") -> Figure:
    """One replay: concurrency, KV usage and padding over time; latency CDFs.

    Top left: running and waiting requests per step, with the capacity formula's lines (the
    lesson's N_seq and vLLM's "Maximum concurrency", from the summary). Top right: KV blocks in
    use (% of the pool) and last-block padding (% of used KV). Bottom (when `requests` is
    given): CDFs of TTFT, TPOT and end-to-end latency, with p50/p99 marked.
    """
    require(timeline, REPLAY_TIMELINE, where)
    summary = summary or {}
    block_size = block_size or summary.get("block_size")
    t = [v / 60 for v in values(timeline, "time_s")]
    if not t:
        raise ValueError(f"{where}: no steps")
    running = values(timeline, "running", int)
    waiting = values(timeline, "waiting", int)
    used = values(timeline, "used_blocks", int)
    free = values(timeline, "free_blocks", int)
    padding = values(timeline, "padding_tokens", int)
    latencies = _latencies(requests, requests_where) if requests is not None else None

    fig = Figure(figsize=(13, 8 if latencies else 4.2))
    grid = fig.add_gridspec(2 if latencies else 1, 6)
    ax_conc = fig.add_subplot(grid[0, 0:3])
    ax_kv = fig.add_subplot(grid[0, 3:6])

    tx, r_mean = bin_by_time(t, running, bins, mean)
    _, r_max = bin_by_time(t, running, bins, max)
    _, w_mean = bin_by_time(t, waiting, bins, mean)
    ax_conc.fill_between(tx, r_mean, r_max, color=COLORS[0], alpha=0.25, lw=0,
                         label="running (max per bin)")
    ax_conc.plot(tx, r_mean, color=COLORS[0], lw=1, label="running (mean per bin)")
    ax_conc.plot(tx, w_mean, color=COLORS[3], lw=1, label="waiting")
    if "formula_max_concurrency" in summary:
        ax_conc.axhline(summary["formula_max_concurrency"], color=COLORS[1], ls="--", lw=1.2,
                        label=f"formula N_seq = {summary['formula_max_concurrency']}")
    if "vllm_max_concurrency" in summary:
        ax_conc.axhline(summary["vllm_max_concurrency"], color=COLORS[2], ls=":", lw=1.2,
                        label=f"vLLM max concurrency = {summary['vllm_max_concurrency']:.2f}")
    ax_conc.set_xlabel("simulated time (min)")
    ax_conc.set_ylabel("requests")
    ax_conc.set_title("Concurrency vs the capacity formula")
    ax_conc.grid(alpha=0.3)
    ax_conc.legend(fontsize=8, loc="upper right")

    pool = [u + f for u, f in zip(used, free)]
    usage = [100 * u / p if p else 0 for u, p in zip(used, pool)]
    tx, u_mean = bin_by_time(t, usage, bins, mean)
    _, u_max = bin_by_time(t, usage, bins, max)
    ax_kv.fill_between(tx, u_mean, u_max, color=COLORS[4], alpha=0.25, lw=0)
    ax_kv.plot(tx, u_mean, color=COLORS[4], lw=1, label="KV blocks in use (% of pool; band = max)")
    ax_kv.set_ylim(0, 119)  # headroom for the legend
    ax_kv.set_xlabel("simulated time (min)")
    ax_kv.set_ylabel("KV usage (%)")
    ax_kv.grid(alpha=0.3)
    ax_pad = ax_kv.twinx()
    if block_size:
        pad = [100 * p / (u * block_size) if u else 0 for p, u in zip(padding, used)]
        label, ylabel = "padding (% of used KV)", "padding (% of used KV)"
    else:
        pad, label, ylabel = padding, "padding tokens", "padding tokens"
    tx, p_mean = bin_by_time(t, pad, bins, mean)
    ax_pad.plot(tx, p_mean, color=COLORS[5], lw=0.8, alpha=0.8, label=label + " (mean per bin)")
    ax_pad.set_ylabel(ylabel)
    ax_pad.set_ylim(bottom=0)
    lines = ax_kv.get_lines() + ax_pad.get_lines()
    ax_kv.legend(lines, [ln.get_label() for ln in lines], fontsize=8, loc="upper left",
                 framealpha=0.9)
    ax_kv.set_title("KV usage and last-block padding")

    if latencies:
        for k, (name, vals) in enumerate(zip(("TTFT", "TPOT", "end-to-end"), latencies)):
            ax = fig.add_subplot(grid[1, 2 * k:2 * k + 2])
            if not vals:
                ax.set_title(f"{name}: no values")
                continue
            x, y = cdf(vals)
            x = [max(v, 1e-4) for v in x]
            ax.plot(x, y, color=COLORS[k], lw=1.2)
            for q, ls in ((0.5, "--"), (0.99, ":")):
                v = nearest_rank(sorted(vals), q)
                ax.axvline(max(v, 1e-4), color="gray", ls=ls, lw=1, label=_latency_label(q, v))
            _finish_cdf_axis(ax, name, x, len(vals))
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    return fig


# --- kvsim replay --replicas N -----------------------------------------------------------------

def _binned(ts, ys, t0, width, bins):
    """Mean of ys per bin of a time grid shared by all replicas; returns centres and values."""
    groups: dict = {}
    for t, y in zip(ts, ys):
        groups.setdefault(min(int((t - t0) / width), bins - 1), []).append(y)
    keys = sorted(groups)
    return [t0 + (k + 0.5) * width for k in keys], [mean(groups[k]) for k in keys]


def _replica_color(i, n):
    if n <= len(COLORS):
        return COLORS[i]
    return _colormap("viridis")(i / max(n - 1, 1))


def cluster_figure(timeline: Mapping[str, Any], summary: Optional[Mapping[str, Any]] = None,
                   requests: Optional[Mapping[str, Any]] = None, *, bins: int = 240,
                   title: str = "", where: str = "timeline",
                   requests_where: str = "requests") -> Figure:
    """A cluster replay (a ``replica`` column): per-replica concurrency and KV usage over time,
    latency CDFs against the SLO lines.

    Top left: running requests per replica (mean per time bin) with the capacity formula's
    per-replica N_seq. Top right: KV blocks in use per replica (% of its pool). Bottom (when
    `requests` is given): CDFs of TTFT, TPOT and end-to-end latency over all finished requests,
    with the p99 and the SLO threshold (the summary's "slo") marked.
    """
    if bins < 1:
        raise ValueError(f"bins {bins}: must be >= 1")
    require(timeline, CLUSTER_TIMELINE, where)
    summary = summary or {}
    replica = values(timeline, "replica", int)
    if not replica:
        raise ValueError(f"{where}: no steps")
    t = [v / 60 for v in values(timeline, "time_s")]
    running = values(timeline, "running", int)
    used = values(timeline, "used_blocks", int)
    free = values(timeline, "free_blocks", int)
    latencies = _latencies(requests, requests_where) if requests is not None else None
    replicas = sorted(set(replica))
    t0, t1 = min(t), max(t)
    width = (t1 - t0) / bins or 1.0

    fig = Figure(figsize=(13, 8 if latencies else 4.2))
    grid = fig.add_gridspec(2 if latencies else 1, 6)
    ax_conc = fig.add_subplot(grid[0, 0:3])
    ax_kv = fig.add_subplot(grid[0, 3:6])
    n = len(replicas)
    for k, r in enumerate(replicas):
        idx = [i for i, x in enumerate(replica) if x == r]
        ts = [t[i] for i in idx]
        color = _replica_color(k, n)
        label = f"replica {r}" if n <= 8 else None
        tx, run = _binned(ts, [running[i] for i in idx], t0, width, bins)
        ax_conc.plot(tx, run, color=color, lw=0.9, alpha=0.85, label=label)
        usage = [100 * used[i] / (used[i] + free[i]) if used[i] + free[i] else 0 for i in idx]
        tx, u = _binned(ts, usage, t0, width, bins)
        ax_kv.plot(tx, u, color=color, lw=0.9, alpha=0.85, label=label)
    if "formula_max_concurrency" in summary:
        ax_conc.axhline(summary["formula_max_concurrency"], color="black", ls="--", lw=1.2,
                        label=f"formula N_seq per replica = {summary['formula_max_concurrency']}")
    router = summary.get("router", "")
    count = summary.get("replicas", n)  # a replica that never stepped has no rows
    ax_conc.set_title(f"Running requests per replica ({count} replicas"
                      f"{', ' + router if router else ''})")
    ax_conc.set_xlabel("simulated time (min)")
    ax_conc.set_ylabel("running requests (mean per bin)")
    ax_conc.grid(alpha=0.3)
    ax_conc.legend(fontsize=7, loc="upper right", ncol=2)
    ax_kv.set_title("KV usage per replica")
    ax_kv.set_xlabel("simulated time (min)")
    ax_kv.set_ylabel("KV blocks in use (% of the replica's pool)")
    ax_kv.set_ylim(0, 105)
    ax_kv.grid(alpha=0.3)
    if n <= 8:
        ax_kv.legend(fontsize=7, loc="upper right", ncol=2)

    if latencies:
        slo = summary.get("slo") or {}
        thresholds = (slo.get("ttft_p99_s"), slo.get("tpot_p99_s"), slo.get("e2e_p99_s"))
        for k, (name, vals, threshold) in enumerate(
                zip(("TTFT", "TPOT", "end-to-end"), latencies, thresholds)):
            ax = fig.add_subplot(grid[1, 2 * k:2 * k + 2])
            if not vals:
                ax.set_title(f"{name}: no values")
                continue
            x, y = cdf(vals)
            x = [max(v, 1e-4) for v in x]
            ax.plot(x, y, color=COLORS[k], lw=1.2)
            p99 = nearest_rank(sorted(vals), 0.99)
            ax.axvline(max(p99, 1e-4), color="gray", ls=":", lw=1, label=_latency_label(0.99, p99))
            if threshold is not None:
                verdict = "met" if p99 <= threshold else "missed"
                ax.axvline(threshold, color=COLORS[1], ls="--", lw=1.4,
                           label=f"SLO p99 <= {threshold:g} s ({verdict})")
                ax.axhline(0.99, color=COLORS[1], ls=":", lw=0.8)
            _finish_cdf_axis(ax, name, x, len(vals))
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    return fig


# --- kvsim sweep -------------------------------------------------------------------------------

def sweep_figure(table: Mapping[str, Any], *, title: str = "", where: str = "sweep") -> Figure:
    """A sweep: padding and concurrency against block size.

    Left: padding as a share of used KV, measured (mean over steps) and the analytic
    expectation. Middle: padding tokens per live sequence, measured, exact expectation and
    (bs-1)/2. Right: mean/peak running requests and vLLM's "Maximum concurrency" line. When
    other axes are swept too, each combination gets its own line.
    """
    require(table, SWEEP, where)
    names = list(SWEEP)
    columns = [list(table[k]) for k in names]
    rows = [dict(zip(names, r)) for r in zip(*columns)]
    if not rows:
        raise ValueError(f"{where}: no rows")
    others = ["kv_cache_dtype", "max_num_seqs", "max_num_batched_tokens", "gpu_memory_utilization"]
    varying = [k for k in others if len({str(r[k]) for r in rows}) > 1]
    # Without a block-count axis the pool size follows the block size; only a swept pool varies.
    groups: dict = {}
    for r in rows:
        key = ", ".join(f"{k}={r[k]}" for k in varying) or "sweep"
        groups.setdefault(key, []).append(r)

    def col(rs, name, cast=float):
        return [cast(r[name]) for r in rs]

    fig = Figure(figsize=(14, 4.2))
    ax_frac, ax_tok, ax_conc = fig.subplots(1, 3)
    for i, (label, rs) in enumerate(groups.items()):
        rs = sorted(rs, key=lambda r: int(r["block_size"]))
        bs = col(rs, "block_size", int)
        c = COLORS[i % len(COLORS)]
        suffix = "" if label == "sweep" else f" ({label})"
        ax_frac.plot(bs, [100 * v for v in col(rs, "padding_fraction_mean")], "o-", color=c,
                     label="measured" + suffix)
        ax_frac.plot(bs, [100 * v for v in col(rs, "expected_padding_fraction")], "x",
                     color="black", ms=8, ls="none", label="expected (analytic)" + suffix)
        ax_tok.plot(bs, col(rs, "padding_tokens_per_seq"), "o-", color=c,
                    label="measured" + suffix)
        ax_tok.plot(bs, col(rs, "expected_padding_per_seq"), "x", color="black", ms=8, ls="none",
                    label="expected (trace lengths)" + suffix)
        ax_conc.plot(bs, col(rs, "mean_running"), "o-", color=c, label="mean running" + suffix)
        ax_conc.plot(bs, col(rs, "peak_running"), "^:", color=c, label="peak running" + suffix)
        ax_conc.plot(bs, col(rs, "vllm_max_concurrency"), "s--", color=c, alpha=0.5,
                     label="vLLM max concurrency" + suffix)
    all_bs = sorted({int(r["block_size"]) for r in rows})
    ax_tok.plot(all_bs, [(b - 1) / 2 for b in all_bs], color="gray", lw=1, ls=":",
                label="(bs-1)/2")
    for ax, subtitle, ylabel in (
        (ax_frac, "Padding share of used KV", "padding / used KV (%)"),
        (ax_tok, "Padding per live sequence", "tokens"),
        (ax_conc, "Concurrency", "requests"),
    ):
        ax.set_xscale("log", base=2)
        ax.set_xticks(all_bs)
        ax.set_xticklabels([str(b) for b in all_bs])
        ax.set_xlabel("block size (tokens)")
        ax.set_ylabel(ylabel)
        ax.set_title(subtitle)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    ax_tok.set_yscale("symlog", linthresh=1)
    ax_tok.set_ylim(bottom=0)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    return fig


# --- kvsim size --------------------------------------------------------------------------------

def size_figure(report: Mapping[str, Any], *, title: str = "", where: str = "report") -> Figure:
    """A size report (``kvsim size --json``): cost per hour against SLO attainment and p99s.

    Left: each planned candidate at its reported replica count (the fewest that meet the SLO,
    or max_replicas when none does): cost per hour against the share of requests that met
    every threshold. Colour = GPU, marker = TP, filled = feasible, hollow = SLO unreachable.
    Right: the same candidates' p99 TTFT and TPOT as a multiple of their SLO threshold (<= 1
    meets it). Candidates that do not fit are counted in the title only.
    """
    try:
        cands = report["candidates"]
        slo = report["slo"]
    except (KeyError, TypeError):
        raise ValueError(f"{where}: not a kvsim size report (no 'candidates' / 'slo')") from None
    ran = [c for c in cands if c.get("trials")]
    if not ran:
        raise ValueError(f"{where}: no candidate was replayed (all {len(cands)} do not fit or "
                         "are invalid)")
    gpus = list(dict.fromkeys(c["gpu"] for c in cands))
    color = {g: COLORS[i % len(COLORS)] for i, g in enumerate(gpus)}

    fig = Figure(figsize=(12, 4.8))
    ax1, ax2 = fig.subplots(1, 2)
    for c in ran:
        face = color[c["gpu"]] if c["feasible"] else "none"
        kw = dict(marker=SIZE_MARKERS.get(c["tp"], "X"), s=46, edgecolors=color[c["gpu"]],
                  facecolors=face, linewidths=1.2)
        ax1.scatter(c["cost_per_hour"], 100.0 * c["slo_attainment"], **kw)
        for key, thr in (("ttft_p99_s", slo.get("ttft_p99_s")),
                         ("tpot_p99_s", slo.get("tpot_p99_s"))):
            if thr:
                ax2.scatter(c["cost_per_hour"], c[key] / thr,
                            **dict(kw, marker="o" if key == "ttft_p99_s" else "v"))
    best = next((c for c in cands if c["feasible"]), None)
    if best:
        ax1.annotate(f"cheapest: {best['replicas']} x {best['gpu']} TP{best['tp']} "
                     f"{best['kv_cache_dtype']}\n${best['cost_per_hour']:.2f}/h",
                     (best["cost_per_hour"], 100.0 * best["slo_attainment"]),
                     textcoords="offset points", xytext=(10, -30), fontsize=8,
                     arrowprops=dict(arrowstyle="->", lw=0.8))
    ax1.set_xlabel("cost, USD per hour (replicas x TP x price per GPU-hour)")
    ax1.set_ylabel("requests meeting the SLO, %")
    ax1.grid(alpha=0.3)
    ax2.axhline(1.0, color="k", lw=0.8, ls="--", label="SLO threshold")
    ax2.set_yscale("log")
    ax2.set_xlabel("cost, USD per hour")
    ax2.set_ylabel("p99 / threshold (o TTFT, v TPOT)")
    ax2.grid(alpha=0.3, which="both")
    for g in gpus:
        ax2.scatter([], [], color=color[g], label=g)
    for tp, m in SIZE_MARKERS.items():
        if any(c["tp"] == tp for c in ran):
            ax1.scatter([], [], marker=m, facecolors="none", edgecolors="k", label=f"TP {tp}")
    ax1.legend(fontsize=8, loc="lower right", title="filled = feasible", title_fontsize=8)
    ax2.legend(fontsize=8, loc="upper right")
    thresholds = ", ".join(f"{k.split('_')[0].upper()} p99 <= {v} s"
                           for k, v in slo.items() if v is not None)
    fig.suptitle(title or f"kvsim size: {report['model']} on {report['trace']} "
                 f"({thresholds}; {len(ran)} of {len(cands)} candidates fit, "
                 f"{report['feasible']} feasible)", fontsize=10)
    fig.tight_layout()
    return fig


def save(fig: Figure, path: Any, dpi: int = 110, fmt: Optional[str] = None) -> None:
    """Writes the figure (PNG, SVG, PDF, ... by the path's extension, or `fmt`)."""
    fig.savefig(path, dpi=dpi, bbox_inches="tight", format=fmt)
