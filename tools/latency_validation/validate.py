#!/usr/bin/env python3
"""How far kvsim's predicted latencies are from 16 real vLLM runs, per run and load stage.

For each run in calibration/vllm-h100-runs/ it builds the workload's trace (make_trace.py),
replays it with `kvsim replay` under the run's server settings and the --step-time model, and
compares per-stage TTFT, TPOT (decode time per output token) and E2E (mean, p50, p90) with
inference-perf's measured stage metrics (measured.py explains the TPOT conversion). Prints a
table and the median absolute % error over the run-stages; --json / --markdown write the
numbers; --check BASELINE --tolerance PP fails when a median error grows by more than PP
percentage points over the baseline's.

Stages where more than 1 % of the requests hit the load generator's 300 s client timeout are
"overloaded": the measurement covers only the survivors and the aborted requests relieved the
real server, which kvsim does not model; they are shown but kept out of the headline medians
("comparable" stages), and reported separately ("all" stages).
"""

import argparse
import concurrent.futures
import csv
import json
import math
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import make_trace  # noqa: E402
import measured  # noqa: E402
import report  # noqa: E402
from located import RunError  # noqa: E402
from stats import METRICS, STATS, median, pct_error, summarize  # noqa: E402

REPO = os.path.dirname(os.path.dirname(HERE))
OVERLOAD_FAILURE_SHARE = 0.01
GPU = "h100-80g"  # H100 SXM5, the runs' card
GPU_MEMORY_UTILIZATION = "0.9"  # vLLM's default; the runs set none


def add_common_args(ap):
    """--runs-dir and --kvsim, the arguments every script here takes."""
    ap.add_argument("--runs-dir", default=os.path.join(REPO, "calibration", "vllm-h100-runs"))
    ap.add_argument("--kvsim", default=os.environ.get(
        "KVSIM_CLI", os.path.join(REPO, "build", "ci", "cli", "kvsim")))


def find_runs(runs_dir, only):
    if not os.path.isdir(runs_dir):
        raise RunError(f"{runs_dir}:1: field 'runs-dir': not a directory")
    runs = sorted(d for d in os.listdir(runs_dir)
                  if os.path.isfile(os.path.join(runs_dir, d, "exp-config.yaml"))
                  and (not only or any(o in d for o in only)))
    if not runs:
        raise RunError(f"{runs_dir}:1: field 'runs': no run directory with exp-config.yaml")
    return runs


def model_config(runs_dir, model):
    path = os.path.join(runs_dir, "models", model.split("/")[-1] + ".json")
    if not os.path.isfile(path):
        raise RunError(f"{path}:1: field 'model': no config.json for {model}")
    return path


def replay(kvsim, trace, server, config, step_time, out_csv):
    cmd = [kvsim, "replay", trace, "--config", config, "--gpu", GPU,
           "--gpu-memory-utilization", GPU_MEMORY_UTILIZATION,
           "--tensor-parallel-size", str(server["tensor_parallelism"]),
           "--max-num-batched-tokens", str(server["max_num_batched_tokens"]),
           "--max-num-seqs", str(server["max_num_seqs"]),
           "--max-model-len", str(server["max_model_len"]),
           "--step-time", step_time, "--requests", out_csv, "--no-progress"]
    try:
        p = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    except OSError as e:
        raise RunError(f"{kvsim}:1: field '--kvsim': {e.strerror}") from None
    if p.returncode != 0:
        last = (p.stderr.strip().splitlines() or ["(no message)"])[-1]
        raise RunError(f"{trace}:1: field 'kvsim replay': exit {p.returncode}: {last}")
    return " ".join(cmd)


def overloaded_stages(meas):
    """{stage: True when over 1 % of its requests hit the client timeout}."""
    return {k: v["failures"] > OVERLOAD_FAILURE_SHARE * (v["count"] + v["failures"])
            for k, v in meas.items()}


