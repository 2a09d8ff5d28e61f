#!/usr/bin/env python3
"""Writes one real vLLM run (calibration/vllm-h100-runs/<run>/) as a `kvsim calibrate` run file.

The run file ("kvsim-calibration-run/1", docs/calibrate.md) holds:

- "trace": the run's workload as make_trace.py builds it (written next to the run file);
- "settings": exactly what validate.py passes to `kvsim replay` (the model's config.json, card
  h100-80g, gpu_memory_utilization 0.9, and the run's TP, max_num_batched_tokens, max_num_seqs,
  max_model_len from exp-config.yaml);
- "groups": one per load stage, with the stage's arrival window on the trace's clock (kvsim
  rebases arrivals to the first request, so the windows are too; a window runs from halfway
  through the idle gap before the stage to halfway through the gap after it) and the measured
  TTFT, TPOT and E2E mean/p50/p90 in seconds, TPOT being the decode time per output token after
  the first (measured.py's conversion of inference-perf's TPOT).

Stages validate.py flags as overloaded (over 1 % of requests hit the 300 s client timeout) are
left out: the measurement covers only the survivors, and kvsim models no client timeout or
abort, so no coefficient could reproduce them. A run with no other stage gets no run file.
"""

import argparse
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import make_trace  # noqa: E402
import measured  # noqa: E402
import validate  # noqa: E402
from located import RunError  # noqa: E402
from stats import METRICS, STATS  # noqa: E402

FORMAT = "kvsim-calibration-run/1"


def stage_windows(records):
    """{stage: (from_s, to_s)} on the rebased clock (first arrival = 0), arrival_to exclusive."""
    base = records[0]["arrival_s"]
    first, last = {}, {}
    for r in records:
        first.setdefault(r["stage"], r["arrival_s"])
        last[r["stage"]] = r["arrival_s"]
    stages = sorted(first)
    out = {}
    for i, s in enumerate(stages):
        lo = 0.0 if i == 0 else (last[stages[i - 1]] + first[s]) / 2 - base
        hi = ((last[s] + first[stages[i + 1]]) / 2 if i + 1 < len(stages)
              else last[s] + 1.0) - base
        out[s] = (round(lo, 6), round(hi, 6))
    return out


def run_document(runs_dir, run, trace_name, out_dir, seed, stage_gap_s):
    """(run file as a dict or None when no stage is comparable, trace records)."""
    run_dir = os.path.join(runs_dir, run)
    server = measured.read_server(run_dir)
    workload = make_trace.read_workload(run_dir)
    meas = measured.read_stages(run_dir, workload["output_len"])
    overloaded = validate.overloaded_stages(meas)
    records = make_trace.make_records(workload, seed, stage_gap_s)
    windows = stage_windows(records)
    groups = []
    for stage in sorted(meas):
        if overloaded[stage]:
            continue
        g = {"name": f"stage {stage} ({workload['stages'][stage][0]:g} req/s)",
             "arrival_from_s": windows[stage][0], "arrival_to_s": windows[stage][1]}
        for metric in METRICS:
            for stat in STATS:
                g[f"{metric}_{stat}_s"] = meas[stage][metric][stat]
        groups.append(g)
    if not groups:
        return None, records
    config = validate.model_config(runs_dir, server["model"])
    doc = {
        "format": FORMAT,
        "source": f"{os.path.relpath(run_dir, validate.REPO)} via "
                  f"tools/latency_validation/make_run.py --seed {seed}",
        "trace": trace_name,
        "settings": {
            "config": os.path.relpath(os.path.abspath(config), os.path.abspath(out_dir)),
            "gpu": validate.GPU,
            "gpu_memory_utilization": float(validate.GPU_MEMORY_UTILIZATION),
            "tensor_parallel_size": server["tensor_parallelism"],
            "max_num_batched_tokens": server["max_num_batched_tokens"],
            "max_num_seqs": server["max_num_seqs"],
            "max_model_len": server["max_model_len"],
        },
        "groups": groups,
    }
    return doc, records


def write_run(runs_dir, run, out_dir, seed=0, stage_gap_s=60.0):
    """Writes OUT_DIR/<run>.json and its trace; returns the run file's path, or None (skipped)."""
    os.makedirs(out_dir, exist_ok=True)
    trace_name = run + ".trace.jsonl"
    doc, records = run_document(runs_dir, run, trace_name, out_dir, seed, stage_gap_s)
    if doc is None:
        return None
    make_trace.write_trace(records, os.path.join(out_dir, trace_name))
    path = os.path.join(out_dir, run + ".json")
    with open(path, "w", encoding="utf-8") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")
    return path


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run_dirs", nargs="+", help="calibration/vllm-h100-runs/<run>")
    ap.add_argument("-o", "--out-dir", required=True, help="directory for run files and traces")
    ap.add_argument("--seed", type=int, default=0, help="trace seed (make_trace.py)")
    ap.add_argument("--stage-gap", type=float, default=60.0, help="as make_trace.py")
    a = ap.parse_args(argv)
    try:
        for d in a.run_dirs:
            d = os.path.normpath(d)
            path = write_run(os.path.dirname(d), os.path.basename(d), a.out_dir, a.seed,
                             a.stage_gap)
            print(path if path else f"{d}: skipped (every stage overloaded)")
    except RunError as e:
        print(f"make_run: error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
