#!/usr/bin/env python3
"""Cost of the Python layer (issue #13): a whole Azure conv replay through kvsim.replay against
the CLI's engine time, and the export of a replay's timeline to a DataFrame.

    PYTHONPATH=build/<dir>/python python3 bench/python_overhead.py --cli build/<dir>/cli/kvsim

Measures, each the best of --repeat runs:
  * cli_engine_s: `kvsim replay --json` wall_seconds (run_replay alone, as the CLI reports it);
  * py_call_s: kvsim.replay(trace, ...) from call to return (the trace read beforehand), and
    py_engine_s, the same call's wall_seconds: py_call_s - py_engine_s is the Python layer
    (option checks, the worker thread and signal polling, the JSON summary and its parsing);
    overhead_vs_cli = (py_call_s - cli_engine_s) / cli_engine_s (target <= 5 %);
  * timeline_frame_ms: the per-step records of a replay (--timeline-steps of them, about 45k
    by default) as a pandas DataFrame (target <= 50 ms), and requests_frame_ms likewise.
Prints one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
TRACE = ROOT / "traces" / "AzureLLMInferenceTrace_conv.csv"
# The README quick start's replay: the lesson's best plan.
LESSON = dict(model="qwen2.5-7b", gpu="rtx4090", gpu_memory_utilization=0.90, overhead_gib=1.6,
              weights_gib=5.5, kv_cache_dtype="fp8", max_model_len=8192)


def cli_flags(kw: dict) -> list:
    return [a for k, v in kw.items() for a in ("--" + k.replace("_", "-"), str(v))]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cli", required=True, help="the kvsim executable of the same build")
    ap.add_argument("--trace", default=str(TRACE))
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--frame-repeat", type=int, default=20)
    ap.add_argument("--timeline-max-num-batched-tokens", type=int, default=640,
                    help="token budget of the timeline replay (640: ~45k steps on Azure conv)")
    args = ap.parse_args()

    import kvsim
    from kvsim import _kvsim, _results

    out: dict = {"trace": args.trace, "repeat": args.repeat, "cpus": os.cpu_count(),
                 "loadavg_before": os.getloadavg()}

    t0 = time.perf_counter()
    trace = kvsim.read_trace(args.trace)
    out["read_trace_s"] = time.perf_counter() - t0
    # CLI and Python runs alternate, so a change in machine load hits both alike.
    cli_engine, py_call, py_engine = [], [], []
    with tempfile.TemporaryDirectory() as d:
        for _ in range(args.repeat):
            summary = pathlib.Path(d) / "s.json"
            subprocess.run([args.cli, "replay", args.trace, *cli_flags(LESSON), "--no-progress",
                            "--json", str(summary)], check=True, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)
            cli_engine.append(json.loads(summary.read_text())["wall_seconds"])
            t0 = time.perf_counter()
            r = kvsim.replay(trace, **LESSON)
            py_call.append(time.perf_counter() - t0)
            py_engine.append(r.wall_seconds)
    out["cli_engine_all_s"], out["py_call_all_s"] = cli_engine, py_call
    best = min(range(args.repeat), key=lambda i: py_call[i])
    out.update(
        requests=r["requests"], steps=r.steps,
        cli_engine_s=min(cli_engine), py_call_s=py_call[best], py_engine_s=py_engine[best],
        python_layer_s=py_call[best] - py_engine[best],
        overhead_vs_cli=(py_call[best] - min(cli_engine)) / min(cli_engine),
        overhead_vs_own_engine=(py_call[best] - py_engine[best]) / py_engine[best])

    _, _, raw_t, raw_r = _kvsim.replay(
        trace._handle, dict(LESSON), {},
        {"timeline": True, "requests": True,
         "max_num_batched_tokens": args.timeline_max_num_batched_tokens})
    out["timeline_steps"] = int(len(raw_t["step"]))
    for name, fn, raw in (("timeline_frame_ms", _results.timeline_frame, raw_t),
                          ("requests_frame_ms", _results.requests_frame, raw_r)):
        times = []
        for _ in range(args.frame_repeat):
            t0 = time.perf_counter()
            fn(raw)
            times.append((time.perf_counter() - t0) * 1e3)
        out[name] = statistics.median(times)
        out[name.replace("_ms", "_min_ms")] = min(times)
    out["loadavg_after"] = os.getloadavg()
    json.dump(out, sys.stdout, indent=2)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
