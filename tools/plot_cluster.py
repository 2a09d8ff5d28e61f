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

from plot_common import add_figure_arguments, figure, plots, read_csv, read_json, save, table


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--timeline", required=True, help="kvsim replay --replicas N --timeline CSV")
    ap.add_argument("--summary", help="kvsim replay --json file (formula line, SLO thresholds)")
    ap.add_argument("--requests", help="kvsim replay --requests CSV (latency CDFs)")
    ap.add_argument("--bins", type=int, default=240, help="time bins for the time series")
    add_figure_arguments(ap)
    args = ap.parse_args()

    timeline = table(read_csv(args.timeline, plots.CLUSTER_TIMELINE), plots.CLUSTER_TIMELINE,
                     path=args.timeline)
    summary = read_json(args.summary) if args.summary else {}
    requests = None
    if args.requests:
        requests = table(read_csv(args.requests, plots.REQUESTS), plots.REQUESTS[1:],
                         plots.REQUESTS[:1], args.requests)
    fig = figure(plots.cluster_figure, timeline, summary, requests, bins=args.bins,
                 title=args.title, where=args.timeline, requests_where=args.requests)
    save(fig, args.output, args.dpi, args.format)


if __name__ == "__main__":
    main()
