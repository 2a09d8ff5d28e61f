"""Shared helpers for kvsim's plot scripts (python3 + matplotlib, Agg backend, no other deps)."""

import csv
import json
import os
import sys

try:
    import matplotlib
except ImportError:
    print(f"{os.path.basename(sys.argv[0])}: error: matplotlib not found: apt-get install "
          "python3-matplotlib (and run Debian's /usr/bin/python3)", file=sys.stderr)
    sys.exit(2)

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (backend must be chosen first)

COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#17becf"]


def die(message):
    """One-line error and exit status 2, like kvsim itself."""
    print(f"{os.path.basename(sys.argv[0])}: error: {message}", file=sys.stderr)
    sys.exit(2)


def read_csv(path, required=()):
    """Rows of a CSV as dicts; checks that the `required` columns exist."""
    try:
        with open(path, newline="") as f:
            reader = csv.DictReader(f)
            rows = list(reader)
            fields = reader.fieldnames or []
    except OSError as e:
        die(f"{path}: {e.strerror}")
    missing = [c for c in required if c not in fields]
    if missing:
        die(f"{path}: missing column(s) {', '.join(missing)} (is this the right kvsim CSV?)")
    return rows


def read_json(path):
    try:
        with open(path) as f:
            return json.load(f)
    except OSError as e:
        die(f"{path}: {e.strerror}")
    except json.JSONDecodeError as e:
        die(f"{path}:{e.lineno}: invalid JSON: {e.msg}")


def column(rows, name, cast=float, path="input"):
    """One column as a list; empty cells are skipped. Bad numbers name the line."""
    out = []
    for i, r in enumerate(rows):
        v = r.get(name, "")
        if v == "":
            continue
        try:
            out.append(cast(v))
        except ValueError:
            die(f"{path}:{i + 2}: field '{name}': not a number (got '{v}')")
    return out


def thin(xs, ys, max_points=3000, reduce=max):
    """At most max_points (x, y) pairs: consecutive buckets reduced with `reduce` (max keeps
    spikes visible; pass mean for a smoothed line)."""
    n = len(xs)
    if n <= max_points:
        return xs, ys
    step = n / max_points
    tx, ty = [], []
    for b in range(max_points):
        lo, hi = int(b * step), max(int((b + 1) * step), int(b * step) + 1)
        tx.append(xs[lo])
        ty.append(reduce(ys[lo:hi]))
    return tx, ty


def bin_by_time(ts, ys, bins=400, reduce=max):
    """Groups steps into `bins` equal time bins (steps are not evenly spaced in time) and reduces
    each non-empty bin with `reduce`; returns bin centres and values."""
    if not ts:
        return [], []
    t0, t1 = ts[0], ts[-1]
    width = (t1 - t0) / bins or 1.0
    groups = {}
    for t, y in zip(ts, ys):
        groups.setdefault(min(int((t - t0) / width), bins - 1), []).append(y)
    keys = sorted(groups)
    return [t0 + (k + 0.5) * width for k in keys], [reduce(groups[k]) for k in keys]


def mean(values):
    return sum(values) / len(values)


def cdf(values):
    """Sorted values and their empirical CDF (i/n)."""
    v = sorted(values)
    n = len(v)
    return v, [(i + 1) / n for i in range(n)]


def nearest_rank(sorted_values, q):
    """sorted[ceil(q*n)-1], the percentile kvsim reports (latency_stats.h)."""
    import math

    n = len(sorted_values)
    k = min(max(math.ceil(q * n - 1e-9 * max(1.0, q * n)), 1), n)
    return sorted_values[k - 1]


def add_figure_arguments(ap, dpi=110):
    """The output options every plot script takes: -o/--output, --title, --dpi and --format
    (png, svg, ...; default the output's extension: a caller writing to a temporary name, as
    `kvsim size --plot` does, passes it)."""
    ap.add_argument("-o", "--output", required=True, help="PNG or SVG path")
    ap.add_argument("--title", default="")
    ap.add_argument("--dpi", type=int, default=dpi)
    ap.add_argument("--format", default=None,
                    help="png, svg, ... (default: the output's extension)")


def save(fig, path, dpi=110, fmt=None):
    """Saves PNG/SVG by extension (or `fmt`); warns when a PNG exceeds 300 KB (README budget)."""
    out_dir = os.path.dirname(path)
    if out_dir:
        os.makedirs(out_dir, exist_ok=True)
    fig.savefig(path, dpi=dpi, bbox_inches="tight", format=fmt)
    plt.close(fig)
    size = os.path.getsize(path)
    png = fmt == "png" if fmt else path.endswith(".png")
    note = " (over 300 KB: lower --dpi)" if png and size > 300_000 else ""
    print(f"wrote {path} ({size / 1024:.0f} KiB){note}")
