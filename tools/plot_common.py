"""Shared helpers for kvsim's plot scripts (python3 + matplotlib, Agg backend, no other deps).

The figures themselves are python/kvsim/_plots.py, the one copy the Python package's `.plot()`
methods draw with too: loaded here from the source tree this tools/ folder belongs to, else
from an installed kvsim. The scripts only read files, check them and write the image.
"""

import csv
import importlib.util
import json
import math
import os
import sys

try:
    import matplotlib
except ImportError:
    print(f"{os.path.basename(sys.argv[0])}: error: matplotlib not found: apt-get install "
          "python3-matplotlib (and run Debian's /usr/bin/python3)", file=sys.stderr)
    sys.exit(2)

matplotlib.use("Agg")


def die(message):
    """One-line error and exit status 2, like kvsim itself."""
    print(f"{os.path.basename(sys.argv[0])}: error: {message}", file=sys.stderr)
    sys.exit(2)


def _load_plots():
    here = os.path.dirname(os.path.abspath(__file__))
    source = os.path.join(here, os.pardir, "python", "kvsim", "_plots.py")
    if os.path.exists(source):
        spec = importlib.util.spec_from_file_location("kvsim_plots", source)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module
    try:
        from kvsim import _plots
    except ImportError:
        die(f"the figure code is not found: neither {os.path.normpath(source)} (a kvsim source "
            "tree) nor an installed kvsim package")
    return _plots


#: python/kvsim/_plots.py: replay_figure, cluster_figure, sweep_figure, size_figure.
plots = _load_plots()


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


def table(rows, numeric, text=(), path="input"):
    """CSV rows as the columns the figure code takes: each `numeric` column as numbers (int
    where the cell is one, an empty cell as NaN; a bad number names the line), each `text`
    column as the strings."""
    cols = {name: [] for name in list(numeric) + list(text)}
    for i, r in enumerate(rows):
        for name in numeric:
            v = r.get(name, "")
            if v == "":
                cols[name].append(math.nan)
                continue
            try:
                cols[name].append(int(v))
            except ValueError:
                try:
                    cols[name].append(float(v))
                except ValueError:
                    die(f"{path}:{i + 2}: field '{name}': not a number (got '{v}')")
        for name in text:
            cols[name].append(r.get(name, ""))
    return cols


def figure(make, *args, **kwargs):
    """`make(*args, **kwargs)`, its ValueError (data that cannot be drawn) as die()."""
    try:
        return make(*args, **kwargs)
    except ValueError as e:
        die(str(e))


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
    plots.save(fig, path, dpi, fmt)
    size = os.path.getsize(path)
    png = fmt == "png" if fmt else path.endswith(".png")
    note = " (over 300 KB: lower --dpi)" if png and size > 300_000 else ""
    print(f"wrote {path} ({size / 1024:.0f} KiB){note}")