def predicted_stages(records, csv_path, overloaded):
    """{stage: {"ttft"|"tpot"|"e2e": {...}, "count", "unfinished", "timeouts", ...}}."""
    per = {}
    with open(csv_path, newline="", encoding="utf-8") as f:
        for row in csv.DictReader(f):
            rec = records[int(row["source_line"]) - 2]  # line 1 is the kvsim_trace header
            s = per.setdefault(rec["stage"], {"rows": [], "unfinished": 0, "first": math.inf,
                                              "last_finish": 0.0})
            s["first"] = min(s["first"], float(row["arrival_s"]))
            if row["status"] != "finished":
                s["unfinished"] += 1
                continue
            s["last_finish"] = max(s["last_finish"], float(row["finish_s"]))
            ttft, e2e, n = float(row["ttft_s"]), float(row["e2e_s"]), int(row["output_tokens"])
            s["rows"].append((ttft, (e2e - ttft) / (n - 1) if n > 1 else math.nan, e2e))
    out = {}
    for stage, s in per.items():
        rows = s["rows"]
        timeouts = sum(1 for r in rows if r[2] >= measured.CLIENT_TIMEOUT_S)
        if overloaded.get(stage):
            rows = [r for r in rows if r[2] < measured.CLIENT_TIMEOUT_S]
        out[stage] = {"count": len(rows), "unfinished": s["unfinished"], "timeouts": timeouts,
                      "first_arrival_s": s["first"], "last_finish_s": s["last_finish"]}
        for i, m in enumerate(METRICS):
            out[stage][m] = summarize([r[i] for r in rows if math.isfinite(r[i])])
    return out


def validate_run(runs_dir, run, kvsim, step_time, seed):
    run_dir = os.path.join(runs_dir, run)
    server = measured.read_server(run_dir)
    workload = make_trace.read_workload(run_dir)
    meas = measured.read_stages(run_dir, workload["output_len"])
    config = model_config(runs_dir, server["model"])
    records = make_trace.make_records(workload, seed, 60.0)
    overloaded = overloaded_stages(meas)
    with tempfile.TemporaryDirectory(prefix="kvsim-lv-") as tmp:
        trace = os.path.join(tmp, "trace.jsonl")
        make_trace.write_trace(records, trace)
        cmd = replay(kvsim, trace, server, config, step_time, os.path.join(tmp, "requests.csv"))
        pred = predicted_stages(records, os.path.join(tmp, "requests.csv"), overloaded)
        # Shown in the docs: paths relative to the repository, the temporaries named by role.
        cmd = cmd.replace(os.path.join(tmp, "trace.jsonl"), "TRACE.jsonl").replace(
            os.path.join(tmp, "requests.csv"), "REQUESTS.csv").replace(kvsim, "kvsim")
        cmd = cmd.replace(REPO + os.sep, "")
    rows = []
    for stage in sorted(meas):
        m, p = meas[stage], pred.get(stage)
        if p is None:
            raise RunError(f"{run_dir}:1: field 'stage {stage}': no simulated requests")
        nxt = pred.get(stage + 1)
        row = {"run": run, "model": server["model"], "tp": server["tensor_parallelism"],
               "stage": stage, "rate": workload["stages"][stage][0],
               "overloaded": overloaded[stage], "measured": m, "predicted": p,
               "stage_overlap": bool(nxt and p["last_finish_s"] > nxt["first_arrival_s"]),
               "error_pct": {}}
        for metric in METRICS:
            for stat in STATS:
                row["error_pct"][f"{metric}_{stat}"] = pct_error(p[metric][stat],
                                                                 m[metric][stat])
        rows.append(row)
    return rows, cmd


def medians(rows):
    out = {}
    for subset, keep in (("comparable", lambda r: not r["overloaded"]), ("all", lambda r: True)):
        chosen = [r for r in rows if keep(r)]
        out[subset] = {"stages": len(chosen)}
        for key in rows[0]["error_pct"]:
            out[subset][key] = median([abs(r["error_pct"][key]) for r in chosen])
    return out


