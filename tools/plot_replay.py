#!/usr/bin/env python3
"""Plots one `kvsim replay`: concurrency, KV usage and padding over time, latency CDFs.

  kvsim replay TRACE ... --json run.json --timeline timeline.csv --requests requests.csv
  python3 tools/plot_replay.py --timeline timeline.csv [--summary run.json]
                               [--requests requests.csv] -o docs/figures/replay.png

Top left: running and waiting requests per step, with the capacity formula's lines (the lesson's
N_seq and vLLM's "Maximum concurrency", from the JSON summary). Top right: KV blocks in use (% of
the pool) and last-block padding (% of used KV). Bottom: CDFs of TTFT, TPOT and end-to-end
latency (from the requests CSV), with p50/p99 marked.
"""

import argparse

from plot_common import (COLORS, add_figure_arguments, bin_by_time, cdf, column, die, mean,
                         nearest_rank, plt, read_csv, read_json, save)

TIMELINE = ["time_s", "running", "waiting", "used_blocks", "free_blocks", "padding_tokens"]
REQUESTS = ["status", "arrival_s", "first_token_s", "finish_s", "output_tokens"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--timeline", required=True, help="kvsim replay --timeline CSV")
    ap.add_argument("--summary", help="kvsim replay --json file (formula lines, block size)")
    ap.add_argument("--requests", help="kvsim replay --requests CSV (latency CDFs)")
    ap.add_argument("--block-size", type=int, help="block size when no --summary is given")
    ap.add_argument("--bins", type=int, default=360, help="time bins for the time series")
    add_figure_arguments(ap)
    args = ap.parse_args()

    tl = read_csv(args.timeline, TIMELINE)
    if not tl:
        die(f"{args.timeline}: no steps")
    summary = read_json(args.summary) if args.summary else {}
    block_size = args.block_size or summary.get("block_size")

    t = [v / 60 for v in column(tl, "time_s", float, args.timeline)]
    running = column(tl, "running", int, args.timeline)
    waiting = column(tl, "waiting", int, args.timeline)
    used = column(tl, "used_blocks", int, args.timeline)
    free = column(tl, "free_blocks", int, args.timeline)
    padding = column(tl, "padding_tokens", int, args.timeline)

    with_latency = bool(args.requests)
    fig = plt.figure(figsize=(13, 8 if with_latency else 4.2))
    grid = fig.add_gridspec(2 if with_latency else 1, 6)
    ax_conc = fig.add_subplot(grid[0, 0:3])
    ax_kv = fig.add_subplot(grid[0, 3:6])

    tx, r_mean = bin_by_time(t, running, args.bins, mean)
    _, r_max = bin_by_time(t, running, args.bins, max)
    _, w_mean = bin_by_time(t, waiting, args.bins, mean)
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
    tx, u_mean = bin_by_time(t, usage, args.bins, mean)
    _, u_max = bin_by_time(t, usage, args.bins, max)
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
    tx, p_mean = bin_by_time(t, pad, args.bins, mean)
    ax_pad.plot(tx, p_mean, color=COLORS[5], lw=0.8, alpha=0.8, label=label + " (mean per bin)")
    ax_pad.set_ylabel(ylabel)
    ax_pad.set_ylim(bottom=0)
    lines = ax_kv.get_lines() + ax_pad.get_lines()
    ax_kv.legend(lines, [ln.get_label() for ln in lines], fontsize=8, loc="upper left",
                 framealpha=0.9)
    ax_kv.set_title("KV usage and last-block padding")

    if with_latency:
        rq = [r for r in read_csv(args.requests, REQUESTS) if r["status"] == "finished"]
        if not rq:
            die(f"{args.requests}: no finished requests")
        ttft = [float(r["first_token_s"]) - float(r["arrival_s"]) for r in rq]
        e2e = [float(r["finish_s"]) - float(r["arrival_s"]) for r in rq]
        tpot = [(float(r["finish_s"]) - float(r["first_token_s"])) / (int(r["output_tokens"]) - 1)
                for r in rq if int(r["output_tokens"]) >= 2]
        for k, (name, values) in enumerate((("TTFT", ttft), ("TPOT", tpot), ("end-to-end", e2e))):
            ax = fig.add_subplot(grid[1, 2 * k:2 * k + 2])
            x, y = cdf(values)
            x = [max(v, 1e-4) for v in x]
            ax.plot(x, y, color=COLORS[k], lw=1.2)
            for q, ls in ((0.5, "--"), (0.99, ":")):
                v = nearest_rank(sorted(values), q)
                ax.axvline(max(v, 1e-4), color="gray", ls=ls, lw=1,
                           label=f"p{int(q * 100)} = {v * 1e3:.1f} ms" if v < 1 else
                           f"p{int(q * 100)} = {v:.2f} s")
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
