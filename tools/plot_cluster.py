#!/usr/bin/env python3
"""Plots one cluster `kvsim replay --replicas N`: per-replica concurrency and KV usage over time,
latency CDFs against the SLO lines.

  kvsim replay TRACE --replicas 4 --router kv-aware --slo-ttft-p99 2 \\
      --json run.json --timeline timeline.csv --requests requests.csv
  python3 tools/plot_cluster.py --timeline timeline.csv --summary run.json \\
      [--requests requests.csv] -o docs/figures/cluster.png

Top left: running requests per replica (mean per time bin, one line per replica) with the
capacity formula's per-replica N_seq. Top right: KV blocks in use per replica (% of its pool).
Bottom: CDFs of TTFT, TPOT and end-to-end latency over all finished requests, with the p99 and
the SLO threshold (from the JSON's "slo") marked. Needs the cluster CSVs (a `replica` column:
--replicas 2 or more).
"""

import argparse

from plot_common import (COLORS, add_figure_arguments, cdf, column, die, mean, nearest_rank, plt,
                         read_csv, read_json, save)

TIMELINE = ["replica", "time_s", "running", "used_blocks", "free_blocks"]
REQUESTS = ["status", "arrival_s", "first_token_s", "finish_s", "output_tokens"]


def binned(ts, ys, t0, width, bins):
    """Mean of ys per bin of a time grid shared by all replicas; returns centres and values."""
    groups = {}
    for t, y in zip(ts, ys):
        groups.setdefault(min(int((t - t0) / width), bins - 1), []).append(y)
    keys = sorted(groups)
    return [t0 + (k + 0.5) * width for k in keys], [mean(groups[k]) for k in keys]


def replica_color(i, n):
    if n <= len(COLORS):
        return COLORS[i]
    return plt.get_cmap("viridis")(i / max(n - 1, 1))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--timeline", required=True, help="kvsim replay --replicas N --timeline CSV")
    ap.add_argument("--summary", help="kvsim replay --json file (formula line, SLO thresholds)")
    ap.add_argument("--requests", help="kvsim replay --requests CSV (latency CDFs)")
    ap.add_argument("--bins", type=int, default=240, help="time bins for the time series")
    add_figure_arguments(ap)
    args = ap.parse_args()
    if args.bins < 1:
        die(f"--bins {args.bins}: must be >= 1")

    tl = read_csv(args.timeline, TIMELINE)
    if not tl:
        die(f"{args.timeline}: no steps")
    summary = read_json(args.summary) if args.summary else {}
    replica = column(tl, "replica", int, args.timeline)
    t = [v / 60 for v in column(tl, "time_s", float, args.timeline)]
    running = column(tl, "running", int, args.timeline)
    used = column(tl, "used_blocks", int, args.timeline)
    free = column(tl, "free_blocks", int, args.timeline)
    replicas = sorted(set(replica))
    t0, t1 = min(t), max(t)
    width = (t1 - t0) / args.bins or 1.0

    with_latency = bool(args.requests)
    fig = plt.figure(figsize=(13, 8 if with_latency else 4.2))
    grid = fig.add_gridspec(2 if with_latency else 1, 6)
    ax_conc = fig.add_subplot(grid[0, 0:3])
    ax_kv = fig.add_subplot(grid[0, 3:6])
    n = len(replicas)
    for k, r in enumerate(replicas):
        idx = [i for i, x in enumerate(replica) if x == r]
        ts = [t[i] for i in idx]
        color = replica_color(k, n)
        label = f"replica {r}" if n <= 8 else None
        tx, run = binned(ts, [running[i] for i in idx], t0, width, args.bins)
        ax_conc.plot(tx, run, color=color, lw=0.9, alpha=0.85, label=label)
        usage = [100 * used[i] / (used[i] + free[i]) if used[i] + free[i] else 0 for i in idx]
        tx, u = binned(ts, usage, t0, width, args.bins)
        ax_kv.plot(tx, u, color=color, lw=0.9, alpha=0.85, label=label)
    if "formula_max_concurrency" in summary:
        ax_conc.axhline(summary["formula_max_concurrency"], color="black", ls="--", lw=1.2,
                        label=f"formula N_seq per replica = {summary['formula_max_concurrency']}")
    router = summary.get("router", "")
    ax_conc.set_title(f"Running requests per replica ({n} replicas{', ' + router if router else ''})")
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

    if with_latency:
        rq = [r for r in read_csv(args.requests, REQUESTS) if r["status"] == "finished"]
        if not rq:
            die(f"{args.requests}: no finished requests")
        ttft = [float(r["first_token_s"]) - float(r["arrival_s"]) for r in rq]
        e2e = [float(r["finish_s"]) - float(r["arrival_s"]) for r in rq]
        tpot = [(float(r["finish_s"]) - float(r["first_token_s"])) / (int(r["output_tokens"]) - 1)
                for r in rq if int(r["output_tokens"]) >= 2]
        slo = summary.get("slo") or {}
        metrics = (("TTFT", ttft, slo.get("ttft_p99_s")), ("TPOT", tpot, slo.get("tpot_p99_s")),
                   ("end-to-end", e2e, slo.get("e2e_p99_s")))
        for k, (name, values, threshold) in enumerate(metrics):
            ax = fig.add_subplot(grid[1, 2 * k:2 * k + 2])
            if not values:
                ax.set_title(f"{name}: no values")
                continue
            x, y = cdf(values)
            x = [max(v, 1e-4) for v in x]
            ax.plot(x, y, color=COLORS[k], lw=1.2)
            p99 = nearest_rank(sorted(values), 0.99)
            ax.axvline(max(p99, 1e-4), color="gray", ls=":", lw=1,
                       label=f"p99 = {p99 * 1e3:.1f} ms" if p99 < 1 else f"p99 = {p99:.2f} s")
            if threshold is not None:
                verdict = "met" if p99 <= threshold else "missed"
                ax.axvline(threshold, color=COLORS[1], ls="--", lw=1.4,
                           label=f"SLO p99 <= {threshold:g} s ({verdict})")
                ax.axhline(0.99, color=COLORS[1], ls=":", lw=0.8)
            if x[-1] / x[0] > 20:  # log only when the values span decades
                ax.set_xscale("log")
            ax.set_xlabel(f"{name} (s)")
            ax.set_ylabel("fraction of requests")
            ax.set_title(f"{name} CDF ({len(values)} requests)")
            ax.grid(alpha=0.3)
            ax.legend(fontsize=8, loc="lower right")
    if args.title:
        fig.suptitle(args.title)
    fig.tight_layout()
    save(fig, args.output, args.dpi, args.format)


if __name__ == "__main__":
    main()
