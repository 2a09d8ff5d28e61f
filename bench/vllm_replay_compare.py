#!/usr/bin/env python3
"""Replay speed against vLLM 0.26.0's scheduler, measured in one sitting (issue 27).

Drives vLLM's real v1 `Scheduler` (sync) and `AsyncScheduler` (async) on CPU with no model -- the
harness of tools/vllm_conformance/record.py (VllmHarness: the scheduler built as EngineCore builds
it, a one-group KVCacheConfig standing in for the GPU pool, this script playing the model runner)
-- and `kvsim replay` (subprocess: the CLI is the reference) on the same trace and settings,
interleaved: for each repetition, for each mode (sync, async), for each output setting (none,
per-step rows), one vLLM run with --kvsim-runs kvsim runs of each build given around it, half
before and half after (default 5: a kvsim run is ~1000x shorter than vLLM's, so one run per cell
leaves its median at the mercy of the host's noise, and the VMs this project runs on change speed
from one minute to the next: runs on both sides of the vLLM run see the stretch of time it saw).
Only the later runs' per-step rows are compared with vLLM's (one file, rewritten by each run).
Prints the medians (vLLM over the repetitions, kvsim over all its runs), the ratios and the
machine load (load average before and after, nproc).

The workload both sides replay is kvsim's own reading of the trace: a preparation run of kvsim
(untimed) writes its per-request CSV, and vLLM gets exactly those requests (arrival time in ns,
prompt length, max_tokens); a request kvsim rejects at arrival (prompt >= max_model_len) is one
vLLM's input processor refuses before the engine, so it is left out of vLLM's run. Prompts are
unique token ids per request (the Azure trace has no contents: nothing is shared, as in kvsim,
which salts every request's hashes), outputs are unique generated ids, `ignore_eos`.

The clock is kvsim's (sim/src/engine/replica_engine.cpp), emulated around vLLM's loop:
  * arrivals with arrival_ns <= t are added before each engine step (EngineCore's input queue);
    an idle engine jumps to the next arrival;
  * sync (EngineCore.step): schedule, run, update; a step with tokens takes the fixed step time;
  * async (EngineCore.step_with_batch_queue, batch queue of 2): a batch starts at
    max(t, end of the previous batch) and ends a step later; t moves to a batch's end when that
    batch is processed.
The step time is `fixed:MS` only (it is data on both sides, no model).

Per-step output: kvsim `--timeline FILE`; vLLM one CSV row per step with a scheduled token or a
preemption (kvsim's rule), written with csv.writer as the loop runs -- step, time_s, duration_s,
running, waiting, scheduled_reqs, scheduled_tokens, free_blocks, preemptions, the columns both
sides have. The check: every run's step count (steps with tokens), finished requests and total
scheduled tokens must be equal on both sides, and with per-step output the two CSVs are compared
column by column on those columns (after the runs, untimed). A mismatch is printed and the exit
status is 1.

What is timed:
  * vLLM: the engine loop from the first arrival to the last update, Request construction at
    arrival included (EngineCore builds the Request and its prompt block hashes), writing and
    closing the per-step CSV included; not the VllmConfig / scheduler construction. Wall
    (time.perf_counter) and CPU (user + system of this process, resource.getrusage).
  * kvsim: the whole process (start-up, trace parsing, replay, writing the outputs): wall around
    the subprocess and CPU from os.wait4's rusage; its outputs of the run before are deleted
    first, untimed, as vLLM's CSV is truncated before its timed loop; and the replay loop alone (the JSON report's
    wall_seconds, which excludes trace parsing and writing the timeline).
On a shared machine wall time includes waiting for a core; the CPU ratios measure the work.

Not a test and never run in CI (needs vLLM 0.26.0). Usage, from the repository root:
  /work/venv-vllm026/bin/python bench/vllm_replay_compare.py --kvsim build/ci/cli/kvsim --self-check
  /work/venv-vllm026/bin/python bench/vllm_replay_compare.py --kvsim build/ci/cli/kvsim \\
      --repeats 3                                  # whole trace: ~100 s per vLLM run, 12 of them
  ... --max-requests 2000 --repeats 3              # the first 2000 requests only
  ... --modes sync --outputs none                  # one cell of the matrix
  ... --kvsim plain=build/ci/cli/kvsim --kvsim pgo=build/pgo/cli/kvsim
                                                   # two builds, one sitting (a row each)
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import json
import functools
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import deque
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools" / "vllm_conformance"))

BLOCK_SIZE = 16
PROMPT_TOKEN_BASE = 1  # prompt ids: one running counter over all requests (unique blocks)
GEN_TOKEN_BASE = 1_000_000_000  # generated ids: another running counter, disjoint from prompts
COMPARED_COLUMNS = ("step", "time_s", "duration_s", "running", "waiting", "scheduled_reqs",
                    "scheduled_tokens", "free_blocks", "preemptions")
MAX_ENGINE_ITERATIONS = 100_000_000


class Case:
    """What record.VllmHarness reads from a conformance case."""

    def __init__(self, name: str, mode: str, config: dict):
        self.name = name
        self.mode = mode
        self.config = config


def vllm_config(args) -> dict:
    return {
        "num_gpu_blocks": args.num_gpu_blocks,
        "max_model_len": args.max_model_len,
        "max_num_seqs": args.max_num_seqs,
        "max_num_batched_tokens": args.max_num_batched_tokens,
        "long_prefill_token_threshold": 0,
        "enable_chunked_prefill": True,
        "policy": "fcfs",
        "watermark": 0.0,
        "scheduler_reserve_full_isl": True,
        "enable_prefix_caching": True,
    }


@functools.lru_cache(maxsize=None)
def kvsim_has_vllm_version(kvsim: str) -> bool:
    out = subprocess.run([kvsim, "replay", "--help"], capture_output=True, text=True)
    return "--vllm-version" in out.stdout


def kvsim_args(args, mode: str, kvsim: str) -> list[str]:
    a = [kvsim, "replay", str(args.trace), "--model", args.model,
         "--num-gpu-blocks-override", str(args.num_gpu_blocks),
         "--max-model-len", str(args.max_model_len), "--max-num-seqs", str(args.max_num_seqs),
         "--max-num-batched-tokens", str(args.max_num_batched_tokens),
         "--step-time", f"fixed:{args.step_ms:g}", "--no-progress"]
    # The release the other side runs (kvsim's default became 0.33 in issue 26), when this
    # kvsim knows the flag.
    if kvsim_has_vllm_version(kvsim):
        a += ["--vllm-version", args.vllm_release]
    if args.max_requests:
        a += ["--max-requests", str(args.max_requests)]
    a.append("--no-async-scheduling" if mode == "sync" else "--async-scheduling")
    return a


def parse_ns(s: str) -> int:
    whole, _, frac = s.partition(".")
    return int(whole) * 1_000_000_000 + int((frac + "000000000")[:9])


def load_requests(path: Path) -> tuple[list[tuple[int, int, int]], int]:
    """kvsim's requests CSV -> [(arrival_ns, prompt_tokens, max_tokens)] of the admitted ones,
    and how many kvsim rejected at arrival."""
    reqs = []
    rejected = 0
    with open(path, newline="") as f:
        for row in csv.DictReader(f):
            if row["status"] == "rejected" and row["reject_reason"] == "prompt_ge_max_model_len":
                rejected += 1
                continue
            reqs.append((parse_ns(row["arrival_s"]), int(row["prompt_tokens"]),
                         int(row["max_tokens"])))
    return reqs, rejected


def _model_runner_output_cls():
    from vllm.v1.outputs import ModelRunnerOutput
    return ModelRunnerOutput


def vllm_replay(args, mode: str, reqs, model_dir: str, timeline: Path | None) -> dict:
    from record import VllmHarness  # tools/vllm_conformance/record.py
    from vllm.sampling_params import SamplingParams
    from vllm.v1.request import Request

    ModelRunnerOutput = _model_runner_output_cls()
    h = VllmHarness(Case(f"azure_{mode}", mode, vllm_config(args)), model_dir, args.vllm_release)
    sched = h.scheduler
    pool = sched.kv_cache_manager.block_pool
    hasher = h.block_hasher
    step_ns = int(round(args.step_ms * 1_000_000))
    n = len(reqs)
    state = {"prompt_next": PROMPT_TOKEN_BASE, "gen_next": GEN_TOKEN_BASE}
    steps = 0
    scheduled_tokens = 0

    def make_request(i: int):
        arrival_ns, prompt, max_tokens = reqs[i]
        first = state["prompt_next"]
        state["prompt_next"] = first + prompt
        return Request(
            request_id=f"{i:06d}",
            prompt_token_ids=list(range(first, first + prompt)),
            sampling_params=SamplingParams(max_tokens=max_tokens, ignore_eos=True),
            pooling_params=None,
            arrival_time=arrival_ns / 1e9,
            priority=0,
            block_hasher=hasher,
        )

    def model_output(samples):
        req_ids = [rid for rid, _ in samples]
        sampled = []
        g = state["gen_next"]
        for _, sample in samples:
            if sample:
                sampled.append([g])
                g += 1
            else:
                sampled.append([])
        state["gen_next"] = g
        return ModelRunnerOutput(
            req_ids=req_ids,
            req_id_to_index={rid: j for j, rid in enumerate(req_ids)},
            sampled_token_ids=sampled,
            logprobs=None,
            prompt_logprobs_dict={},
            pooler_output=[],
        )

    out_file = open(timeline, "w", newline="") if timeline is not None else None
    writer = csv.writer(out_file) if out_file is not None else None
    if writer is not None:
        writer.writerow(COMPARED_COLUMNS)
    requests = sched.requests

    def write_row(index: int, start_ns: int, dt: int, out) -> None:
        # kvsim's log_row: a row for a step with tokens or a preemption; running, waiting and
        # free blocks as the engine step leaves them (sync: before the update; async: after the
        # update of the same engine step, if it processed a batch).
        tokens = out.total_num_scheduled_tokens
        preempted = len(out.preempted_req_ids or ())
        if tokens > 0 or preempted:
            writer.writerow((index, f"{start_ns / 1e9:.9f}", f"{dt / 1e9:.9f}",
                             len(sched.running), len(sched.waiting) + len(sched.skipped_waiting),
                             len(out.num_scheduled_tokens), tokens, pool.get_num_free_blocks(),
                             preempted))

    def schedule():
        nonlocal steps, scheduled_tokens
        out = sched.schedule()
        tokens = out.total_num_scheduled_tokens
        samples = [(rid, not requests[rid].is_prefill_chunk) for rid in out.num_scheduled_tokens]
        if tokens > 0:
            steps += 1
            scheduled_tokens += tokens
        return out, samples, step_ns if tokens > 0 else 0

    def update(out, samples) -> None:
        sched.update_from_output(out, model_output(samples))

    ru0 = resource.getrusage(resource.RUSAGE_SELF)
    w0 = time.perf_counter()
    t = 0
    next_req = 0
    if mode == "sync":
        for _ in range(MAX_ENGINE_ITERATIONS):
            while next_req < n and reqs[next_req][0] <= t:
                sched.add_request(make_request(next_req))
                next_req += 1
            if not sched.has_requests():
                if next_req == n:
                    break
                t = reqs[next_req][0]
                continue
            out, samples, dt = schedule()
            if writer is not None:
                # The step column: kvsim's step_index counts schedule() calls, which kvsim makes
                # only with unfinished requests; vLLM also calls it once to report finished
                # ones, so count the steps with tokens instead.
                write_row(steps - 1 if dt else steps, t, dt, out)
            t += dt
            update(out, samples)
        else:
            raise SystemExit("vLLM sync loop did not end")
    else:
        queue: deque = deque()
        gpu_free = 0
        ends = [0, 0]
        k = 0
        for _ in range(MAX_ENGINE_ITERATIONS):
            while next_req < n and reqs[next_req][0] <= t:
                sched.add_request(make_request(next_req))
                next_req += 1
            row = None
            if sched.has_requests():
                start = max(t, gpu_free)
                out, samples, dt = schedule()
                gpu_free = start + dt
                ends[k % 2] = gpu_free
                queue.appendleft((out, samples, k))
                row = (k, start, dt, out)
                k += 1
                if len(queue) < h.batch_queue_size and (
                        out.total_num_scheduled_tokens > 0 or sched.has_requests()):
                    if writer is not None:
                        write_row(*row)
                    continue
            elif not queue:
                if next_req == n:
                    break
                t = reqs[next_req][0]
                continue
            out, samples, kk = queue.pop()
            t = max(t, ends[kk % 2])
            update(out, samples)
            if writer is not None and row is not None:
                write_row(*row)
        else:
            raise SystemExit("vLLM async loop did not end")
    if out_file is not None:
        out_file.close()
    w1 = time.perf_counter()
    ru1 = resource.getrusage(resource.RUSAGE_SELF)
    return {
        "wall": w1 - w0,
        "cpu": (ru1.ru_utime - ru0.ru_utime) + (ru1.ru_stime - ru0.ru_stime),
        "steps": steps,
        "scheduled_tokens": scheduled_tokens,
        "added": next_req,
        "unfinished": len(sched.requests),
        "sim_ns": t,
    }


def kvsim_replay(args, mode: str, kvsim: str, work: Path, timeline: Path | None) -> dict:
    js = work / "kvsim.json"
    cmd = kvsim_args(args, mode, kvsim) + ["--json", str(js)]
    if timeline is not None:
        cmd += ["--timeline", str(timeline)]
    # The previous run's outputs go first, untimed: vLLM's side truncates its CSV before its timed
    # loop, while kvsim replacing a 30 MB timeline would free the old file's page cache inside
    # its own run (about 4 ms of kernel time on this project's VM).
    for old in (js, timeline):
        if old is not None:
            old.unlink(missing_ok=True)
    w0 = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, ru = os.wait4(p.pid, 0)
    w1 = time.perf_counter()
    err = p.stderr.read().decode(errors="replace")
    p.stderr.close()
    p.returncode = os.waitstatus_to_exitcode(status)
    if p.returncode != 0:
        raise SystemExit(f"kvsim failed ({p.returncode}): {' '.join(cmd)}\n{err}")
    d = json.loads(js.read_text())
    return {
        "wall": w1 - w0,
        "cpu": ru.ru_utime + ru.ru_stime,
        "user": ru.ru_utime,  # JSON only: the system share is mostly the outputs' writes
        "sys": ru.ru_stime,
        "loop_wall": d["wall_seconds"],
        "steps": d["steps"],
        "scheduled_tokens": d["scheduled_tokens"],
        "finished": d["finished"],
        "rejected": d["rejected"],
        "sim_ns": round(d["sim_seconds"] * 1e9),
    }


def compare_timelines(vllm_csv: Path, kvsim_csv: Path) -> str | None:
    """None if equal on COMPARED_COLUMNS, else the first difference."""
    with open(vllm_csv, newline="") as a, open(kvsim_csv, newline="") as b:
        ra, rb = csv.DictReader(a), csv.DictReader(b)
        for i, (x, y) in enumerate(zip(ra, rb)):
            for c in COMPARED_COLUMNS:
                if x[c] != y[c]:
                    return f"row {i}, column {c}: vLLM {x[c]!r}, kvsim {y[c]!r}"
        rest_a = sum(1 for _ in ra)
        rest_b = sum(1 for _ in rb)
        if rest_a or rest_b:
            return f"row counts differ: {rest_a} more vLLM rows, {rest_b} more kvsim rows"
    return None


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__.split("\n\n", 1)[1])
    ap.add_argument("--kvsim", required=True, action="append", metavar="[NAME=]PATH",
                    help="kvsim binary (a Release build); repeat it to time several builds in the "
                         "same sitting (each takes its --kvsim-runs around every vLLM run, in the "
                         "order given; NAME labels its rows, by default the build folder's name)")
    ap.add_argument("--trace", type=Path, default=ROOT / "traces" / "AzureLLMInferenceTrace_conv.csv")
    ap.add_argument("--model", default="qwen2.5-7b")
    ap.add_argument("--num-gpu-blocks", type=int, default=2048)
    ap.add_argument("--max-model-len", type=int, default=8192)
    ap.add_argument("--max-num-seqs", type=int, default=256)
    ap.add_argument("--max-num-batched-tokens", type=int, default=2048)
    ap.add_argument("--step-ms", type=float, default=10.0, help="--step-time fixed:MS")
    ap.add_argument("--max-requests", type=int, default=0,
                    help="the first N requests only (kvsim's --max-requests; 0 = all)")
    ap.add_argument("--repeats", type=int, default=3, help="interleaved repetitions per cell")
    ap.add_argument("--kvsim-runs", type=int, default=5,
                    help="kvsim runs of each build around each vLLM run, half before and half "
                         "after (all checked; medians over all)")
    ap.add_argument("--modes", nargs="+", default=["sync", "async"], choices=["sync", "async"])
    ap.add_argument("--outputs", nargs="+", default=["none", "steps"], choices=["none", "steps"],
                    help="none: no per-step output; steps: per-step rows on both sides")
    ap.add_argument("--self-check", action="store_true",
                    help="--max-requests 200 --repeats 1: a check that both sides replay the same "
                         "thing, in well under a minute")
    ap.add_argument("--json", type=Path, help="also write every measurement here")
    args = ap.parse_args()
    from versions import installed_release  # tools/vllm_conformance/versions.py
    args.vllm_release = installed_release()[1]  # "0.26" or "0.33": the venv's wheel
    if args.self_check:
        args.max_requests = args.max_requests or 200
        args.repeats = 1
    builds: list[tuple[str, str]] = []  # (name, resolved path), in the order given
    for spec in args.kvsim:
        name, sep, path = spec.partition("=")
        if not sep:
            name, path = "", spec
        resolved = Path(path).resolve()
        # build/ci/cli/kvsim -> "ci"; a lone binary -> its file name
        name = name or (resolved.parent.parent.name if resolved.parent.name == "cli"
                        else resolved.name)
        if any(name == n for n, _ in builds):
            ap.error(f"--kvsim: two builds named {name!r} (label them NAME=PATH)")
        builds.append((name, str(resolved)))

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import vllm

    if vllm.__version__ != "0.26.0":
        print(f"vLLM {vllm.__version__}; this comparison is defined for 0.26.0", file=sys.stderr)
        return 2
    from record import HF_CONFIG

    nproc = os.cpu_count()
    load_before = os.getloadavg()
    commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
                            capture_output=True, text=True).stdout.strip()
    print(f"commit {commit}, kvsim {', '.join(f'{n}={p}' for n, p in builds)}, "
          f"vLLM {vllm.__version__}, "
          f"python {sys.version.split()[0]}")
    print(f"trace {args.trace} (max_requests {args.max_requests or 'all'}), model {args.model}, "
          f"{args.num_gpu_blocks} blocks, max_model_len {args.max_model_len}, max_num_seqs "
          f"{args.max_num_seqs}, max_num_batched_tokens {args.max_num_batched_tokens}, "
          f"fixed:{args.step_ms:g} ms, repeats {args.repeats}")
    print(f"nproc {nproc}, load average before {load_before[0]:.2f} {load_before[1]:.2f} "
          f"{load_before[2]:.2f}", flush=True)

    failures: list[str] = []
    # (mode, outputs) -> {"vllm": [run, ...], "kvsim": {build name: [run, ...]}}
    results: dict[tuple[str, str], dict] = {}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        # Private copies: others may rebuild a binary while the sitting runs.
        copies: list[tuple[str, str]] = []
        for i, (name, source) in enumerate(builds):
            copy = str(work / f"kvsim-{i}")
            shutil.copy2(source, copy)
            copies.append((name, copy))
            digest = hashlib.sha256(Path(copy).read_bytes()).hexdigest()[:16]
            print(f"kvsim {name} copied from {source} (modified "
                  f"{time.strftime('%Y-%m-%d %H:%M:%S', time.gmtime(os.stat(source).st_mtime))} "
                  f"UTC, sha256 {digest}…)", flush=True)
        model_dir = work / "model"
        model_dir.mkdir()
        (model_dir / "config.json").write_text(json.dumps(HF_CONFIG))
        # The workload, as kvsim reads it (untimed).
        prep = kvsim_args(args, "sync", copies[0][1]) + [
            "--requests", str(work / "requests.csv"), "--json", str(work / "prep.json")]
        subprocess.run(prep, check=True, stdout=subprocess.DEVNULL)
        reqs, rejected = load_requests(work / "requests.csv")
        print(f"{len(reqs)} requests replayed by both ({rejected} rejected by kvsim at arrival, "
              f"left out of vLLM's run: prompt >= max_model_len)", flush=True)

        for rep in range(args.repeats):
            for mode in args.modes:
                for outputs in args.outputs:
                    cell = results.setdefault((mode, outputs),
                                              {"vllm": [], "kvsim": {n: [] for n, _ in copies}})
                    vt = work / "vllm_timeline.csv" if outputs == "steps" else None
                    kt = work / "kvsim_timeline.csv" if outputs == "steps" else None
                    # kvsim's runs around vLLM's: half before, half after. A kvsim run lasts
                    # milliseconds and this project's VMs change speed from one minute to the
                    # next; runs on both sides of a vLLM run see the stretch of time it saw.
                    before = max(1, args.kvsim_runs) // 2
                    after = max(1, args.kvsim_runs) - before
                    early = {name: [kvsim_replay(args, mode, kvsim, work, kt)
                                    for _ in range(before)] for name, kvsim in copies}
                    v = vllm_replay(args, mode, reqs, str(model_dir), vt)
                    cell["vllm"].append(v)
                    for name, kvsim in copies:
                        runs = early[name]
                        for i in range(before + after):
                            if i >= before:
                                # Each later run's outputs are compared before the next
                                # replaces them (the earlier runs' timelines are not kept).
                                runs.append(kvsim_replay(args, mode, kvsim, work, kt))
                            k = runs[i]
                            same = []
                            for key in ("steps", "scheduled_tokens", "sim_ns"):
                                if v[key] != k[key]:
                                    failures.append(f"{mode}/{outputs} rep {rep} {name}: {key} "
                                                    f"vLLM {v[key]} kvsim {k[key]}")
                                else:
                                    same.append(key)
                            if v["unfinished"] != 0 or v["added"] != k["finished"]:
                                failures.append(f"{mode}/{outputs} rep {rep} {name}: vLLM added "
                                                f"{v['added']}, left {v['unfinished']} "
                                                f"unfinished; kvsim finished {k['finished']}")
                            if vt is not None and i >= before:
                                diff = compare_timelines(vt, kt)
                                if diff is not None:
                                    failures.append(f"{mode}/{outputs} rep {rep} {name}: "
                                                    f"timelines differ: {diff}")
                                else:
                                    same.append("per-step rows")
                        cell["kvsim"][name].extend(runs)
                        mid = statistics.median
                        print(f"rep {rep} {mode:5} out={outputs:5}: vLLM {v['wall']:8.2f} s wall "
                              f"{v['cpu']:8.2f} s cpu | kvsim {name} (median of {len(runs)}) "
                              f"{mid(r['wall'] for r in runs):.3f} s wall "
                              f"{mid(r['cpu'] for r in runs):.3f} s cpu (loop "
                              f"{mid(r['loop_wall'] for r in runs):.3f} s) | {k['steps']} steps, "
                              f"{k['finished']} finished; equal: {', '.join(same)}; "
                              f"load {os.getloadavg()[0]:.2f}", flush=True)

    load_after = os.getloadavg()
    med = statistics.median
    print()
    print(f"Medians of {args.repeats} interleaved repetitions ({args.kvsim_runs} kvsim runs "
          f"each; nproc {nproc}; load average before "
          f"{load_before[0]:.2f}, after {load_after[0]:.2f} {load_after[1]:.2f} "
          f"{load_after[2]:.2f}):")
    several = len(builds) > 1
    print(("| kvsim build " if several else "") +
          "| mode | per-step output | vLLM wall s | vLLM cpu s | kvsim wall s | kvsim cpu s | "
          "kvsim loop s | wall ratio | cpu ratio | loop ratio |")
    print(("|---" if several else "") + "|---|---|---|---|---|---|---|---|---|---|")
    summary = []
    for (mode, outputs), cell in results.items():
        vw = med(r["wall"] for r in cell["vllm"])
        vc = med(r["cpu"] for r in cell["vllm"])
        for name, runs in cell["kvsim"].items():
            kw = med(r["wall"] for r in runs)
            kc = med(r["cpu"] for r in runs)
            kl = med(r["loop_wall"] for r in runs)
            print((f"| {name} " if several else "") +
                  f"| {mode} | {'timeline' if outputs == 'steps' else 'none'} | {vw:.2f} | "
                  f"{vc:.2f} | {kw:.3f} | {kc:.3f} | {kl:.3f} | {vw / kw:.0f}× | {vc / kc:.0f}× | "
                  f"{vw / kl:.0f}× |")
        summary.append({"mode": mode, "outputs": outputs, "vllm": cell["vllm"],
                        "kvsim": cell["kvsim"] if several else next(iter(cell["kvsim"].values())),
                        "kvsim_builds": dict(builds)})
    print("wall ratio: vLLM loop wall / kvsim process wall; cpu ratio: vLLM loop CPU / kvsim "
          "process CPU (start-up, trace parsing and output writing included); loop ratio: vLLM "
          "loop wall / kvsim replay loop wall (JSON wall_seconds: no parsing, no output writing)")
    if args.json:
        args.json.write_text(json.dumps({
            "commit": commit, "nproc": nproc, "load_before": load_before,
            "load_after": load_after, "args": {k: str(v) for k, v in vars(args).items()},
            "cells": summary, "failures": failures}, indent=1))
    if failures:
        print("\nNOT THE SAME REPLAY:", file=sys.stderr)
        for f in failures:
            print(f"  {f}", file=sys.stderr)
        return 1
    print("Both sides replayed the same thing in every run: equal step counts, scheduled tokens, "
          "simulated end time and finished requests" +
          (", and equal per-step rows" if "steps" in args.outputs else "") + ".")
    return 0


if __name__ == "__main__":
    sys.exit(main())
