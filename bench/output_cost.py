#!/usr/bin/env python3
"""What per-step output costs a replay, old binary against new, in one sitting (issue 27).

Runs one replay configuration (default: the whole Azure conv trace with issue 27's settings)
with and without `--timeline FILE` / `--requests FILE`, sync and async, for each binary given,
interleaved: every repetition runs every case on every binary back to back, so all see the same
machine load. Measures the whole process: CPU (user + system from wait4's rusage) and wall.
Prints, per case and binary, the median and minimum, and each output case's cost over the same
mode's no-output case (median CPU and median wall), with the load average before and after.

Each output goes to a path the run creates: the previous run's file is removed first, as
bench/vllm_replay_compare.py does, since replacing a 30 MB file frees its pages inside the
rename (about 1.6 ms on tmpfs here), which is the file system's cost of dropping the old file,
not of writing the new one. The "(replacing)" cases measure that too: their file is left from
the run before.

Usage:
  TMPDIR=/dev/shm python3 bench/output_cost.py --bin old=/tmp/kvsim-old --bin new=build/ci/cli/kvsim \
      --repeats 21
The outputs go to a temporary directory under $TMPDIR: on a disk file system each repetition's
30 MB timeline is written back while the next one runs, so tmpfs (/dev/shm) gives steadier
figures. On a shared VM compare the minima as well as the medians.
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TRACE = ROOT / "traces" / "AzureLLMInferenceTrace_conv.csv"
ARGS = [
    "--model", "qwen2.5-7b", "--gpu", "rtx4090", "--max-model-len", "8192",
    "--num-gpu-blocks-override", "2048", "--max-num-seqs", "256",
    "--max-num-batched-tokens", "2048", "--step-time", "fixed:10", "--no-progress",
]


def cases(work: Path) -> list[tuple[str, list[str], bool]]:
    """(label, extra arguments, whether the outputs replace the files of the run before)."""
    tl = ["--timeline", str(work / "timeline.csv")]
    tl_kept = ["--timeline", str(work / "timeline-kept.csv")]
    rq = ["--requests", str(work / "requests.csv")]
    out = []
    for mode, flags in (("async", []), ("sync", ["--no-async-scheduling"])):
        out.append((f"{mode}", flags, False))
        out.append((f"{mode} + timeline", flags + tl, False))
        out.append((f"{mode} + timeline (replacing)", flags + tl_kept, True))
        out.append((f"{mode} + requests", flags + rq, False))
        out.append((f"{mode} + timeline + requests", flags + tl + rq, False))
    return out


def output_paths(extra: list[str]) -> list[Path]:
    return [Path(extra[i + 1]) for i, a in enumerate(extra) if a in ("--timeline", "--requests")]


def run_once(binary: str, trace: str, extra: list[str]) -> tuple[float, float]:
    start = time.perf_counter()
    p = subprocess.Popen([binary, "replay", trace, *ARGS, *extra],
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, ru = os.wait4(p.pid, 0)
    wall = time.perf_counter() - start
    err = p.stderr.read().decode() if p.stderr else ""
    p.returncode = os.waitstatus_to_exitcode(status)
    if p.returncode != 0:
        sys.exit(f"{binary} failed ({p.returncode}): {err}")
    return ru.ru_utime + ru.ru_stime, wall


def loadavg() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", action="append", required=True, metavar="NAME=PATH",
                    help="a kvsim binary to time (repeatable)")
    ap.add_argument("--repeats", type=int, default=11)
    ap.add_argument("--trace", default=str(TRACE))
    ap.add_argument("--only", default="", help="comma-separated case names (default: all)")
    a = ap.parse_args()
    bins = [tuple(b.split("=", 1)) for b in a.bin]
    with tempfile.TemporaryDirectory(dir=os.environ.get("TMPDIR", "/tmp")) as d:
        work = Path(d)
        todo = cases(work)
        if a.only:
            keep = set(a.only.split(","))
            unknown = keep - {c[0] for c in todo}
            if unknown:
                ap.error(f"--only: no case named {', '.join(sorted(unknown))} "
                         f"(cases: {', '.join(c[0] for c in todo)})")
            todo = [c for c in todo if c[0] in keep]
        print(f"load average before: {loadavg()}  ({time.strftime('%Y-%m-%d %H:%M:%S %Z')})")
        cpu: dict[tuple[str, str], list[float]] = {}
        wall: dict[tuple[str, str], list[float]] = {}
        for name, path in bins:  # warm the page cache and the binaries
            run_once(path, a.trace, [])
        for label, extra, replacing in todo:  # the files the "(replacing)" cases replace
            if replacing:
                run_once(bins[0][1], a.trace, extra)
        for _ in range(a.repeats):
            for label, extra, replacing in todo:
                for name, path in bins:
                    if not replacing:
                        for old in output_paths(extra):
                            old.unlink(missing_ok=True)
                    c, w = run_once(path, a.trace, extra)
                    cpu.setdefault((label, name), []).append(c)
                    wall.setdefault((label, name), []).append(w)
        print(f"load average after:  {loadavg()}  ({time.strftime('%Y-%m-%d %H:%M:%S %Z')})")
    print(f"\n{a.repeats} interleaved repetitions; ms, median (min); +% = median CPU / median wall "
          "over the same mode without output")
    head = "| case | " + " | ".join(f"{n} CPU | {n} wall | {n} +% CPU / wall" for n, _ in bins)
    print(head + " |")
    print("|---|" + "---:|---:|---:|" * len(bins))
    for label, _, _ in todo:
        base = label.split(" ")[0]
        row = [label]
        for name, _ in bins:
            c = cpu[(label, name)]
            w = wall[(label, name)]
            mc = statistics.median(c)
            row.append(f"{mc * 1e3:.1f} ({min(c) * 1e3:.1f})")
            row.append(f"{statistics.median(w) * 1e3:.1f} ({min(w) * 1e3:.1f})")
            if (base, name) in cpu and base != label:
                b = statistics.median(cpu[(base, name)])
                bw = statistics.median(wall[(base, name)])
                mw = statistics.median(w)
                row.append(f"{(mc / b - 1) * 100:+.0f} % / {(mw / bw - 1) * 100:+.1f} %")
            else:
                row.append("")
        print("| " + " | ".join(row) + " |")


if __name__ == "__main__":
    main()
