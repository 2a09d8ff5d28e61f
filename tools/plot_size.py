#!/usr/bin/env python3
"""Plots a `kvsim size --json` report: cost per hour against SLO attainment and p99 latency.

  python3 tools/plot_size.py size.json -o docs/figures/size.png [--title TEXT] [--format png]

Left: each planned candidate at its reported replica count (the fewest that meet the SLO, or
--max-replicas when none does): cost per hour against the share of requests that met every
threshold. Colour = GPU, marker = TP, filled = feasible, hollow = SLO unreachable.
Right: the same candidates' p99 TTFT and TPOT as a multiple of their SLO threshold (<= 1 meets
it). Candidates that do not fit are listed in the title count only.
"""

import argparse

from plot_common import add_figure_arguments, figure, plots, read_json, save


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("json")
    add_figure_arguments(ap)
    args = ap.parse_args()
    fig = figure(plots.size_figure, read_json(args.json), title=args.title, where=args.json)
    save(fig, args.output, args.dpi, args.format)


if __name__ == "__main__":
    main()
