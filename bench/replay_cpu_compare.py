#!/usr/bin/env python3
"""Replay CPU time of several kvsim binaries (or one binary with different flags) in one sitting.

For each case (whole Azure conv: a 2048-block pool on a fixed clock; the lesson's plan on a
900-block pool that preempts; PRIORITY on 2000 blocks), every repetition runs every binary back
to back, so all see the same machine load. Measures the child's CPU (user + system, wait4).
Prints per case the median CPU of each binary and its ratio to the first. Used for issue 26's
"no slower than before" check (bench/RESULTS.md).

Usage:
  python3 bench/replay_cpu_compare.py --bin base=/tmp/old/kvsim \\
      --bin "new-0.26=build/release/cli/kvsim --vllm-version 0.26" \\
      --bin new=build/release/cli/kvsim --repeats 21
"""
from __future__ import annotations

import argparse
import os
import shlex
import statistics
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TRACE = str(ROOT / "traces" / "AzureLLMInferenceTrace_conv.csv")
CASES = {
    "conv_fixed10_2048": "--model qwen2.5-7b --gpu rtx4090 --max-model-len 8192 "
                         "--num-gpu-blocks-override 2048 --step-time fixed:10",
    "conv_900_preempt": "--model qwen2.5-7b --gpu rtx4090 --gpu-memory-utilization 0.90 "
                        "--overhead-gib 1.6 --weights-gib 5.5 --kv-cache-dtype fp8 "
                        "--max-model-len 8192 --num-gpu-blocks-override 900",
    "conv_priority": "--model qwen2.5-7b --gpu rtx4090 --kv-cache-dtype fp8 --max-model-len 8192 "
                     "--scheduling-policy priority --num-gpu-blocks-override 2000",
}


def cpu_seconds(cmd: list[str]) -> float:
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(p.pid, 0)
    if status != 0:
        raise SystemExit(f"failed ({status}): {shlex.join(cmd)}")
    return usage.ru_utime + usage.ru_stime


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bin", action="append", required=True, metavar="NAME=PATH [FLAGS]",
                    help="a binary and the extra flags it runs with; the first is the baseline")
    ap.add_argument("--repeats", type=int, default=21)
    a = ap.parse_args()
    bins = {}
    for spec in a.bin:
        name, _, rest = spec.partition("=")
        if not rest:
            ap.error(f"--bin {spec!r}: expected NAME=PATH [FLAGS]")
        bins[name] = shlex.split(rest)
    print("load average before:", open("/proc/loadavg").read().split()[:3])
    for case, flags in CASES.items():
        times = {name: [] for name in bins}
        for _ in range(a.repeats):
            for name, argv in bins.items():
                cmd = [argv[0], "replay", TRACE, *flags.split(), "--no-progress", *argv[1:]]
                times[name].append(cpu_seconds(cmd))
        base = statistics.median(next(iter(times.values())))
        cells = [f"{n} {statistics.median(t) * 1e3:.1f} ms ({statistics.median(t) / base:.3f}x)"
                 for n, t in times.items()]
        print(case, " | ".join(cells))
    print("load average after:", open("/proc/loadavg").read().split()[:3])


if __name__ == "__main__":
    main()
