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

from plot_common import COLORS, add_figure_arguments, die, plt, read_json, save

MARKERS = {1: "o", 2: "s", 4: "^", 8: "D", 16: "P"}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("json")
    add_figure_arguments(ap)
    args = ap.parse_args()

    report = read_json(args.json)
    try:
        cands = report["candidates"]
        slo = report["slo"]
    except (KeyError, TypeError):
        die(f"{args.json}: not a kvsim size report (no 'candidates' / 'slo')")
    ran = [c for c in cands if c.get("trials")]
    if not ran:
        die(f"{args.json}: no candidate was replayed (all {len(cands)} do not fit or are invalid)")
    gpus = list(dict.fromkeys(c["gpu"] for c in cands))
    color = {g: COLORS[i % len(COLORS)] for i, g in enumerate(gpus)}

    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(12, 4.8))
    for c in ran:
        face = color[c["gpu"]] if c["feasible"] else "none"
        kw = dict(marker=MARKERS.get(c["tp"], "X"), s=46, edgecolors=color[c["gpu"]],
                  facecolors=face, linewidths=1.2)
        ax1.scatter(c["cost_per_hour"], 100.0 * c["slo_attainment"], **kw)
        for key, thr, dy in (("ttft_p99_s", slo.get("ttft_p99_s"), 0),
                             ("tpot_p99_s", slo.get("tpot_p99_s"), 0)):
            if thr:
                ax2.scatter(c["cost_per_hour"], c[key] / thr + dy,
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
    for tp, m in MARKERS.items():
        if any(c["tp"] == tp for c in ran):
            ax1.scatter([], [], marker=m, facecolors="none", edgecolors="k", label=f"TP {tp}")
    ax1.legend(fontsize=8, loc="lower right", title="filled = feasible", title_fontsize=8)
    ax2.legend(fontsize=8, loc="upper right")
    thresholds = ", ".join(f"{k.split('_')[0].upper()} p99 <= {v} s"
                           for k, v in slo.items() if v is not None)
    fits = len(ran)
    fig.suptitle(args.title or f"kvsim size: {report['model']} on {report['trace']} "
                 f"({thresholds}; {fits} of {len(cands)} candidates fit, "
                 f"{report['feasible']} feasible)", fontsize=10)
    fig.tight_layout()
    save(fig, args.output, args.dpi, args.format)


if __name__ == "__main__":
    main()