def check(result, baseline_path, tolerance):
    """Lines naming every median error that grew by more than tolerance points."""
    try:
        with open(baseline_path, encoding="utf-8") as f:
            base = json.load(f)["median_abs_error_pct"]
    except OSError as e:
        raise RunError(f"{baseline_path}:1: field 'file': {e.strerror}") from None
    except json.JSONDecodeError as e:
        raise RunError(f"{baseline_path}:{e.lineno}: field 'document': {e.msg}") from None
    except (KeyError, TypeError):
        raise RunError(f"{baseline_path}:1: field 'median_abs_error_pct': missing") from None
    bad = []
    for subset, metrics in base.items():
        for key, was in metrics.items():
            if key == "stages":
                continue
            now = result["median_abs_error_pct"].get(subset, {}).get(key, math.nan)
            if not isinstance(was, (int, float)):
                raise RunError(f"{baseline_path}:1: field 'median_abs_error_pct.{subset}."
                               f"{key}': not a number (got {was!r})")
            if not math.isfinite(now) or now > was + tolerance:
                bad.append(f"{subset} {key}: median |error| {now:.1f}% > baseline {was:.1f}% "
                           f"+ {tolerance:g} points")
    return bad


def finite_or_null(x):
    """JSON has no NaN: an undefined number (no requests) is written as null."""
    if isinstance(x, float) and not math.isfinite(x):
        return None
    if isinstance(x, dict):
        return {k: finite_or_null(v) for k, v in x.items()}
    if isinstance(x, list):
        return [finite_or_null(v) for v in x]
    return x


def git_commit():
    """HEAD, marked '+uncommitted' when the engine's sources differ from it (the binary may
    include those changes)."""
    try:
        head = subprocess.run(["git", "-C", REPO, "rev-parse", "--short=12", "HEAD"],
                              capture_output=True, text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", REPO, "status", "--porcelain", "--", "core", "sim",
                                "cli"], capture_output=True, text=True, check=True).stdout
        return head + ("+uncommitted" if dirty.strip() else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_common_args(ap)
    ap.add_argument("--step-time", default="roofline", help="passed to kvsim replay")
    ap.add_argument("--seed", type=int, default=0, help="trace seed (make_trace.py)")
    ap.add_argument("--jobs", type=int, default=2, help="replays at once (default 2)")
    ap.add_argument("--runs", nargs="*", help="only runs whose name contains one of these")
    ap.add_argument("--json", metavar="OUT", help="write the numbers as JSON")
    ap.add_argument("--markdown", metavar="OUT", help="write the docs page")
    ap.add_argument("--check", metavar="BASELINE", help="baseline JSON (from --json)")
    ap.add_argument("--tolerance", type=float, default=1.0,
                    help="allowed growth of a median error over the baseline, percentage "
                         "points (default 1)")
    ap.add_argument("--quiet", action="store_true", help="no table on stdout")
    a = ap.parse_args(argv)
    if a.jobs < 1 or not math.isfinite(a.tolerance) or a.tolerance < 0:
        ap.error("--jobs must be >= 1 and --tolerance a finite number >= 0")
    return a


def main(argv=None):
    a = parse_args(argv)
    try:
        runs = find_runs(a.runs_dir, a.runs)
        if not os.access(a.kvsim, os.X_OK):
            raise RunError(f"{a.kvsim}:1: field '--kvsim': not an executable")
        with concurrent.futures.ThreadPoolExecutor(a.jobs) as pool:
            done = list(pool.map(lambda r: validate_run(a.runs_dir, r, a.kvsim, a.step_time,
                                                        a.seed), runs))
        rows = [row for rs, _ in done for row in rs]
        result = {"step_time": a.step_time, "seed": a.seed, "kvsim_commit": git_commit(),
                  "example_command": done[0][1], "median_abs_error_pct": medians(rows),
                  "stages": rows}
        if not a.quiet:
            report.print_table(result)
        if a.json:
            with open(a.json, "w", encoding="utf-8") as f:
                json.dump(finite_or_null(result), f, indent=1, sort_keys=True, allow_nan=False)
                f.write("\n")
        if a.markdown:
            with open(a.markdown, "w", encoding="utf-8") as f:
                f.write(report.markdown(result, argv if argv is not None else sys.argv[1:]))
        if a.check:
            bad = check(result, a.check, a.tolerance)
            for line in bad:
                print(f"validate: error grew: {line}", file=sys.stderr)
            if bad:
                return 1
    except RunError as e:
        print(f"validate: error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
