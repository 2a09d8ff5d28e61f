#!/usr/bin/env python3
"""Plots a `kvsim sweep --csv` file: padding and concurrency against block size.

  python3 tools/plot_sweep.py sweep.csv -o docs/figures/sweep.png [--title TEXT]

Left: padding as a share of used KV, measured (mean over steps) and the analytic expectation.
Middle: padding tokens per live sequence, measured, exact expectation and (bs-1)/2.
Right: mean/peak running requests and vLLM's "Maximum concurrency" line.
When other axes are swept too, each combination gets its own line.
"""

import argparse
from collections import OrderedDict

from plot_common import COLORS, add_figure_arguments, column, plt, read_csv, save

REQUIRED = [
    "block_size", "num_gpu_blocks", "kv_cache_dtype", "max_num_seqs", "max_num_batched_tokens",
    "padding_fraction_mean", "expected_padding_fraction", "padding_tokens_per_seq",
    "expected_padding_per_seq", "expected_padding_per_seq_uniform", "mean_running",
    "peak_running", "vllm_max_concurrency", "gpu_memory_utilization",
]


def series_key(row, varying):
    return ", ".join(f"{k}={row[k]}" for k in varying)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("csv")
    add_figure_arguments(ap)
    args = ap.parse_args()

    rows = read_csv(args.csv, REQUIRED)
    if not rows:
        ap.error(f"{args.csv}: no rows")
    others = ["kv_cache_dtype", "max_num_seqs", "max_num_batched_tokens", "gpu_memory_utilization"]
    varying = [k for k in others if len({r[k] for r in rows}) > 1]
    # Without a block-count axis the pool size follows the block size; only a swept pool varies.
    groups = OrderedDict()
    for r in rows:
        groups.setdefault(series_key(r, varying) or "sweep", []).append(r)

    fig, axes = plt.subplots(1, 3, figsize=(14, 4.2))
    ax_frac, ax_tok, ax_conc = axes
    for i, (label, rs) in enumerate(groups.items()):
        rs = sorted(rs, key=lambda r: int(r["block_size"]))
        bs = column(rs, "block_size", int, args.csv)
        c = COLORS[i % len(COLORS)]
        suffix = "" if label == "sweep" else f" ({label})"
        ax_frac.plot(bs, [100 * v for v in column(rs, "padding_fraction_mean", float, args.csv)],
                     "o-", color=c, label="measured" + suffix)
        ax_frac.plot(bs, [100 * v for v in column(rs, "expected_padding_fraction", float, args.csv)],
                     "x", color="black", ms=8, ls="none", label="expected (analytic)" + suffix)
        ax_tok.plot(bs, column(rs, "padding_tokens_per_seq", float, args.csv), "o-", color=c,
                    label="measured" + suffix)
        ax_tok.plot(bs, column(rs, "expected_padding_per_seq", float, args.csv), "x", color="black",
                    ms=8, ls="none", label="expected (trace lengths)" + suffix)
        ax_conc.plot(bs, column(rs, "mean_running", float, args.csv), "o-", color=c,
                     label="mean running" + suffix)
        ax_conc.plot(bs, column(rs, "peak_running", float, args.csv), "^:", color=c,
                     label="peak running" + suffix)
        ax_conc.plot(bs, column(rs, "vllm_max_concurrency", float, args.csv), "s--", color=c,
                     alpha=0.5, label="vLLM max concurrency" + suffix)
    all_bs = sorted({int(r["block_size"]) for r in rows})
    ax_tok.plot(all_bs, [(b - 1) / 2 for b in all_bs], color="gray", lw=1, ls=":",
                label="(bs-1)/2")
    for ax, title, ylabel in (
        (ax_frac, "Padding share of used KV", "padding / used KV (%)"),
        (ax_tok, "Padding per live sequence", "tokens"),
        (ax_conc, "Concurrency", "requests"),
    ):
        ax.set_xscale("log", base=2)
        ax.set_xticks(all_bs)
        ax.set_xticklabels([str(b) for b in all_bs])
        ax.set_xlabel("block size (tokens)")
        ax.set_ylabel(ylabel)
        ax.set_title(title)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    ax_tok.set_yscale("symlog", linthresh=1)
    ax_tok.set_ylim(bottom=0)
    if args.title:
        fig.suptitle(args.title)
    fig.tight_layout()
    save(fig, args.output, args.dpi, args.format)


if __name__ == "__main__":
    main()
