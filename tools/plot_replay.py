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

from plot_common import add_figure_arguments, figure, plots, read_csv, read_json, save, table


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--timeline", required=True, help="kvsim replay --timeline CSV")
    ap.add_argument("--summary", help="kvsim replay --json file (formula lines, block size)")
    ap.add_argument("--requests", help="kvsim replay --requests CSV (latency CDFs)")
    ap.add_argument("--block-size", type=int, help="block size when no --summary is given")
    ap.add_argument("--bins", type=int, default=360, help="time bins for the time series")
    add_figure_arguments(ap)
    args = ap.parse_args()

    timeline = table(read_csv(args.timeline, plots.REPLAY_TIMELINE), plots.REPLAY_TIMELINE,
                     path=args.timeline)
    summary = read_json(args.summary) if args.summary else {}
    requests = None
    if args.requests:
        requests = table(read_csv(args.requests, plots.REQUESTS), plots.REQUESTS[1:],
                         plots.REQUESTS[:1], args.requests)
    fig = figure(plots.replay_figure, timeline, summary, requests, block_size=args.block_size,
                 bins=args.bins, title=args.title, where=args.timeline,
                 requests_where=args.requests)
    save(fig, args.output, args.dpi, args.format)


if __name__ == "__main__":
    main()
