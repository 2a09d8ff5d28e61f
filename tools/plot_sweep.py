#!/usr/bin/env python3
"""Plots a `kvsim sweep --csv` file: padding and concurrency against block size.

  python3 tools/plot_sweep.py sweep.csv -o docs/figures/sweep.png [--title TEXT]

Left: padding as a share of used KV, measured (mean over steps) and the analytic expectation.
Middle: padding tokens per live sequence, measured, exact expectation and (bs-1)/2.
Right: mean/peak running requests and vLLM's "Maximum concurrency" line.
When other axes are swept too, each combination gets its own line.
"""

import argparse

from plot_common import add_figure_arguments, die, figure, plots, read_csv, save, table

TEXT = ["kv_cache_dtype"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("csv")
    add_figure_arguments(ap)
    args = ap.parse_args()
    rows = read_csv(args.csv, plots.SWEEP)
    if not rows:
        die(f"{args.csv}: no rows")
    numeric = [c for c in plots.SWEEP if c not in TEXT]
    fig = figure(plots.sweep_figure, table(rows, numeric, TEXT, args.csv), title=args.title,
                 where=args.csv)
    save(fig, args.output, args.dpi, args.format)


if __name__ == "__main__":
    main()
