#!/usr/bin/env python3
"""Leave-one-run-out calibration of the physics step-time model on the 16 real vLLM H100 runs.

Scheme (docs/latency-validation.md states it for readers):

- Every run gets a `kvsim calibrate` run file (make_run.py): its trace, its server settings and
  one measured group per load stage that is not overloaded. The three `reasoning` runs of
  Llama-2-7b, Llama-2-70b and Mixtral have no such stage (every stage lost over 1 % of its
  requests to the client timeout), so they are never fitted on.
- A family is the runs of one model at one tensor-parallel size (here 4 runs each: Llama-2-7b
  TP 1, Llama-2-70b TP 4, Mixtral-8x7B TP 2, CodeLlama-34b TP 2), the case of a user who
  calibrates on their own model and card.
- Fold of run R: one `kvsim calibrate` on every other fitted run of R's family (3 runs for
  CodeLlama-34b, 2 for the other families when R is fitted on, 3 when R is a reasoning run),
  writing FOLDS/<R without its date>.json; R is then predicted with
  `--step-time physics:` that file. R's own measurements never enter its fold.
- --all-runs also fits once on every fitted run of all four models together (FOLDS/all-runs.json):
  whether one H100 calibration carries across models (in-sample for each run; with
  --all-runs-cv kvsim's own leave-one-run-out error over the 13 runs is added to the file).

Fitted coefficients: --fit (default beta1a,beta2b,beta3,beta6,alpha0: prefill compute, decode KV
reads, weight reads, per-sequence overhead, queueing before the engine; see DEFAULT_FIT), the rest
from --start (BLIS's shipped H100 coefficients). FOLDS/folds.json records for
every fold the held-out run, the runs fitted on, the command and its wall time. Then compare.py
writes the table (--markdown/--json). Deterministic: seeded traces, deterministic replays and
BOBYQA from a fixed start.
"""

import argparse
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import compare  # noqa: E402
import make_run  # noqa: E402
import measured  # noqa: E402
import validate  # noqa: E402
from located import RunError  # noqa: E402

REPO = validate.REPO
BLIS = "calibration/physics/h100-vllm-blis.json"
# kvsim calibrate's default set with beta3 (weight reads) in place of beta7 (per-step constant):
# within one dense model both are a fixed time per step (kvsim refuses the pair), and beta3 can go
# below BLIS's 1.36 x weight-read time, which the light-load TPOT of these runs needs; with beta7
# the fits left it at or within 1 us of its lower bound 0 in 8 of 16 folds.
DEFAULT_FIT = "beta1a,beta2b,beta3,beta6,alpha0"


def short(run):
    return run.split("-", 2)[-1]


def rel(path):
    return os.path.relpath(os.path.abspath(path), REPO)


def make_run_files(runs_dir, runs, work_dir, seed):
    """{run: run file path relative to the repository, or None when nothing can be fitted}."""
    out = {}
    for run in runs:
        p = make_run.write_run(runs_dir, run, os.path.join(work_dir, "runs"), seed)
        out[run] = rel(p) if p else None
    return out


def plan_folds(runs_dir, runs, run_files):
    """[(held-out run, [run files fitted on])], one per run, within its model and TP."""
    family = {}
    for run in runs:
        s = measured.read_server(os.path.join(runs_dir, run))
        family[run] = (s["model"], s["tensor_parallelism"])
    folds = []
    for run in runs:
        train = [run_files[r] for r in runs
                 if r != run and family[r] == family[run] and run_files[r]]
        if not train:
            raise RunError(f"{os.path.join(runs_dir, run)}:1: field 'model': no other run of "
                           f"{family[run][0]} at TP {family[run][1]} to fit on")
        folds.append((run, train))
    return folds


def calibrate(kvsim, inputs, fit, max_evaluations, out, report, cv):
    cmd = [kvsim, "calibrate", *inputs, "--fit", fit, "--start", BLIS,
           "--max-evaluations", str(max_evaluations),
           "--measured-vllm-version", "0.15.1", "-o", out, "--json", report]
    if not cv:
        cmd.append("--no-cross-validation")
    t0 = time.monotonic()
    p = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True)
    wall = time.monotonic() - t0
    if p.returncode != 0:
        last = (p.stderr.strip().splitlines() or ["(no message)"])[-1]
        raise RunError(f"{inputs[0]}:1: field 'kvsim calibrate': exit {p.returncode}: {last}")
    shown = " ".join(["kvsim"] + cmd[1:])
    return {"command": shown, "wall_s": round(wall, 1),
            "log": [ln for ln in p.stderr.splitlines() if "evaluations," not in ln
                    or ";" in ln]}


