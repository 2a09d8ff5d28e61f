#!/usr/bin/env python3
"""vLLM 0.26's BlockPool against kvsim's, with the parameters of vLLM's own allocator benchmark.

vLLM's benchmarks/benchmark_block_pool.py (not shipped in the wheel) builds a
BlockPool(num_gpu_blocks=100000, enable_caching=True) per allocation size (--allocate-blocks,
default 10 50 100 500 1000; gc.collect() before each), then times --num-iteration (1000) rounds of
`blocks = get_new_blocks(n)` and `free_blocks(blocks)`, each call wrapped in a monotonic-clock
timer, and reports the average µs of each call. This script re-implements that loop (same pool,
same calls, same per-call timing, but by default the thread CPU clock on both sides because the
machine is shared; --clock wall restores the script's monotonic clock), runs it on vLLM's
BlockPool from the vLLM venv, then runs bench/bench_block_pool (Google Benchmark:
BM_GetNewBlocksAndFree is the same get + free loop) in the same sitting, the two interleaved
repetition by repetition, and prints one table (the ratio is the median of the per-repetition
ratios, with their range). Three modes:
  off    enable_caching=False;
  on     enable_caching=True, blocks never hashed (exactly the vLLM script);
  evict  enable_caching=True, every allocated block cached under a fresh key before it is freed,
         after one untimed lap over the pool, so every allocation also evicts (map erase + insert;
         kvsim: BM_GetNewBlocksEvictingAndFree, vLLM: cache_full_blocks with a request stand-in).
With --base-bench (the same benchmark built from an older kvsim) it adds old/new columns.

Not part of CI: exits 0 with a "skip:" line when the venv or the binary is missing.
Usage: bench/vllm_block_pool_compare.py [--kvsim-bench PATH] [--base-bench PATH] [--repeats 3]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

DEFAULT_VENV_PYTHON = "/work/venv-vllm/bin/python"
MODES = ("off", "on", "evict")

# Runs inside the vLLM venv. Prints one JSON object: {"<mode>/<n>": [µs per get, µs per free
# (+ cache_full_blocks in evict mode)], ...} for one repetition.
VLLM_DRIVER = r'''
import gc, hashlib, json, sys, time, types
from vllm.v1.core.block_pool import BlockPool

num_gpu_blocks, num_iteration = int(sys.argv[1]), int(sys.argv[2])
clock = time.monotonic_ns if sys.argv[5] == "wall" else time.thread_time_ns
sizes = [int(x) for x in sys.argv[3].split(",")]
modes = sys.argv[4].split(",")
BLOCK_SIZE = 16
keys = None
out = {}
for mode in modes:
    for n in sizes:
        gc.collect()  # as benchmark_block_pool.py, before each pool
        pool = BlockPool(num_gpu_blocks=num_gpu_blocks, enable_caching=(mode != "off"),
                         hash_block_size=BLOCK_SIZE)
        get_ns = 0
        free_ns = 0
        if mode != "evict":
            for _ in range(num_iteration):
                t0 = clock()
                blocks = pool.get_new_blocks(n)
                t1 = clock()
                pool.free_blocks(blocks)
                t2 = clock()
                get_ns += t1 - t0
                free_ns += t2 - t1
        else:
            if keys is None:
                keys = [hashlib.sha256(i.to_bytes(8, "little")).digest()
                        for i in range(2 * num_gpu_blocks)]
            # Untimed lap: every usable block cached once, in one call, so that afterwards every
            # allocation evicts.
            lap = pool.get_num_free_blocks()
            blocks = pool.get_new_blocks(lap)
            pool.cache_full_blocks(types.SimpleNamespace(block_hashes=keys[:lap]), blocks, 0, lap,
                                   BLOCK_SIZE, 0)
            pool.free_blocks(blocks)
            next_key = lap
            for _ in range(num_iteration):
                t0 = clock()
                blocks = pool.get_new_blocks(n)
                t1 = clock()
                if next_key + n > len(keys):
                    next_key = 0
                req = types.SimpleNamespace(block_hashes=keys[next_key:next_key + n])
                next_key += n
                pool.cache_full_blocks(req, blocks, 0, n, BLOCK_SIZE, 0)
                pool.free_blocks(blocks)
                t2 = clock()
                get_ns += t1 - t0
                free_ns += t2 - t1
        out[f"{mode}/{n}"] = [get_ns / num_iteration / 1e3, free_ns / num_iteration / 1e3]
print(json.dumps(out))
'''


def run_vllm_once(python: str, args) -> dict[str, float]:
    """One repetition: µs per call (get + free) per mode/n."""
    res = subprocess.run(
        [python, "-c", VLLM_DRIVER, str(args.num_gpu_blocks), str(args.num_iteration),
         ",".join(map(str, args.allocate_blocks)), ",".join(args.modes), args.clock],
        check=True, capture_output=True, text=True,
        env={**os.environ, "VLLM_LOGGING_LEVEL": "ERROR"})
    out = json.loads(res.stdout.strip().splitlines()[-1])
    return {key: get_us + free_us for key, (get_us, free_us) in out.items()}


def run_kvsim_once(binary: str, args) -> dict[str, float]:
    """One repetition: time per call (ns) of each mode/n row of bench_block_pool."""
    sizes = "|".join(str(n) for n in args.allocate_blocks)
    pattern = (f"BM_GetNewBlocks(AndFree/n:({sizes})/caching:[01]|"
               f"EvictingAndFree/n:({sizes}))$")
    with tempfile.NamedTemporaryFile(suffix=".json") as tmp:
        subprocess.run(
            [binary, f"--benchmark_filter={pattern}", f"--benchmark_min_time={args.min_time}",
             f"--benchmark_out={tmp.name}", "--benchmark_out_format=json"],
            check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        data = json.load(open(tmp.name))
    out = {}
    for b in data["benchmarks"]:
        name = b["run_name"]
        scale = {"ns": 1.0, "us": 1e3, "ms": 1e6}[b["time_unit"]]
        n = int(name.split("n:")[1].split("/")[0])
        if "Evicting" in name:
            mode = "evict"
        else:
            mode = "on" if name.endswith("caching:1") else "off"
        out[f"{mode}/{n}"] = b["cpu_time" if args.clock == "cpu" else "real_time"] * scale
    return out


def main() -> int:
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--vllm-python", default=DEFAULT_VENV_PYTHON)
    ap.add_argument("--kvsim-bench", default=os.path.join(here, "..", "build", "alloc", "bench",
                                                          "bench_block_pool"))
    ap.add_argument("--base-bench", help="bench_block_pool of an older kvsim (old/new columns)")
    ap.add_argument("--num-gpu-blocks", type=int, default=100000)
    ap.add_argument("--num-iteration", type=int, default=1000)
    ap.add_argument("--allocate-blocks", type=int, nargs="*", default=[1, 10, 50, 100, 500, 1000])
    ap.add_argument("--modes", nargs="*", default=list(MODES), choices=MODES)
    ap.add_argument("--repeats", type=int, default=3, help="medians of this many runs")
    ap.add_argument("--min-time", default="0.2", help="Google Benchmark seconds per row")
    ap.add_argument("--clock", choices=("cpu", "wall"), default="cpu",
                    help="cpu: thread CPU time on both sides (robust on a shared machine); wall: "
                         "the monotonic clock, as vLLM's script")
    args = ap.parse_args()
    if args.num_gpu_blocks != 100000:
        print("note: bench_block_pool's pool is fixed at 100000 blocks", file=sys.stderr)

    if not os.access(args.vllm_python, os.X_OK):
        print(f"skip: no vLLM venv python at {args.vllm_python}")
        return 0
    for b in [args.kvsim_bench] + ([args.base_bench] if args.base_bench else []):
        if not os.access(b, os.X_OK):
            print(f"skip: no bench_block_pool binary at {b}")
            return 0

    with open("/proc/loadavg") as f:
        load_before = f.read().split()[:3]
    # Interleaved: each repetition runs vLLM, then kvsim (then the old kvsim), so that every
    # ratio compares the two within minutes of each other; this machine's speed drifts by tens
    # of percent between sittings. Reported: the median of each side and the median (and the
    # range) of the per-repetition ratios.
    reps_vllm: list[dict[str, float]] = []
    reps_new: list[dict[str, float]] = []
    reps_old: list[dict[str, float]] = []
    for _ in range(args.repeats):
        reps_vllm.append(run_vllm_once(args.vllm_python, args))
        reps_new.append(run_kvsim_once(args.kvsim_bench, args))
        if args.base_bench:
            reps_old.append(run_kvsim_once(args.base_bench, args))
    with open("/proc/loadavg") as f:
        load_after = f.read().split()[:3]
    keys = reps_vllm[0].keys()
    vllm = {k: statistics.median(r[k] for r in reps_vllm) for k in keys}
    new = {k: statistics.median(r[k] for r in reps_new) for k in keys}
    old = {k: statistics.median(r[k] for r in reps_old) for k in keys} if reps_old else {}
    ratios = {k: sorted(v[k] * 1e3 / n_[k] for v, n_ in zip(reps_vllm, reps_new)) for k in keys}

    head = (f"{'n':>5} {'mode':>5} {'vLLM us/call':>13} {'kvsim ns/call':>14} "
            f"{'kvsim ns/block':>15} {'vLLM/kvsim':>11} {'range':>11}")
    if old:
        head += f" {'old ns/block':>13} {'old/new':>8}"
    print(head)
    for mode in args.modes:
        for n in args.allocate_blocks:
            key = f"{mode}/{n}"
            v_us, k_ns = vllm[key], new[key]
            r = ratios[key]
            row = (f"{n:>5} {mode:>5} {v_us:>13.2f} {k_ns:>14.1f} {k_ns / n:>15.2f} "
                   f"{statistics.median(r):>10.0f}x {r[0]:>5.0f}-{r[-1]:.0f}x")
            if old:
                row += f" {old[key] / n:>13.2f} {old[key] / k_ns:>7.2f}x"
            print(row)
    print(f"(medians of {args.repeats} interleaved repetitions; vLLM/kvsim = median of the "
          f"per-repetition ratios, range = their min-max; {args.clock} time on both sides; "
          f"load average {' '.join(load_before)} before, {' '.join(load_after)} after)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
