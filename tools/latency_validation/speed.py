#!/usr/bin/env python3
"""Replay speed of the shipped roofline against roofline:v0, in one sitting.

For each chosen run, `kvsim replay` of its workload (validate.py's command line, per-request CSV
written) with `--step-time roofline` (h100-80g: the fitted per-card defaults) and with
`--step-time roofline:v0`, alternated, --repeats times each; the median wall time of each and
their ratio, with the load average before and after. Writes --out (JSON), which
docs/latency-validation.md shows (compare.py reads tools/latency_validation/speed.json).

  python3 tools/latency_validation/speed.py --out tools/latency_validation/speed.json
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import make_trace  # noqa: E402
import measured  # noqa: E402
import validate  # noqa: E402

RUNS = ["llama-2-7b-tp1-general", "mixtral-8x7b-v0-1-tp2-general"]
SPECS = ["roofline:v0", "roofline"]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    validate.add_common_args(ap)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--out", required=True)
    a = ap.parse_args(argv)
    rows = []
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="kvsim-speed-") as tmp:
        for name in RUNS:
            run = validate.find_runs(a.runs_dir, [name])[0]
            run_dir = os.path.join(a.runs_dir, run)
            server = measured.read_server(run_dir)
            workload = make_trace.read_workload(run_dir)
            records = make_trace.make_records(workload, 0, 60.0)
            trace = os.path.join(tmp, "trace.jsonl")
            make_trace.write_trace(records, trace)
            config = validate.model_config(a.runs_dir, server["model"])
            times = {s: [] for s in SPECS}
            for _ in range(a.repeats):
                for s in SPECS:
                    t0 = time.perf_counter()
                    validate.replay(a.kvsim, trace, server, config, s,
                                    os.path.join(tmp, "requests.csv"))
                    times[s].append(time.perf_counter() - t0)
            base = statistics.median(times["roofline:v0"])
            for s in SPECS:
                med = statistics.median(times[s])
                rows.append({"what": f"{validate.find_runs(a.runs_dir, [name])[0].split('-', 2)[-1]}"
                                     f" ({len(records)} requests)",
                             "spec": s, "median_s": med, "ratio": med / base,
                             "all_s": [round(t, 4) for t in times[s]]})
    load_after = os.getloadavg()
    note = (f"`python3 tools/latency_validation/speed.py` at kvsim `{validate.git_commit()}`: "
            f"`kvsim replay` wall time (process start to exit, per-request CSV written), the two "
            f"specs alternated, {a.repeats} times each, median; load average (1 min) "
            f"{load_before[0]:.1f} before and {load_after[0]:.1f} after, on the two shared CPU "
            "cores. Target (issue 25): the shipped default ≤ 1.5× today's roofline.")
    with open(a.out, "w", encoding="utf-8") as f:
        json.dump({"note": note, "rows": rows}, f, indent=1)
        f.write("\n")
    for r in rows:
        print(f"{r['what']:45} {r['spec']:12} {r['median_s']:.3f} s  x{r['ratio']:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