def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    validate.add_common_args(ap)
    ap.add_argument("--work-dir", default=os.path.join(REPO, "build", "latency-validation"),
                    help="run files, traces and fit reports (not committed)")
    ap.add_argument("--folds-dir", default=os.path.join(HERE, "folds"),
                    help="fold calibrations and folds.json")
    ap.add_argument("--fit", default=DEFAULT_FIT, help="coefficients to fit (kvsim calibrate)")
    ap.add_argument("--max-evaluations", type=int, default=120)
    ap.add_argument("--seed", type=int, default=0, help="trace seed (make_trace.py)")
    ap.add_argument("--all-runs", action="store_true",
                    help="also fit once on every fitted run of all models")
    ap.add_argument("--all-runs-cv", action="store_true",
                    help="with --all-runs: kvsim's cross-validation too (13 more fits)")
    ap.add_argument("--reuse", action="store_true",
                    help="keep the folds in --folds-dir/folds.json made with the same settings "
                         "and fitted on the same runs; fit only the rest")
    ap.add_argument("--only-table", action="store_true",
                    help="no fitting: the table from the fold files already in --folds-dir")
    ap.add_argument("--markdown", metavar="OUT", help="write the docs page (compare.py)")
    ap.add_argument("--json", metavar="OUT", help="write the table's numbers (compare.py)")
    return ap.parse_args(argv)


def reusable(a):
    """The existing folds.json when it was made with the same settings, else {}."""
    try:
        with open(os.path.join(a.folds_dir, "folds.json"), encoding="utf-8") as f:
            old = json.load(f)
    except (OSError, ValueError):
        return {}
    same = (old.get("fit"), old.get("max_evaluations"), old.get("seed")) == (
        a.fit, a.max_evaluations, a.seed)
    return old if same else {}


def fit_all(a, runs):
    run_files = make_run_files(a.runs_dir, runs, a.work_dir, a.seed)
    os.makedirs(a.folds_dir, exist_ok=True)
    reports = os.path.join(a.work_dir, "reports")
    os.makedirs(reports, exist_ok=True)
    index = {"fit": a.fit, "start": BLIS, "max_evaluations": a.max_evaluations,
             "seed": a.seed, "kvsim_commit": validate.git_commit(), "folds": []}
    old = reusable(a) if a.reuse else {}
    if old:
        index["kvsim_commit"] = old["kvsim_commit"]
    for run, train in plan_folds(a.runs_dir, runs, run_files):
        out = os.path.join(a.folds_dir, short(run) + ".json")
        kept = [f for f in old.get("folds", []) if f["held_out"] == run
                and f["fitted_on"] == train and os.path.isfile(os.path.join(REPO, f["file"]))]
        if kept:
            index["folds"].append(kept[0])
            continue
        index["kvsim_commit"] = validate.git_commit()
        r = calibrate(a.kvsim, train, a.fit, a.max_evaluations, rel(out),
                      rel(os.path.join(reports, short(run) + ".json")), cv=False)
        summary = [ln for ln in r["log"] if "fit error" in ln]
        print(f"loo_calibrate: {short(run)}: {r['wall_s']} s; {''.join(summary[-1:])}",
              file=sys.stderr)
        index["folds"].append({"held_out": run, "file": rel(out), "fitted_on": train, **r})
    if a.all_runs:
        train = [p for p in run_files.values() if p]
        out = os.path.join(a.folds_dir, "all-runs.json")
        kept = old.get("all_runs")
        if kept and kept["fitted_on"] == train and kept.get("cv") == a.all_runs_cv \
                and os.path.isfile(os.path.join(REPO, kept["file"])):
            index["all_runs"] = kept
    if a.all_runs and "all_runs" not in index:
        r = calibrate(a.kvsim, train, a.fit, a.max_evaluations, rel(out),
                      rel(os.path.join(reports, "all-runs.json")), cv=a.all_runs_cv)
        print(f"loo_calibrate: all runs: {r['wall_s']} s", file=sys.stderr)
        index["all_runs"] = {"file": rel(out), "fitted_on": train, "cv": a.all_runs_cv, **r}
    index["total_wall_s"] = round(sum(f["wall_s"] for f in index["folds"]), 1)
    with open(os.path.join(a.folds_dir, "folds.json"), "w", encoding="utf-8") as f:
        json.dump(index, f, indent=1)
        f.write("\n")


def main(argv=None):
    a = parse_args(argv)
    try:
        runs = validate.find_runs(a.runs_dir, None)
        if not os.access(a.kvsim, os.X_OK):
            raise RunError(f"{a.kvsim}:1: field '--kvsim': not an executable")
        if not a.only_table:
            fit_all(a, runs)
        if a.markdown or a.json:
            argv_shown = argv if argv is not None else sys.argv[1:]
            compare.write(a.runs_dir, a.kvsim, a.folds_dir, a.seed, a.markdown, a.json,
                          "python3 tools/latency_validation/loo_calibrate.py "
                          + " ".join(argv_shown))
    except RunError as e:
        print(f"loo_calibrate: error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
